package jinja

import (
	"html"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// filterFunc is a filter: the value, then the filter's arguments.
type filterFunc func(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error)

var filters map[string]filterFunc

func init() {
	filters = map[string]filterFunc{
		"abs": fAbs, "attr": fAttr, "batch": fBatch, "capitalize": strFilter(pyCapitalize, nil),
		"center": fCenter, "count": fLength, "d": fDefault, "default": fDefault, "dictsort": fDictsort,
		"e": fEscape, "escape": fEscape, "first": fFirst, "float": fFloat, "forceescape": fEscape,
		"format": fFormat, "groupby": fGroupby, "indent": fIndent, "int": fInt, "items": fItems,
		"join": fJoin, "last": fLast, "length": fLength, "list": fList, "lower": strFilter(pyLower, strings.ToLower),
		"map": fMap, "max": fMinMax(true), "min": fMinMax(false), "reject": fSelect(false, false),
		"rejectattr": fSelect(false, true), "replace": fReplace, "reverse": fReverse, "round": fRound,
		"safe": fSafe, "select": fSelect(true, false), "selectattr": fSelect(true, true), "slice": fSlice,
		"sort": fSort, "string": fString, "striptags": fStriptags, "sum": fSum,
		"title": strFilter(jinjaTitle, nil), "tojson": fTojson, "trim": fTrim, "truncate": fTruncate,
		"unique": fUnique, "upper": strFilter(pyUpper, strings.ToUpper), "wordcount": fWordcount,
	}
}

// genList is a list standing for one of Python's one-shot iterators (what map, select, ...
// return): always true, no len(), consumed by the first iteration.
func genList(items []Value, name string) Value {
	return Value{k: KindList, p: &listObj{items: items, gen: name}}
}

// strFilter is a filter that maps str(v) by the case mapping f (ascii: its faster form for ASCII
// strings, or nil), under the budget (renderer.caseMapped).
func strFilter(f func(*bounded, string), ascii func(string) string) filterFunc {
	return func(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
		s, err := r.str(v)
		if err != nil {
			return Value{}, err
		}
		return r.caseMapped(s, f, ascii)
	}
}

func fAbs(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	switch v.k {
	case KindInt, KindBool:
		if v.n == math.MinInt64 {
			return Value{}, overflowErr(0)
		}
		return Int(abs64(v.n)), nil
	case KindFloat:
		return Float(math.Abs(v.f())), nil
	case KindUndefined:
		return Value{}, undefError(v)
	}
	return Value{}, typeErr("bad operand type for abs(): '%s'", typeName(v))
}

func fAttr(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("attr", args, kw, "name")
	if err != nil {
		return Value{}, err
	}
	name, err := r.str(a[0])
	if err != nil {
		return Value{}, err
	}
	if v.k == KindUndefined {
		return Value{}, undefError(v)
	}
	if x, ok, err := r.pyAttr(v, name); ok || err != nil {
		return x, err
	}
	return undefAttr(v, String(name)), nil
}

func fCenter(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("center", args, kw, "width")
	if err != nil {
		return Value{}, err
	}
	w, err := argInt("center", a[0], 80)
	if err != nil {
		return Value{}, err
	}
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	if err := r.bud.alloc(padSize(s, w, " ")); err != nil {
		return Value{}, err
	}
	return String(pyPad(s, int(w), " ", 'c')), nil
}

func fDefault(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("default", args, kw, "default_value", "boolean")
	if err != nil {
		return Value{}, err
	}
	def := a[0]
	if !has(def) {
		def = String("")
	}
	if v.k == KindUndefined || (has(a[1]) && a[1].Truth() && !v.Truth()) {
		return def, nil
	}
	return v, nil
}

func fEscape(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	if v.k == KindString && v.safe {
		return v, nil
	}
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	size := int64(len(s))
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '&', '"', '\'':
			size += 4
		case '<', '>':
			size += 3
		}
	}
	if err := r.bud.alloc(size); err != nil {
		return Value{}, err
	}
	return Value{k: KindString, s: htmlEscaper.Replace(s), safe: true}, nil
}

// htmlEscaper is markupsafe's escape: &, <, >, " and '.
var htmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")

func fSafe(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	return Value{k: KindString, s: s, safe: true}, nil
}

func fFirst(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	items, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	if len(items) == 0 {
		return undefHint("No first item, sequence was empty."), nil
	}
	return items[0], nil
}

func fLast(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	if l, ok := v.p.(*listObj); ok && l.gen != "" {
		return Value{}, typeErr("'%s' object is not reversible", l.gen)
	}
	items, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	if len(items) == 0 {
		return undefHint("No last item, sequence was empty."), nil
	}
	return items[len(items)-1], nil
}

