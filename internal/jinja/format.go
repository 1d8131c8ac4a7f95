package jinja

import (
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Python's string formatting: str.format (the sandbox's formatter) and the % operator (and
// the format filter).

// strFormat is str.format(*args, **kwargs).
func (r *renderer) strFormat(s string, args []Value, kw []Kwarg) (Value, error) {
	b := &bounded{bud: &r.bud}
	auto := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '}' {
			if i+1 < len(s) && s[i+1] == '}' {
				i++
				b.WriteByte('}')
				continue
			}
			return Value{}, valueErr("Single '}' encountered in format string")
		}
		if c != '{' {
			b.WriteByte(c)
			continue
		}
		if i+1 < len(s) && s[i+1] == '{' {
			i++
			b.WriteByte('{')
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return Value{}, valueErr("Single '{' encountered in format string")
		}
		field := s[i+1 : i+end]
		i += end
		spec := ""
		if k := strings.IndexByte(field, ':'); k >= 0 {
			field, spec = field[:k], field[k+1:]
		}
		conv := byte(0)
		if k := strings.IndexByte(field, '!'); k >= 0 {
			if k+2 != len(field) {
				return Value{}, valueErr("expected ':' after conversion specifier")
			}
			conv = field[k+1]
			field = field[:k]
		}
		// the first part of the field: an index, a name, or nothing (automatic numbering)
		k := strings.IndexAny(field, ".[")
		if k < 0 {
			k = len(field)
		}
		head, rest := field[:k], field[k:]
		var v Value
		switch {
		case head == "":
			if auto >= len(args) {
				return Value{}, &Error{Type: "IndexError", Msg: "tuple index out of range", Python: true}
			}
			v = args[auto]
			auto++
		case head[0] >= '0' && head[0] <= '9':
			n, err := strconv.Atoi(head)
			if err != nil || n >= len(args) {
				return Value{}, &Error{Type: "IndexError", Msg: "tuple index out of range", Python: true}
			}
			v = args[n]
		default:
			found := false
			for _, a := range kw {
				if a.Name == head {
					v, found = a.Value, true
				}
			}
			if !found {
				return Value{}, &Error{Type: "KeyError", Msg: repr(String(head)), Python: true}
			}
		}
		for rest != "" {
			var err error
			if rest[0] == '.' {
				k := strings.IndexAny(rest[1:], ".[")
				if k < 0 {
					k = len(rest) - 1
				}
				if v, err = r.getattr(v, rest[1:1+k]); err != nil {
					return Value{}, err
				}
				rest = rest[1+k:]
				continue
			}
			k := strings.IndexByte(rest, ']')
			if k < 0 {
				return Value{}, valueErr("Missing ']' in format string")
			}
			key := rest[1:k]
			var kv Value = String(key)
			if n, err := strconv.Atoi(key); err == nil {
				kv = Int(int64(n))
			}
			if v, err = r.getitem(v, kv); err != nil {
				return Value{}, err
			}
			rest = rest[k+1:]
		}
		switch conv {
		case 0:
		case 's':
			str, err := r.print(v)
			if err != nil {
				return Value{}, err
			}
			v = String(str)
		case 'r', 'a':
			str, err := r.repr(v)
			if err != nil {
				return Value{}, err
			}
			v = String(str)
		default:
			return Value{}, valueErr("Unknown conversion specifier %c", conv)
		}
		if err := formatSpec(b, v, spec); err != nil {
			return Value{}, err
		}
		if b.err != nil {
			return Value{}, b.err
		}
	}
	out, err := b.result()
	return String(out), err
}

// fmtSpec is a parsed format spec: [[fill]align][sign][#][0][width][,_][.precision][type].
type fmtSpec struct {
	fill              string
	align, sign, typ  byte
	alt, zero         bool
	width, prec       int
	hasPrec, grouping bool
	group             byte
}

