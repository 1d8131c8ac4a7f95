package jinja

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// String is Python's str(v) as Jinja2 prints it ({{ v }}): True/False/None, floats as repr,
// containers as Python's repr, Undefined as "". It walks the whole value, without limits: a
// Func given a value a template built prints it under the render's limits with Call.Str.
func (v Value) String() string {
	if v.k == KindString {
		return v.s
	}
	b := &bounded{}
	writeStr(b, v)
	return b.String()
}

// Repr is Python's repr(v). Like String, it walks the whole value.
func (v Value) Repr() string {
	b := &bounded{}
	writeRepr(b, v)
	return b.String()
}

// maxReprInMessage bounds the repr of a value that an error message shows (an undefined
// element's key, the value list.index did not find): a longer one is cut, with "..." after
// it, where Python would print it all. Messages are read by people, and a value a template
// built can be a DAG whose repr is exponentially long.
const maxReprInMessage = 1 << 16

// repr is Python's repr(v) for an error message: at most about maxReprInMessage bytes.
func repr(v Value) string {
	b := &bounded{root: true, max: maxReprInMessage}
	writeRepr(b, v)
	if b.err != nil {
		return b.String() + "..."
	}
	return b.String()
}

// writeStr writes str(v).
func writeStr(b *bounded, v Value) {
	switch v.k {
	case KindString:
		b.WriteString(v.s)
	case KindUndefined:
	default:
		writeRepr(b, v)
	}
}

// maxNest bounds the nesting of values that printing, comparing and hashing recurse into
// (Python stops at its recursion limit, about 1000).
const maxNest = 1000

func writeRepr(b *bounded, v Value) { writeReprN(b, v, 0) }

// writeReprN writes repr(v) at nesting depth. It charges a step per value (bounded.visit) and
// returns as soon as b has failed, so that the walk of a value shared many times over ends at
// the first limit met instead of visiting every path through it.
func writeReprN(b *bounded, v Value, depth int) {
	if !b.visit() {
		return
	}
	if depth > maxNest {
		if b.err == nil {
			b.err = &Error{Type: "RecursionError", Msg: "maximum recursion depth exceeded while getting the repr of an object", Python: true}
		}
		return
	}
	switch v.k {
	case KindUndefined:
		b.WriteString("Undefined")
	case KindNone:
		b.WriteString("None")
	case KindBool:
		if v.b() {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case KindInt:
		b.WriteString(strconv.FormatInt(v.n, 10))
	case KindFloat:
		b.WriteString(floatRepr(v.f()))
	case KindString:
		if v.safe {
			b.WriteString("Markup(")
			writeQuoted(b, v.s)
			b.WriteByte(')')
			return
		}
		writeQuoted(b, v.s)
	case KindList, KindTuple:
		open, close := byte('['), byte(']')
		if v.k == KindTuple {
			open, close = '(', ')'
		}
		b.WriteByte(open)
		items := v.list()
		for i, it := range items {
			if b.err != nil {
				return
			}
			if i > 0 {
				b.WriteString(", ")
			}
			writeReprN(b, it, depth+1)
		}
		if v.k == KindTuple && len(items) == 1 {
			b.WriteByte(',')
		}
		b.WriteByte(close)
	case KindDict:
		writeDictRepr(b, v.dict(), depth)
	case KindNamespace:
		b.WriteString("<Namespace ")
		writeDictRepr(b, v.p.(*namespace).d, depth)
		b.WriteByte('>')
	case KindCallable:
		switch f := v.p.(type) {
		case *macro:
			b.WriteString("<Macro ")
			writeQuoted(b, f.name)
			b.WriteByte('>')
		case *goFunc:
			b.WriteString("<function " + f.name + ">")
		case *method:
			b.WriteString("<built-in method " + f.name + " of " + typeName(f.recv) + " object>")
		default:
			b.WriteString("<" + typeName(v) + ">")
		}
	default:
		b.WriteString("<" + typeName(v) + ">")
	}
}

func writeDictRepr(b *bounded, d *Dict, depth int) {
	b.WriteByte('{')
	for i, k := range d.keys {
		if b.err != nil {
			return
		}
		if i > 0 {
			b.WriteString(", ")
		}
		writeReprN(b, k, depth+1)
		b.WriteString(": ")
		writeReprN(b, d.vals[i], depth+1)
	}
	b.WriteByte('}')
}

// writeQuoted is Python's repr of a str: single quotes unless the string has ' and no ".
func writeQuoted(b *bounded, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		if b.err != nil {
			return
		}
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(fmt.Sprintf(`\x%02x`, r))
		case r < 0x7f:
			b.WriteByte(byte(r))
		case pyPrintable(r):
			b.WriteRune(r)
		case r < 0x100:
			b.WriteString(fmt.Sprintf(`\x%02x`, r))
		case r < 0x10000:
			b.WriteString(fmt.Sprintf(`\u%04x`, r))
		default:
			b.WriteString(fmt.Sprintf(`\U%08x`, r))
		}
	}
	b.WriteByte(q)
}