// pyFloat is Python's float(str).
func pyFloat(s string) (float64, bool) {
	t := strings.ReplaceAll(strings.TrimFunc(s, pyIsSpace), "_", "")
	switch strings.ToLower(strings.TrimLeft(t, "+-")) {
	case "inf", "infinity", "nan":
	default:
		if strings.ContainsAny(strings.ToLower(t), "xpn") {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil && f == 0 {
		return 0, false
	}
	return f, true
}

func fFloat(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("float", args, kw, "default")
	if err != nil {
		return Value{}, err
	}
	def := a[0]
	if !has(def) {
		def = Float(0)
	}
	switch v.k {
	case KindInt, KindBool:
		return Float(float64(v.n)), nil
	case KindFloat:
		return v, nil
	case KindString:
		if f, ok := pyFloat(v.s); ok {
			return Float(f), nil
		}
	}
	return def, nil
}

func fInt(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("int", args, kw, "default", "base")
	if err != nil {
		return Value{}, err
	}
	def := a[0]
	if !has(def) {
		def = Int(0)
	}
	base, err := argInt("int", a[1], 10)
	if err != nil {
		return Value{}, err
	}
	switch v.k {
	case KindInt, KindBool:
		return Int(v.n), nil
	case KindFloat:
		f := v.f()
		if math.IsNaN(f) || math.IsInf(f, 0) || math.Abs(f) >= 1<<63 {
			return def, nil
		}
		return Int(int64(f)), nil
	case KindString:
		t := strings.TrimFunc(v.s, pyIsSpace)
		if n, ok := pyParseInt(t, int(base)); ok {
			return Int(n), nil
		}
		if f, ok := pyFloat(t); ok && !math.IsNaN(f) && !math.IsInf(f, 0) && math.Abs(f) < 1<<63 {
			return Int(int64(f)), nil
		}
	}
	return def, nil
}

// pyParseInt is Python's int(s, base) for base 10, 2, 8, 16 or 0.
func pyParseInt(s string, base int) (int64, bool) {
	if strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
		return 0, false
	}
	t := strings.ReplaceAll(s, "_", "")
	neg := false
	if t != "" && (t[0] == '+' || t[0] == '-') {
		neg, t = t[0] == '-', t[1:]
	}
	low := strings.ToLower(t)
	for _, p := range []struct {
		pre string
		b   int
	}{{"0x", 16}, {"0o", 8}, {"0b", 2}} {
		if strings.HasPrefix(low, p.pre) && (base == p.b || base == 0) {
			t, base = t[2:], p.b
		}
	}
	if base == 0 {
		base = 10
	}
	if t == "" || t[0] == '+' || t[0] == '-' {
		return 0, false
	}
	n, err := strconv.ParseInt(t, base, 64)
	if err != nil {
		return 0, false
	}
	if neg {
		n = -n
	}
	return n, true
}

func fFormat(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	if len(args) > 0 && len(kw) > 0 {
		return Value{}, &Error{Type: "FilterArgumentError", Msg: "can't handle positional and keyword arguments at the same time", Python: true}
	}
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	if len(kw) > 0 {
		d := NewDict()
		for _, k := range kw {
			_ = d.Set(String(k.Name), k.Value)
		}
		return r.percentFormat(s, DictValue(d))
	}
	return r.percentFormat(s, Tuple(args...))
}

func fIndent(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("indent", args, kw, "width", "first", "blank")
	if err != nil {
		return Value{}, err
	}
	ind := "    "
	if has(a[0]) {
		if a[0].k == KindString {
			ind = a[0].s
		} else if a[0].isIntLike() {
			n := max(a[0].n, 0)
			if n > 1<<20 {
				return Value{}, r.bud.fail(&LimitError{Limit: "MaxBytes", Value: r.bud.lim.MaxBytes})
			}
			if err := r.bud.alloc(n); err != nil {
				return Value{}, err
			}
			ind = strings.Repeat(" ", int(n))
		} else {
			return Value{}, typeErr("can't multiply sequence by non-int of type '%s'", typeName(a[0]))
		}
	}
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	if err := r.bud.scan(len(s)); err != nil {
		return Value{}, err
	}
	first, blank := has(a[1]) && a[1].Truth(), has(a[2]) && a[2].Truth()
	// Jinja2 splits s + "\n" into lines; that is the lines of s, and an empty one after them
	// when s is empty or ends with a line break the "\n" does not join ("\r" would make "\r\n").
	lines := splitLines(s, false)
	extra := s == "" || endsWithLineBreak(s)
	each := func(f func(l string)) {
		lines(func(l string) bool { f(l); return true })
		if extra {
			f("")
		}
	}
	// The text is made once, its length charged first.
	size, n := int64(0), 0
	each(func(l string) {
		if n > 0 {
			size++
			if blank || l != "" {
				size += int64(len(ind))
			}
		}
		size += int64(len(l))
		n++
	})
	if first {
		size += int64(len(ind))
	}
	if err := r.bud.alloc(size); err != nil {
		return Value{}, err
	}
	var b strings.Builder
	b.Grow(int(size))
	if first {
		b.WriteString(ind)
	}
	n = 0
	each(func(l string) {
		if n > 0 {
			b.WriteByte('\n')
			if blank || l != "" {
				b.WriteString(ind)
			}
		}
		b.WriteString(l)
		n++
	})
	return String(b.String()), nil
}

func fItems(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	if v.k == KindUndefined {
		return genList(nil, "generator"), nil
	}
	if v.k != KindDict {
		return Value{}, typeErr("Can only get item pairs from a mapping.")
	}
	d := v.dict()
	if err := r.bud.allocMul(int64(d.Len()), 3*valueSize); err != nil {
		return Value{}, err
	}
	items := make([]Value, d.Len())
	for i, k := range d.keys {
		items[i] = Tuple(k, d.vals[i])
	}
	return genList(items, "generator"), nil
}

func fLength(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	switch v.k {
	case KindString:
		return Int(int64(runeLen(v.s))), r.bud.scan(len(v.s))
	case KindList, KindTuple:
		if g := v.p.(*listObj).gen; g != "" {
			return Value{}, typeErr("object of type '%s' has no len()", g)
		}
		return Int(int64(len(v.list()))), nil
	case KindDict:
		return Int(int64(v.dict().Len())), nil
	case KindUndefined:
		return Int(0), nil
	}
	return Value{}, typeErr("object of type '%s' has no len()", typeName(v))
}

func fReplace(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("replace", args, kw, "old", "new", "count")
	if err != nil {
		return Value{}, err
	}
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	old, err := r.str(a[0])
	if err != nil {
		return Value{}, err
	}
	nw, err := r.str(a[1])
	if err != nil {
		return Value{}, err
	}
	count, err := argInt("replace", a[2], -1)
	if err != nil {
		return Value{}, err
	}
	out, err := r.pyReplace(s, old, nw, int(count))
	return String(out), err
}

func fReverse(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	if v.k == KindString {
		// The reversed string has the same bytes: charged, then made in one allocation, code
		// point by code point from the end (no string per code point first).
		s := v.s
		if err := r.bud.alloc(int64(len(s))); err != nil {
			return Value{}, err
		}
		var b strings.Builder
		b.Grow(len(s))
		for i := len(s); i > 0; {
			_, n := utf8.DecodeLastRuneInString(s[:i])
			b.WriteString(s[i-n : i])
			i -= n
		}
		return String(b.String()), nil
	}
	items, err := r.iterate(v)
	if err != nil {
		return Value{}, err
	}
	if err := r.bud.allocMul(int64(len(items)), valueSize); err != nil {
		return Value{}, err
	}
	out := make([]Value, len(items))
	for i, it := range items {
		out[len(items)-1-i] = it
	}
	name := "list_reverseiterator"
	switch v.k {
	case KindTuple:
		name = "reversed"
	case KindDict:
		name = "dict_reversekeyiterator"
	case KindList:
		if g := v.p.(*listObj).gen; g != "" {
			return List(out...), nil
		}
	}
	return genList(out, name), nil
}

func fRound(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("round", args, kw, "precision", "method")
	if err != nil {
		return Value{}, err
	}
	prec, err := argInt("round", a[0], 0)
	if err != nil {
		return Value{}, err
	}
	method := "common"
	if has(a[1]) {
		method = a[1].s
	}
	if method != "common" && method != "ceil" && method != "floor" {
		return Value{}, &Error{Type: "FilterArgumentError", Msg: "method must be common, ceil or floor", Python: true}
	}
	if !v.isNum() {
		if v.k == KindUndefined {
			return Value{}, undefError(v)
		}
		return Value{}, typeErr("type %s doesn't define __round__ method", typeName(v))
	}
	if method == "common" {
		if v.isIntLike() {
			return Int(v.n), nil
		}
		return Float(pyRound(v.f(), int(prec))), nil
	}
	x := toFloat(v)
	p := math.Pow(10, float64(prec))
	if method == "ceil" {
		return Float(math.Ceil(x*p) / p), nil
	}
	return Float(math.Floor(x*p) / p), nil
}

// pyRound is Python's round(x, n) for floats: correctly rounded, half to even.
func pyRound(x float64, n int) float64 {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return x
	}
	if n > 300 {
		return x
	}
	if n < -308 {
		return math.Copysign(0, x)
	}
	if n >= 0 {
		f, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', n, 64), 64)
		return f
	}
	p := math.Pow(10, float64(-n))
	return math.RoundToEven(x/p) * p
}

