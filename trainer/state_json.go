package trainer

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file holds a JSON reader and writer with the semantics of Python's json module, which is
// what Hugging Face uses for trainer_state.json and training_args.json. encoding/json cannot be
// used for these files because it
//   - rejects NaN, Infinity and -Infinity, which Python writes for non-finite metrics;
//   - loses the int/float distinction (Python writes 61440.0 for a float, 15 for an int);
//   - loses key order, which unknown log keys and byte-exact rewriting need.

// ErrJSONSyntax marks input that Python's json.loads would reject.
var ErrJSONSyntax = errors.New("invalid JSON")

// JSONKind is the Python type a JSONValue holds.
type JSONKind uint8

// The kinds of JSONValue, named after the Python types json.loads produces.
const (
	JSONNull   JSONKind = iota // None
	JSONBool                   // bool
	JSONInt                    // int (arbitrary precision; kept as its decimal digits)
	JSONFloat                  // float (including nan and ±inf)
	JSONString                 // str
	JSONArray                  // list
	JSONObject                 // dict (insertion-ordered, as Python's)
)

func (k JSONKind) String() string {
	switch k {
	case JSONNull:
		return "null"
	case JSONBool:
		return "bool"
	case JSONInt:
		return "int"
	case JSONFloat:
		return "float"
	case JSONString:
		return "string"
	case JSONArray:
		return "list"
	case JSONObject:
		return "object"
	}
	return "JSONKind(" + strconv.Itoa(int(k)) + ")"
}

// JSONValue is one JSON value as Python's json module sees it. The zero value is null.
// Values are immutable once built; copying a JSONValue shares its list and object storage, so
// treat the slices returned by Array and Object as read-only.
type JSONValue struct {
	kind JSONKind
	b    bool
	num  string // JSONInt: canonical decimal digits, as Python's int repr writes them
	f    float64
	s    string // JSONString; lone UTF-16 surrogates are kept as WTF-8 (see appendPyString)
	arr  []JSONValue
	obj  []JSONMember
}

// JSONMember is one key/value pair of a JSON object.
type JSONMember struct {
	Key   string
	Value JSONValue
}

// JSONNullValue returns null.
func JSONNullValue() JSONValue { return JSONValue{} }

// JSONBoolValue returns a bool.
func JSONBoolValue(b bool) JSONValue { return JSONValue{kind: JSONBool, b: b} }

// JSONIntValue returns an int.
func JSONIntValue(i int64) JSONValue {
	return JSONValue{kind: JSONInt, num: strconv.FormatInt(i, 10)}
}

// JSONFloatValue returns a float (written with Python's repr, so 3.0 stays "3.0").
func JSONFloatValue(f float64) JSONValue { return JSONValue{kind: JSONFloat, f: f} }

// JSONStringValue returns a string.
func JSONStringValue(s string) JSONValue { return JSONValue{kind: JSONString, s: s} }

// JSONArrayValue returns a list of the given values.
func JSONArrayValue(items ...JSONValue) JSONValue {
	return JSONValue{kind: JSONArray, arr: append([]JSONValue{}, items...)}
}

// JSONObjectValue returns an object with the given members in order. A repeated key keeps its
// first position and its last value, as a Python dict does.
func JSONObjectValue(members ...JSONMember) JSONValue {
	v := JSONValue{kind: JSONObject, obj: make([]JSONMember, 0, len(members))}
	for _, m := range members {
		v.obj = setMember(v.obj, m.Key, m.Value)
	}
	return v
}

func setMember(obj []JSONMember, key string, val JSONValue) []JSONMember {
	for i := range obj {
		if obj[i].Key == key {
			obj[i].Value = val
			return obj
		}
	}
	return append(obj, JSONMember{Key: key, Value: val})
}

// Kind returns the value's kind.
func (v JSONValue) Kind() JSONKind { return v.kind }

// IsNull reports whether v is null.
func (v JSONValue) IsNull() bool { return v.kind == JSONNull }