// pyPrintable is Python's str.isprintable for one code point (non-ASCII).
func pyPrintable(r rune) bool {
	if r == utf8.RuneError {
		return true
	}
	return unicode.IsPrint(r)
}

// floatRepr is Python's repr(float): the shortest round-tripping digits, positional for
// exponents in [-4, 16), scientific otherwise, always with a '.' or an exponent.
func floatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	neg := ""
	if s[0] == '-' {
		neg, s = "-", s[1:]
	}
	e := strings.IndexByte(s, 'e')
	mant, exp := s[:e], s[e+1:]
	x, _ := strconv.Atoi(exp)
	digits := strings.Replace(mant, ".", "", 1)
	if x >= -4 && x < 16 {
		var r string
		if x >= 0 {
			if len(digits) <= x+1 {
				r = digits + strings.Repeat("0", x+1-len(digits)) + ".0"
			} else {
				r = digits[:x+1] + "." + digits[x+1:]
			}
		} else {
			r = "0." + strings.Repeat("0", -x-1) + digits
		}
		return neg + r
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	sign := "+"
	if x < 0 {
		sign, x = "-", -x
	}
	return fmt.Sprintf("%s%se%s%02d", neg, m, sign, x)
}

// jsonOpts are json.dumps' arguments that tojson passes on.
type jsonOpts struct {
	ensureASCII bool
	indent      string
	hasIndent   bool
	itemSep     string
	keySep      string
	sortKeys    bool
}

// writeJSON is Python's json.dumps.
func writeJSON(b *bounded, v Value, o *jsonOpts, level int) error {
	if !b.visit() {
		return b.err
	}
	if level > maxNest {
		return &Error{Type: "RecursionError", Msg: "maximum recursion depth exceeded while encoding a JSON object", Python: true}
	}
	switch v.k {
	case KindNone:
		b.WriteString("null")
	case KindBool:
		if v.b() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case KindInt:
		b.WriteString(strconv.FormatInt(v.n, 10))
	case KindFloat:
		f := v.f()
		switch {
		case math.IsInf(f, 1):
			b.WriteString("Infinity")
		case math.IsInf(f, -1):
			b.WriteString("-Infinity")
		case math.IsNaN(f):
			b.WriteString("NaN")
		default:
			b.WriteString(floatRepr(f))
		}
	case KindString:
		writeJSONString(b, v.s, o.ensureASCII)
	case KindList, KindTuple:
		items := v.list()
		if len(items) == 0 {
			b.WriteString("[]")
			return b.err
		}
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			jsonNewline(b, o, level+1)
			if err := writeJSON(b, it, o, level+1); err != nil {
				return err
			}
		}
		jsonNewline(b, o, level)
		b.WriteByte(']')
	case KindDict:
		d := v.dict()
		if d.Len() == 0 {
			b.WriteString("{}")
			return b.err
		}
		order := make([]int, d.Len())
		for i := range order {
			order[i] = i
		}
		if o.sortKeys {
			var err error
			sort.SliceStable(order, func(i, j int) bool {
				if err != nil {
					return false
				}
				c, e := compare(b.bud, d.keys[order[i]], d.keys[order[j]])
				if e != nil {
					err = e
				}
				return c < 0
			})
			if err != nil {
				return err
			}
		}
		b.WriteByte('{')
		for n, i := range order {
			if n > 0 {
				b.WriteString(o.itemSep)
			}
			jsonNewline(b, o, level+1)
			k := d.keys[i]
			switch k.k {
			case KindString:
				writeJSONString(b, k.s, o.ensureASCII)
			case KindInt, KindFloat, KindBool, KindNone:
				b.WriteByte('"')
				if err := writeJSON(b, k, o, level+1); err != nil {
					return err
				}
				b.WriteByte('"')
			default:
				return typeErr("keys must be str, int, float, bool or None, not %s", typeName(k))
			}
			b.WriteString(o.keySep)
			if err := writeJSON(b, d.vals[i], o, level+1); err != nil {
				return err
			}
		}
		jsonNewline(b, o, level)
		b.WriteByte('}')
	default:
		return typeErr("Object of type %s is not JSON serializable", typeName(v))
	}
	return b.err
}

func jsonNewline(b *bounded, o *jsonOpts, level int) {
	if !o.hasIndent {
		return
	}
	b.WriteByte('\n')
	for range level {
		b.WriteString(o.indent)
	}
}

func writeJSONString(b *bounded, s string, ascii bool) {
	b.WriteByte('"')
	for _, r := range s {
		if b.err != nil {
			return
		}
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20:
				b.WriteString(fmt.Sprintf(`\u%04x`, r))
			case ascii && r > 0x7e:
				if r >= 0x10000 {
					r -= 0x10000
					b.WriteString(fmt.Sprintf(`\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff)))
				} else {
					b.WriteString(fmt.Sprintf(`\u%04x`, r))
				}
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
}