func fString(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	if v.k == KindString {
		return v, nil
	}
	s, err := r.str(v)
	return String(s), err
}

var reTags = regexp.MustCompile(`(?s)<!--.*?-->|<[^>]*>`)

func fStriptags(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	// The tags removed and the entities unescaped, each at most as long as s, charged first;
	// then the words joined by single spaces, charged as they are written.
	if err := r.bud.alloc(2 * int64(len(s))); err != nil {
		return Value{}, err
	}
	s = html.UnescapeString(reTags.ReplaceAllString(s, ""))
	b := &bounded{bud: &r.bud}
	n := 0
	splitWS(s, -1)(func(w string) bool {
		if n > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
		n++
		return b.err == nil
	})
	out, err := b.result()
	return String(out), err
}

func fTojson(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("tojson", args, kw, "ensure_ascii", "indent", "separators", "sort_keys")
	if err != nil {
		return Value{}, err
	}
	o := &jsonOpts{itemSep: ", ", keySep: ": ", ensureASCII: has(a[0]) && a[0].Truth(), sortKeys: has(a[3]) && a[3].Truth()}
	if ind := a[1]; has(ind) && ind.k != KindNone {
		o.hasIndent, o.itemSep = true, ","
		switch {
		case ind.k == KindString:
			o.indent = ind.s
		case ind.isIntLike():
			o.indent = strings.Repeat(" ", int(min(max(ind.n, 0), 1<<10)))
		default:
			return Value{}, typeErr("can't multiply sequence by non-int of type '%s'", typeName(ind))
		}
	}
	if sep := a[2]; has(sep) && sep.k != KindNone {
		if !sep.isSeq() || len(sep.list()) != 2 || sep.list()[0].k != KindString || sep.list()[1].k != KindString {
			return Value{}, engineErr("ValueError", "separators must be a pair of strings")
		}
		o.itemSep, o.keySep = sep.list()[0].s, sep.list()[1].s
	}
	b := &bounded{bud: &r.bud}
	if err := writeJSON(b, v, o, 0); err != nil {
		return Value{}, err
	}
	out, err := b.result()
	return String(out), err
}