func parseSpec(spec string) (fmtSpec, error) {
	f := fmtSpec{fill: " ", prec: -1}
	s := spec
	if r, n := utf8.DecodeRuneInString(s); n > 0 && n < len(s) && strings.IndexByte("<>=^", s[n]) >= 0 {
		f.fill, f.align, s = string(r), s[n], s[n+1:]
	} else if s != "" && strings.IndexByte("<>=^", s[0]) >= 0 {
		f.align, s = s[0], s[1:]
	}
	if s != "" && strings.IndexByte("+- ", s[0]) >= 0 {
		f.sign, s = s[0], s[1:]
	}
	if s != "" && s[0] == '#' {
		f.alt, s = true, s[1:]
	}
	if s != "" && s[0] == '0' {
		f.zero, s = true, s[1:]
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	f.width, _ = strconv.Atoi(s[:i])
	s = s[i:]
	if s != "" && (s[0] == ',' || s[0] == '_') {
		f.grouping, f.group, s = true, s[0], s[1:]
	}
	if s != "" && s[0] == '.' {
		i = 1
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == 1 {
			return f, valueErr("Format specifier missing precision")
		}
		f.prec, _ = strconv.Atoi(s[1:i])
		f.hasPrec = true
		s = s[i:]
	}
	if len(s) > 1 {
		return f, valueErr("Invalid format specifier '%s'", spec)
	}
	if s != "" {
		f.typ = s[0]
	}
	if f.width > 1<<20 || f.prec > 1<<20 {
		return f, engineErr("ValueError", "format width or precision too large")
	}
	return f, nil
}

// formatSpec writes format(v, spec) to b.
func formatSpec(b *bounded, v Value, spec string) error {
	if spec == "" {
		writeStr(b, v)
		return nil
	}
	f, err := parseSpec(spec)
	if err != nil {
		return err
	}
	var body, sign string
	numeric := false
	switch v.k {
	case KindString:
		if f.typ != 0 && f.typ != 's' {
			return valueErr("Unknown format code '%c' for object of type 'str'", f.typ)
		}
		body = v.s
		if f.hasPrec {
			body = truncRunes(body, f.prec)
		}
	case KindInt, KindBool:
		numeric = true
		n := v.n
		switch f.typ {
		case 0, 'd', 'n', 'b', 'o', 'x', 'X', 'c':
			if f.hasPrec {
				return valueErr("Precision not allowed in integer format specifier")
			}
			if n < 0 {
				sign = "-"
			}
			u := uint64(abs64(n))
			switch f.typ {
			case 'b':
				body = strconv.FormatUint(u, 2)
			case 'o':
				body = strconv.FormatUint(u, 8)
			case 'x':
				body = strconv.FormatUint(u, 16)
			case 'X':
				body = strings.ToUpper(strconv.FormatUint(u, 16))
			case 'c':
				body, sign = string(rune(n)), ""
			default:
				body = strconv.FormatUint(u, 10)
				if f.grouping {
					body = group(body, f.group)
				}
			}
			if f.alt && f.typ != 0 && strings.IndexByte("box", f.typ|0x20) >= 0 {
				body = "0" + string(f.typ) + body
			}
		default:
			return formatSpec(b, Float(float64(n)), spec)
		}
	case KindFloat:
		numeric = true
		x := v.f()
		if math.Signbit(x) && !math.IsNaN(x) {
			sign, x = "-", -x
		}
		body = fmtFloat(x, f.typ, f.prec, f.hasPrec, f.alt)
		if f.grouping {
			intPart := body
			rest := ""
			if k := strings.IndexAny(body, ".e"); k >= 0 {
				intPart, rest = body[:k], body[k:]
			}
			body = group(intPart, f.group) + rest
		}
	default:
		return typeErr("unsupported format string passed to %s.__format__", typeName(v))
	}
	if numeric && sign == "" && (f.sign == '+' || f.sign == ' ') {
		sign = string(f.sign)
	}
	align := f.align
	if align == 0 {
		if numeric {
			align = '>'
		} else {
			align = '<'
		}
	}
	fill := f.fill
	if f.zero && f.align == 0 && numeric {
		align, fill = '=', "0"
	}
	// the pieces written one by one: body can be a string as long as MaxBytes
	pad := max(f.width-runeLen(sign)-runeLen(body), 0)
	left, right := 0, 0
	switch align {
	case '<':
		right = pad
	case '^':
		left, right = pad/2, pad-pad/2
	case '=':
		b.WriteString(sign)
		sign = ""
		left = pad
	default:
		left = pad
	}
	b.writeRepeat(fill, left)
	b.WriteString(sign)
	b.WriteString(body)
	b.writeRepeat(fill, right)
	return nil
}

func truncRunes(s string, n int) string {
	if n < 0 {
		return s
	}
	return s[:runeToByteIndex(s, n)]
}

func group(digits string, sep byte) string {
	if len(digits) <= 3 {
		return digits
	}
	var b strings.Builder
	lead := len(digits) % 3
	if lead > 0 {
		b.WriteString(digits[:lead])
	}
	for i := lead; i < len(digits); i += 3 {
		if b.Len() > 0 {
			b.WriteByte(sep)
		}
		b.WriteString(digits[i : i+3])
	}
	return b.String()
}

// fmtFloat formats a non-negative float for a format type (f, F, e, E, g, G, %, or none).
func fmtFloat(x float64, typ byte, prec int, hasPrec, alt bool) string {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		s := "inf"
		if math.IsNaN(x) {
			s = "nan"
		}
		if typ == 'F' || typ == 'E' || typ == 'G' {
			s = strings.ToUpper(s)
		}
		return s
	}
	if !hasPrec {
		prec = 6
	}
	switch typ {
	case 'f', 'F':
		return strconv.FormatFloat(x, 'f', prec, 64)
	case 'e', 'E':
		s := strconv.FormatFloat(x, 'e', prec, 64)
		if typ == 'E' {
			s = strings.ToUpper(s)
		}
		return s
	case '%':
		return strconv.FormatFloat(x*100, 'f', prec, 64) + "%"
	case 'g', 'G':
		if prec == 0 {
			prec = 1
		}
		s := strconv.FormatFloat(x, 'g', prec, 64)
		if alt && !strings.ContainsAny(s, ".e") {
			s += "."
		}
		if typ == 'G' {
			s = strings.ToUpper(s)
		}
		return s
	}
	if !hasPrec {
		return floatRepr(x)
	}
	// no type with a precision: like g, but always with a digit after the point
	if prec == 0 {
		prec = 1
	}
	s := strconv.FormatFloat(x, 'g', prec, 64)
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// percentFormat is Python's str % args.
func (r *renderer) percentFormat(s string, arg Value) (Value, error) {
	var args []Value
	var mapping *Dict
	switch arg.k {
	case KindTuple:
		args = arg.list()
	case KindDict:
		mapping = arg.dict()
		args = []Value{arg}
	default:
		args = []Value{arg}
	}
	b := &bounded{bud: &r.bud}
	ai := 0
	usedMapping := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			return Value{}, valueErr("incomplete format")
		}
		var v Value
		hasKey := false
		if s[i] == '(' {
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				return Value{}, valueErr("incomplete format key")
			}
			if mapping == nil {
				return Value{}, typeErr("format requires a mapping")
			}
			key := s[i+1 : i+end]
			var ok bool
			if v, ok = mapping.GetString(key); !ok {
				return Value{}, &Error{Type: "KeyError", Msg: repr(String(key)), Python: true}
			}
			hasKey, usedMapping = true, true
			i += end + 1
		}
		spec := fmtSpec{fill: " ", prec: -1}
		for ; i < len(s) && strings.IndexByte("-+ #0", s[i]) >= 0; i++ {
			switch s[i] {
			case '-':
				spec.align = '<'
			case '+', ' ':
				if spec.sign != '+' {
					spec.sign = s[i]
				}
			case '#':
				spec.alt = true
			case '0':
				spec.zero = true
			}
		}
		j := i
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		spec.width, _ = strconv.Atoi(s[i:j])
		i = j
		if i < len(s) && s[i] == '.' {
			j = i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			spec.prec, _ = strconv.Atoi(s[i+1 : j])
			spec.hasPrec = true
			i = j
		}
		if spec.width > 1<<20 || spec.prec > 1<<20 {
			return Value{}, engineErr("ValueError", "format width or precision too large")
		}
		if i >= len(s) {
			return Value{}, valueErr("incomplete format")
		}
		typ := s[i]
		if typ == '%' {
			b.WriteByte('%')
			continue
		}
		if !hasKey {
			if ai >= len(args) {
				return Value{}, typeErr("not enough arguments for format string")
			}
			v = args[ai]
			ai++
		}
		var body string
		numeric := false
		neg := false
		switch typ {
		case 's', 'r', 'a':
			var err error
			if typ == 's' {
				body, err = r.print(v)
			} else {
				body, err = r.repr(v)
			}
			if err != nil {
				return Value{}, err
			}
			if spec.hasPrec {
				body = truncRunes(body, spec.prec)
			}
		case 'd', 'i', 'u', 'x', 'X', 'o', 'c':
			var n int64
			switch {
			case v.isIntLike():
				n = v.n
			case v.k == KindFloat && typ != 'x' && typ != 'X' && typ != 'o' && typ != 'c':
				f := v.f()
				if math.IsInf(f, 0) || math.IsNaN(f) || math.Abs(f) >= 1<<63 {
					return Value{}, engineErr("OverflowError", "cannot convert float %s to integer", floatRepr(f))
				}
				n = int64(f)
			default:
				if typ == 'c' {
					if v.k == KindString && runeLen(v.s) == 1 {
						body = v.s
						break
					}
					return Value{}, typeErr("%%c requires int or char")
				}
				return Value{}, typeErr("%%%c format: a real number is required, not %s", typ, typeName(v))
			}
			if body != "" {
				break
			}
			if typ == 'c' {
				body = string(rune(n))
				break
			}
			numeric = true
			neg = n < 0
			u := uint64(abs64(n))
			switch typ {
			case 'x':
				body = strconv.FormatUint(u, 16)
			case 'X':
				body = strings.ToUpper(strconv.FormatUint(u, 16))
			case 'o':
				body = strconv.FormatUint(u, 8)
			default:
				body = strconv.FormatUint(u, 10)
			}
			if spec.hasPrec && len(body) < spec.prec {
				body = strings.Repeat("0", spec.prec-len(body)) + body
			}
			if spec.alt && (typ == 'x' || typ == 'X' || typ == 'o') {
				body = "0" + string(typ) + body
			}
		case 'f', 'F', 'e', 'E', 'g', 'G':
			if !v.isNum() {
				return Value{}, typeErr("must be real number, not %s", typeName(v))
			}
			x := toFloat(v)
			numeric = true
			if math.Signbit(x) && !math.IsNaN(x) {
				neg, x = true, -x
			}
			body = fmtFloat(x, typ, spec.prec, spec.hasPrec, spec.alt)
		default:
			return Value{}, valueErr("unsupported format character '%c' (0x%x) at index %d", typ, typ, i)
		}
		sign := ""
		if numeric {
			if neg {
				sign = "-"
			} else if spec.sign != 0 {
				sign = string(spec.sign)
			}
		}
		// the pieces written one by one: body can be a string as long as MaxBytes
		pad := max(spec.width-runeLen(sign)-runeLen(body), 0)
		switch {
		case spec.align == '<':
			b.WriteString(sign)
			b.WriteString(body)
			b.writeRepeat(" ", pad)
		case spec.zero && numeric:
			b.WriteString(sign)
			b.writeRepeat("0", pad)
			b.WriteString(body)
		default:
			b.writeRepeat(" ", pad)
			b.WriteString(sign)
			b.WriteString(body)
		}
		if b.err != nil {
			return Value{}, b.err
		}
	}
	if ai < len(args) && !usedMapping && !(mapping != nil && ai == 0) {
		return Value{}, typeErr("not all arguments converted during string formatting")
	}
	out, err := b.result()
	return String(out), err
}