// Bool returns the value of a bool.
func (v JSONValue) Bool() (bool, bool) { return v.b, v.kind == JSONBool }

// Int returns an int that fits in int64, or a float with an integral value that does.
func (v JSONValue) Int() (int64, bool) {
	switch v.kind {
	case JSONInt:
		i, err := strconv.ParseInt(v.num, 10, 64)
		return i, err == nil
	case JSONFloat:
		if v.f == math.Trunc(v.f) && math.Abs(v.f) < 1<<63 {
			return int64(v.f), true
		}
	}
	return 0, false
}

// Float returns a number as float64 (an int is converted as Python's float(int) does).
func (v JSONValue) Float() (float64, bool) {
	switch v.kind {
	case JSONFloat:
		return v.f, true
	case JSONInt:
		f, err := strconv.ParseFloat(v.num, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, false
		}
		return f, true
	}
	return 0, false
}

// IntLiteral returns the decimal digits of an int (which may exceed int64).
func (v JSONValue) IntLiteral() (string, bool) { return v.num, v.kind == JSONInt }

// Str returns the value of a string.
func (v JSONValue) Str() (string, bool) { return v.s, v.kind == JSONString }

// Array returns the items of a list (nil for other kinds). Do not modify them.
func (v JSONValue) Array() []JSONValue { return v.arr }

// Object returns the members of an object in order (nil for other kinds). Do not modify them.
func (v JSONValue) Object() []JSONMember { return v.obj }

// Get returns the member of an object named key.
func (v JSONValue) Get(key string) (JSONValue, bool) {
	for _, m := range v.obj {
		if m.Key == key {
			return m.Value, true
		}
	}
	return JSONValue{}, false
}

// With returns a copy of the object v with key set to val (appended if new). v is unchanged.
func (v JSONValue) With(key string, val JSONValue) JSONValue {
	out := JSONValue{kind: JSONObject, obj: append(make([]JSONMember, 0, len(v.obj)+1), v.obj...)}
	out.obj = setMember(out.obj, key, val)
	return out
}

// Equal reports whether v and o are the same value of the same kind. Floats compare by bit
// pattern, so NaN equals NaN and 0.0 differs from -0.0 (both survive a write/read cycle); object
// members compare in order.
func (v JSONValue) Equal(o JSONValue) bool {
	if v.kind != o.kind {
		return false
	}
	switch v.kind {
	case JSONNull:
		return true
	case JSONBool:
		return v.b == o.b
	case JSONInt:
		return v.num == o.num
	case JSONFloat:
		return math.Float64bits(v.f) == math.Float64bits(o.f)
	case JSONString:
		return v.s == o.s
	case JSONArray:
		if len(v.arr) != len(o.arr) {
			return false
		}
		for i := range v.arr {
			if !v.arr[i].Equal(o.arr[i]) {
				return false
			}
		}
		return true
	case JSONObject:
		if len(v.obj) != len(o.obj) {
			return false
		}
		for i := range v.obj {
			if v.obj[i].Key != o.obj[i].Key || !v.obj[i].Value.Equal(o.obj[i].Value) {
				return false
			}
		}
		return true
	}
	return false
}

// maxJSONDepth bounds nesting; CPython's json raises RecursionError near its recursion limit
// (1000), and no Hugging Face file nests more than a few levels.
const maxJSONDepth = 1000

// maxIntDigits mirrors CPython's default int_max_str_digits (3.11+): json.loads refuses longer
// integer literals.
const maxIntDigits = 4300