func fTrim(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("trim", args, kw, "chars")
	if err != nil {
		return Value{}, err
	}
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	var chars *string
	if has(a[0]) && a[0].k != KindNone {
		c, err := argStr("trim", a[0])
		if err != nil {
			return Value{}, err
		}
		chars = &c
	}
	return String(pyStrip(s, chars, true, true)), nil
}

func fTruncate(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("truncate", args, kw, "length", "killwords", "end", "leeway")
	if err != nil {
		return Value{}, err
	}
	if v.k != KindString {
		if v.k == KindUndefined {
			return v, nil
		}
		if v.k == KindList || v.k == KindTuple || v.k == KindDict {
			return Value{}, engineErr("TypeError", "truncate of a %s is not supported by this engine", typeName(v))
		}
		return Value{}, typeErr("object of type '%s' has no len()", typeName(v))
	}
	s := v.s
	length, err := argInt("truncate", a[0], 255)
	if err != nil {
		return Value{}, err
	}
	end := "..."
	if has(a[2]) {
		if end, err = r.str(a[2]); err != nil {
			return Value{}, err
		}
	}
	leeway, err := argInt("truncate", a[3], 5)
	if err != nil {
		return Value{}, err
	}
	if length < int64(runeLen(end)) {
		return Value{}, &Error{Type: "AssertionError", Msg: "expected length >= " + strconv.Itoa(runeLen(end)) + ", got " + strconv.FormatInt(length, 10), Python: true}
	}
	if leeway < 0 {
		return Value{}, &Error{Type: "AssertionError", Msg: "expected leeway >= 0, got " + strconv.FormatInt(leeway, 10), Python: true}
	}
	if err := r.bud.scan(len(s)); err != nil {
		return Value{}, err
	}
	if int64(runeLen(s)) <= length+leeway {
		return String(s), nil
	}
	cut := s[:runeToByteIndex(s, int(length)-runeLen(end))]
	if !has(a[1]) || !a[1].Truth() {
		if k := strings.LastIndexByte(cut, ' '); k >= 0 {
			cut = cut[:k]
		}
	}
	if err := r.bud.alloc(int64(len(cut)) + int64(len(end))); err != nil {
		return Value{}, err
	}
	return String(cut + end), nil
}

func fWordcount(r *renderer, v Value, args []Value, kw []Kwarg) (Value, error) {
	s, err := r.str(v)
	if err != nil {
		return Value{}, err
	}
	if err := r.bud.scan(len(s)); err != nil {
		return Value{}, err
	}
	n, in := 0, false
	for _, c := range s {
		w := c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c) || unicode.IsNumber(c) || unicode.Is(unicode.Mn, c)
		if w && !in {
			n++
		}
		in = w
	}
	return Int(int64(n)), nil
}