// parsePyJSON parses data as Python's json.loads does. A leading UTF-8 byte order mark is
// skipped (Python's utf-8 codec would keep it and json.loads would then fail; Windows editors
// add it to hand-written argument files, and skipping it loses nothing).
func parsePyJSON(data []byte) (JSONValue, error) {
	if !utf8.Valid(data) {
		return JSONValue{}, fmt.Errorf("%w: not valid UTF-8", ErrJSONSyntax)
	}
	p := pyParser{data: data}
	if len(data) >= 3 && data[0] == 0xEF && data[1] == 0xBB && data[2] == 0xBF {
		p.pos = 3
	}
	p.skipSpace()
	v, err := p.value(0)
	if err != nil {
		return JSONValue{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return JSONValue{}, p.errorf("extra data after the top-level value")
	}
	return v, nil
}

type pyParser struct {
	data []byte
	pos  int
}

func (p *pyParser) errorf(format string, args ...any) error {
	line, col := 1, 1
	for _, c := range p.data[:min(p.pos, len(p.data))] {
		if c == '\n' {
			line++
			col = 1
		} else {
			col++
		}
	}
	return fmt.Errorf("%w at line %d column %d: %s", ErrJSONSyntax, line, col, fmt.Sprintf(format, args...))
}

func (p *pyParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *pyParser) hasPrefix(s string) bool {
	return len(p.data)-p.pos >= len(s) && string(p.data[p.pos:p.pos+len(s)]) == s
}

func (p *pyParser) value(depth int) (JSONValue, error) {
	if depth > maxJSONDepth {
		return JSONValue{}, p.errorf("nested more than %d levels", maxJSONDepth)
	}
	if p.pos >= len(p.data) {
		return JSONValue{}, p.errorf("unexpected end of input, want a value")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return JSONValue{kind: JSONString, s: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		if p.hasPrefix("-Infinity") {
			p.pos += len("-Infinity")
			return JSONFloatValue(math.Inf(-1)), nil
		}
		return p.number()
	}
	for _, lit := range []struct {
		text string
		v    JSONValue
	}{
		{"null", JSONValue{}},
		{"true", JSONBoolValue(true)},
		{"false", JSONBoolValue(false)},
		{"NaN", JSONFloatValue(math.NaN())},
		{"Infinity", JSONFloatValue(math.Inf(1))},
	} {
		if p.hasPrefix(lit.text) {
			p.pos += len(lit.text)
			return lit.v, nil
		}
	}
	return JSONValue{}, p.errorf("unexpected %q, want a value", p.data[p.pos])
}

func (p *pyParser) object(depth int) (JSONValue, error) {
	p.pos++ // '{'
	v := JSONValue{kind: JSONObject, obj: []JSONMember{}}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	// index finds repeated keys without a quadratic scan of large objects.
	index := map[string]int{}
	for {
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return JSONValue{}, p.errorf("want a property name in double quotes")
		}
		key, err := p.str()
		if err != nil {
			return JSONValue{}, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return JSONValue{}, p.errorf("want ':' after a property name")
		}
		p.pos++
		p.skipSpace()
		val, err := p.value(depth + 1)
		if err != nil {
			return JSONValue{}, err
		}
		if i, ok := index[key]; ok {
			v.obj[i].Value = val // a Python dict keeps the first position and the last value
		} else {
			index[key] = len(v.obj)
			v.obj = append(v.obj, JSONMember{Key: key, Value: val})
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return JSONValue{}, p.errorf("unexpected end of input in an object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return v, nil
		default:
			return JSONValue{}, p.errorf("want ',' or '}' in an object")
		}
	}
}

func (p *pyParser) array(depth int) (JSONValue, error) {
	p.pos++ // '['
	v := JSONValue{kind: JSONArray, arr: []JSONValue{}}
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.skipSpace()
		item, err := p.value(depth + 1)
		if err != nil {
			return JSONValue{}, err
		}
		v.arr = append(v.arr, item)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return JSONValue{}, p.errorf("unexpected end of input in a list")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return JSONValue{}, p.errorf("want ',' or ']' in a list")
		}
	}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// number parses the grammar of Python's json scanner: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?
// A literal with a fraction or an exponent is a float, anything else an int.
func (p *pyParser) number() (JSONValue, error) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	if p.pos >= len(p.data) || !isDigit(p.data[p.pos]) {
		return JSONValue{}, p.errorf("want a digit")
	}
	if p.data[p.pos] == '0' {
		p.pos++
	} else {
		for p.pos < len(p.data) && isDigit(p.data[p.pos]) {
			p.pos++
		}
	}
	isFloat := false
	if p.pos+1 < len(p.data) && p.data[p.pos] == '.' && isDigit(p.data[p.pos+1]) {
		isFloat = true
		p.pos++
		for p.pos < len(p.data) && isDigit(p.data[p.pos]) {
			p.pos++
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		q := p.pos + 1
		if q < len(p.data) && (p.data[q] == '+' || p.data[q] == '-') {
			q++
		}
		if q < len(p.data) && isDigit(p.data[q]) {
			isFloat = true
			for q < len(p.data) && isDigit(p.data[q]) {
				q++
			}
			p.pos = q
		}
	}
	lit := string(p.data[start:p.pos])
	if isFloat {
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) { // Python's float() overflows to ±inf
			return JSONValue{}, p.errorf("bad number %q", lit)
		}
		return JSONFloatValue(f), nil
	}
	digits := lit
	neg := digits[0] == '-'
	if neg {
		digits = digits[1:]
	}
	if len(digits) > maxIntDigits {
		return JSONValue{}, p.errorf("integer literal longer than %d digits", maxIntDigits)
	}
	if neg && digits != "0" { // Python's int("-0") is 0
		digits = "-" + digits
	}
	return JSONValue{kind: JSONInt, num: digits}, nil
}

// str parses a string literal. Like Python's json (strict mode), raw control characters are
// refused; \uXXXX escapes of UTF-16 surrogate pairs are combined, and a lone surrogate is kept
// (as its WTF-8 bytes) so that writing the value back reproduces the escape.
func (p *pyParser) str() (string, error) {
	p.pos++ // opening quote
	var out []byte
	for {
		if p.pos >= len(p.data) {
			return "", p.errorf("unterminated string")
		}
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(out), nil
		case c < 0x20:
			return "", p.errorf("invalid control character in a string")
		case c != '\\':
			out = append(out, c)
			p.pos++
			continue
		}
		p.pos++ // backslash
		if p.pos >= len(p.data) {
			return "", p.errorf("unterminated string escape")
		}
		esc := p.data[p.pos]
		p.pos++
		switch esc {
		case '"', '\\', '/':
			out = append(out, esc)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) && r < 0xDC00 && p.hasPrefix(`\u`) {
				save := p.pos
				p.pos += 2
				r2, err := p.hex4()
				if err == nil && r2 >= 0xDC00 && r2 <= 0xDFFF {
					out = utf8.AppendRune(out, utf16.DecodeRune(r, r2))
					continue
				}
				p.pos = save
			}
			out = appendWTF8(out, r)
		default:
			return "", p.errorf("invalid escape \\%c", esc)
		}
	}
}

func (p *pyParser) hex4() (rune, error) {
	if len(p.data)-p.pos < 4 {
		return 0, p.errorf("short \\u escape")
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, p.errorf("bad \\u escape")
		}
	}
	p.pos += 4
	return r, nil
}

// appendWTF8 appends r as UTF-8, encoding a surrogate code point with the generalized UTF-8
// three-byte form (which utf8.AppendRune would replace with U+FFFD).
func appendWTF8(dst []byte, r rune) []byte {
	if utf16.IsSurrogate(r) {
		return append(dst, byte(0xE0|r>>12), byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(dst, r)
}

// pyJSONStyle selects the layout json.dumps produces.
type pyJSONStyle struct {
	indent   int  // < 0: one line with ", " and ": " separators (json.dumps default)
	sortKeys bool // json.dumps(sort_keys=True)
}

// appendPyJSON appends v as json.dumps(v, indent=..., sort_keys=..., ensure_ascii=True,
// allow_nan=True) writes it.
func appendPyJSON(dst []byte, v JSONValue, st pyJSONStyle, level int) []byte {
	switch v.kind {
	case JSONNull:
		return append(dst, "null"...)
	case JSONBool:
		if v.b {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case JSONInt:
		return append(dst, v.num...)
	case JSONFloat:
		return appendPyJSONFloat(dst, v.f)
	case JSONString:
		return appendPyString(dst, v.s)
	case JSONArray:
		if len(v.arr) == 0 {
			return append(dst, "[]"...)
		}
		dst = append(dst, '[')
		for i, item := range v.arr {
			dst = appendSeparator(dst, st, level+1, i == 0)
			dst = appendPyJSON(dst, item, st, level+1)
		}
		dst = appendClose(dst, st, level)
		return append(dst, ']')
	case JSONObject:
		if len(v.obj) == 0 {
			return append(dst, "{}"...)
		}
		members := v.obj
		if st.sortKeys {
			members = append([]JSONMember(nil), members...)
			// Byte order of UTF-8 (and of the WTF-8 surrogates) is code point order, which is
			// how Python sorts str keys.
			sort.SliceStable(members, func(i, j int) bool { return members[i].Key < members[j].Key })
		}
		dst = append(dst, '{')
		for i, m := range members {
			dst = appendSeparator(dst, st, level+1, i == 0)
			dst = appendPyString(dst, m.Key)
			dst = append(dst, ": "...)
			dst = appendPyJSON(dst, m.Value, st, level+1)
		}
		dst = appendClose(dst, st, level)
		return append(dst, '}')
	}
	return dst
}

func appendSeparator(dst []byte, st pyJSONStyle, level int, first bool) []byte {
	if st.indent < 0 {
		if !first {
			dst = append(dst, ", "...)
		}
		return dst
	}
	if !first {
		dst = append(dst, ',') // with indent, Python's item separator is "," (no trailing space)
	}
	dst = append(dst, '\n')
	for i := 0; i < level*st.indent; i++ {
		dst = append(dst, ' ')
	}
	return dst
}

func appendClose(dst []byte, st pyJSONStyle, level int) []byte {
	if st.indent < 0 {
		return dst
	}
	dst = append(dst, '\n')
	for i := 0; i < level*st.indent; i++ {
		dst = append(dst, ' ')
	}
	return dst
}

// appendPyJSONFloat writes a float as json.dumps does: repr for finite values, NaN, Infinity and
// -Infinity otherwise.
func appendPyJSONFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	return appendPyFloatRepr(dst, f)
}

const lowerHex = "0123456789abcdef"

// appendPyString writes s as json's ensure_ascii encoder does: printable ASCII as is (except
// '"' and '\\'), the short escapes \b \f \n \r \t, everything else as lowercase \uXXXX (code
// points above U+FFFF as surrogate pairs). WTF-8 surrogates (from parsePyJSON) are written as
// their \u escape; other invalid UTF-8 bytes, which Python strings cannot hold, become \ufffd.
func appendPyString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c <= 0x7e && c != '"' && c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		if c < utf8.RuneSelf {
			i++
			switch c {
			case '"':
				dst = append(dst, `\"`...)
			case '\\':
				dst = append(dst, `\\`...)
			case '\n':
				dst = append(dst, `\n`...)
			case '\r':
				dst = append(dst, `\r`...)
			case '\t':
				dst = append(dst, `\t`...)
			case '\b':
				dst = append(dst, `\b`...)
			case '\f':
				dst = append(dst, `\f`...)
			default:
				dst = appendU4(dst, rune(c))
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			if i+2 < len(s) && c == 0xED && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2]&0xC0 == 0x80 {
				r = rune(c&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F)
				size = 3
			} else {
				r = utf8.RuneError
			}
		}
		i += size
		if r > 0xFFFF {
			r1, r2 := utf16.EncodeRune(r)
			dst = appendU4(dst, r1)
			dst = appendU4(dst, r2)
		} else {
			dst = appendU4(dst, r)
		}
	}
	return append(dst, '"')
}

func appendU4(dst []byte, r rune) []byte {
	return append(dst, '\\', 'u', lowerHex[r>>12&0xF], lowerHex[r>>8&0xF], lowerHex[r>>4&0xF], lowerHex[r&0xF])
}
