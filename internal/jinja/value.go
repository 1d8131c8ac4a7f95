package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Kind is the Python type of a Value.
type Kind uint8

// The kinds of values.
const (
	KindUndefined Kind = iota // Jinja2's Undefined
	KindNone                  // None
	KindBool                  // bool
	KindInt                   // int (int64 here)
	KindFloat                 // float
	KindString                // str (Markup when marked safe)
	KindList                  // list
	KindTuple                 // tuple
	KindDict                  // dict, insertion ordered
	KindNamespace             // jinja2's namespace()
	KindCallable              // Go functions, macros, bound methods, loop, joiner
	KindObject                // other engine objects (cycler)
)

// Value is a template value: a Python value as Jinja2 sees it. The zero Value is Undefined.
// Values are immutable once made (the immutable sandbox refuses mutating methods), except a
// namespace's attributes, so they may be shared between concurrent renders.
type Value struct {
	k    Kind
	safe bool   // a str that is Markup (escape, safe)
	n    int64  // bool, int, float bits
	s    string // str
	p    any    // *listObj, *Dict, *namespace, *undefined, callable, object
}

type listObj struct {
	items    []Value
	gen      string   // a one-shot iterator of this Python type (map, select, ... return these)
	consumed bool     // the iterator was iterated
	fields   []string // attribute names of a named tuple (groupby's (grouper, list))
}

// None is Python's None.
func None() Value { return Value{k: KindNone} }

// Undefined is Jinja2's default Undefined for a missing variable name.
func Undefined(name string) Value {
	return Value{k: KindUndefined, p: &undefined{name: String(name), hasName: true}}
}

// Bool is a Python bool.
func Bool(b bool) Value {
	if b {
		return Value{k: KindBool, n: 1}
	}
	return Value{k: KindBool}
}

// Int is a Python int.
func Int(n int64) Value { return Value{k: KindInt, n: n} }

// Float is a Python float.
func Float(f float64) Value { return Value{k: KindFloat, n: int64(math.Float64bits(f))} }

// String is a Python str.
func String(s string) Value { return Value{k: KindString, s: s} }

// List is a Python list holding items (not copied).
func List(items ...Value) Value { return Value{k: KindList, p: &listObj{items: items}} }

// Tuple is a Python tuple holding items (not copied).
func Tuple(items ...Value) Value { return Value{k: KindTuple, p: &listObj{items: items}} }

// DictValue wraps an ordered dict.
func DictValue(d *Dict) Value { return Value{k: KindDict, p: d} }

// Call is one call of a Go callable: positional and keyword arguments (in call order).
type Call struct {
	Name   string
	Args   []Value
	Kwargs []Kwarg
}

// Kwarg is a keyword argument.
type Kwarg struct {
	Name  string
	Value Value
}

// Kwarg returns the keyword argument name, if given.
func (c *Call) Kwarg(name string) (Value, bool) {
	for _, kw := range c.Kwargs {
		if kw.Name == name {
			return kw.Value, true
		}
	}
	return Value{}, false
}

// Func is a Go callable. Its errors stop the render and are returned by Render unchanged.
func Func(name string, fn func(c *Call) (Value, error)) Value {
	return Value{k: KindCallable, p: &goFunc{name: name, fn: fn}}
}

type goFunc struct {
	name string
	fn   func(c *Call) (Value, error)
}

// Kind is v's type.
func (v Value) Kind() Kind { return v.k }

// IsUndefined reports whether v is Undefined.
func (v Value) IsUndefined() bool { return v.k == KindUndefined }

// AsString returns the str of a string value, and false for other kinds.
func (v Value) AsString() (string, bool) { return v.s, v.k == KindString }

// AsInt returns an int value (bools count, as in Python), and false for other kinds.
func (v Value) AsInt() (int64, bool) { return v.n, v.k == KindInt || v.k == KindBool }

// AsFloat returns a float value, and false for other kinds.
func (v Value) AsFloat() (float64, bool) { return v.f(), v.k == KindFloat }

// Items returns the items of a list or tuple (not a copy: do not modify).
func (v Value) Items() []Value {
	if v.k == KindList || v.k == KindTuple {
		return v.p.(*listObj).items
	}
	return nil
}

// AsDict returns the dict of a dict value.
func (v Value) AsDict() (*Dict, bool) {
	d, ok := v.p.(*Dict)
	return d, ok && v.k == KindDict
}

func (v Value) f() float64    { return math.Float64frombits(uint64(v.n)) }
func (v Value) b() bool       { return v.n != 0 }
func (v Value) list() []Value { return v.p.(*listObj).items }
func (v Value) dict() *Dict   { return v.p.(*Dict) }
func (v Value) isSeq() bool   { return v.k == KindList || v.k == KindTuple }
func (v Value) isNum() bool   { return v.k == KindInt || v.k == KindFloat || v.k == KindBool }
func (v Value) isIntLike() bool {
	return v.k == KindInt || v.k == KindBool
}

// Truth is Python's bool(v).
func (v Value) Truth() bool {
	switch v.k {
	case KindNone, KindUndefined:
		return false
	case KindBool, KindInt:
		return v.n != 0
	case KindFloat:
		return v.f() != 0
	case KindString:
		return v.s != ""
	case KindList, KindTuple:
		l := v.p.(*listObj)
		return l.gen != "" || len(l.items) > 0
	case KindDict:
		return v.dict().Len() > 0
	}
	return true
}

// undefined is what an Undefined knows to report: Jinja2's Undefined(hint, obj, name, exc).
type undefined struct {
	hint    string
	name    Value
	hasName bool
	objType string // object_type_repr of the object the name was looked up on; "" for a variable
	hasObj  bool
	exc     string // "UndefinedError" or "SecurityError"
}

func (u *undefined) message() string {
	if u == nil {
		return "undefined value"
	}
	if u.hint != "" {
		return u.hint
	}
	if !u.hasObj {
		return repr(u.name) + " is undefined"
	}
	if u.name.k != KindString {
		return u.objType + " has no element " + repr(u.name)
	}
	return repr(String(u.objType)) + " has no attribute " + repr(u.name)
}

func undefHint(hint string) Value {
	return Value{k: KindUndefined, p: &undefined{hint: hint}}
}

func undefAttr(obj Value, name Value) Value {
	return Value{k: KindUndefined, p: &undefined{name: name, hasName: true, objType: objectTypeRepr(obj), hasObj: true}}
}

// undefError is the error using an undefined value raises.
func undefError(v Value) *Error {
	u, _ := v.p.(*undefined)
	exc := "UndefinedError"
	if u != nil && u.exc != "" {
		exc = u.exc
	}
	return &Error{Type: exc, Msg: u.message(), Python: true}
}

// typeName is Python's type(v).__name__.
func typeName(v Value) string {
	switch v.k {
	case KindUndefined:
		return "Undefined"
	case KindNone:
		return "NoneType"
	case KindBool:
		return "bool"
	case KindInt:
		return "int"
	case KindFloat:
		return "float"
	case KindString:
		if v.safe {
			return "Markup"
		}
		return "str"
	case KindList:
		if g := v.p.(*listObj).gen; g != "" {
			return g
		}
		return "list"
	case KindTuple:
		return "tuple"
	case KindDict:
		return "dict"
	case KindNamespace:
		return "Namespace"
	case KindCallable:
		switch v.p.(type) {
		case *macro:
			return "Macro"
		case *loopObj:
			return "LoopContext"
		case *method:
			return "builtin_function_or_method"
		}
		return "function"
	}
	return "object"
}

// objectTypeRepr is jinja2.utils.object_type_repr.
func objectTypeRepr(v Value) string {
	switch v.k {
	case KindNone:
		return "None"
	case KindNamespace:
		return "jinja2.utils.Namespace object"
	case KindUndefined:
		return "jinja2.runtime.Undefined object"
	case KindString:
		if v.safe {
			return "markupsafe.Markup object"
		}
	case KindCallable:
		switch v.p.(type) {
		case *macro:
			return "jinja2.runtime.Macro object"
		case *loopObj:
			return "jinja2.runtime.LoopContext object"
		}
	}
	return typeName(v) + " object"
}

// Dict is an insertion-ordered Python dict. Keys are hashable values (str, int, float, bool,
// None, tuple); 1, 1.0 and True are the same key, as in Python.
type Dict struct {
	keys, vals []Value
	idx        map[dictKey]int // built once the dict grows past a few keys
}

type dictKey struct {
	k Kind
	n int64
	s string
}

// NewDict makes an empty dict.
func NewDict() *Dict { return &Dict{} }

// Len is the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

// Keys returns the keys in insertion order (do not modify).
func (d *Dict) Keys() []Value { return d.keys }

// Values returns the values in insertion order (do not modify).
func (d *Dict) Values() []Value { return d.vals }

func hashKey(v Value) (dictKey, bool) { return hashKeyN(v, 0) }

func hashKeyN(v Value, depth int) (dictKey, bool) {
	if depth > maxNest {
		return dictKey{}, false
	}
	switch v.k {
	case KindNone:
		return dictKey{k: KindNone}, true
	case KindBool, KindInt:
		return dictKey{k: KindInt, n: v.n}, true
	case KindFloat:
		f := v.f()
		if f == math.Trunc(f) && math.Abs(f) < 1<<63 {
			return dictKey{k: KindInt, n: int64(f)}, true
		}
		return dictKey{k: KindFloat, n: v.n}, true
	case KindString:
		return dictKey{k: KindString, s: v.s}, true
	case KindTuple:
		var b strings.Builder
		for _, it := range v.list() {
			k, ok := hashKeyN(it, depth+1)
			if !ok {
				return dictKey{}, false
			}
			fmt.Fprintf(&b, "%d:%d:%d:%s;", k.k, k.n, len(k.s), k.s)
		}
		return dictKey{k: KindTuple, s: b.String()}, true
	}
	return dictKey{}, false
}

func (d *Dict) find(k Value) int {
	if d.idx != nil {
		h, ok := hashKey(k)
		if !ok {
			return -1
		}
		if i, ok := d.idx[h]; ok {
			return i
		}
		return -1
	}
	if k.k == KindString {
		for i, x := range d.keys {
			if x.k == KindString && x.s == k.s {
				return i
			}
		}
		return -1
	}
	h, ok := hashKey(k)
	if !ok {
		return -1
	}
	for i, x := range d.keys {
		if hx, _ := hashKey(x); hx == h {
			return i
		}
	}
	return -1
}

// Get returns the value of key k.
func (d *Dict) Get(k Value) (Value, bool) {
	if i := d.find(k); i >= 0 {
		return d.vals[i], true
	}
	return Value{}, false
}

// GetString returns the value of the str key k.
func (d *Dict) GetString(k string) (Value, bool) { return d.Get(String(k)) }

// Set sets key k (kept at its first position when present). It fails for unhashable keys.
func (d *Dict) Set(k, v Value) error {
	if i := d.find(k); i >= 0 {
		d.vals[i] = v
		return nil
	}
	h, ok := hashKey(k)
	if !ok {
		return &Error{Type: "TypeError", Msg: fmt.Sprintf("unhashable type: '%s'", typeName(k)), Python: true}
	}
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	if d.idx == nil && len(d.keys) > 8 {
		d.idx = make(map[dictKey]int, len(d.keys))
		for i, x := range d.keys {
			hx, _ := hashKey(x)
			d.idx[hx] = i
		}
	} else if d.idx != nil {
		d.idx[h] = len(d.keys) - 1
	}
	return nil
}

// namespace is jinja2.utils.Namespace: the one mutable object of a render.
type namespace struct{ d *Dict }

// FromJSON decodes one JSON value as Python's json.loads does: objects keep their key order,
// integers stay ints and numbers with a fraction or exponent are floats (beyond float64's range,
// ±inf). An integer that does not fit int64 is an error: Python keeps it as a big int, which
// this engine does not have, and a float would render differently (1.2089258196146292e+24 for
// 1208925819614629174706176) without saying so.
func FromJSON(raw []byte) (Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := fromJSON(dec, 0)
	if err != nil {
		return Value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return Value{}, errors.New("jinja: more than one JSON value")
	}
	return v, nil
}

const maxJSONDepth = 10000

func fromJSON(dec *json.Decoder, depth int) (Value, error) {
	if depth > maxJSONDepth {
		return Value{}, errors.New("jinja: JSON nested too deeply")
	}
	t, err := dec.Token()
	if err != nil {
		return Value{}, err
	}
	switch t := t.(type) {
	case nil:
		return None(), nil
	case bool:
		return Bool(t), nil
	case string:
		return String(t), nil
	case json.Number:
		s := string(t)
		if !strings.ContainsAny(s, ".eE") {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				if len(s) > 40 {
					s = s[:40] + "..."
				}
				return Value{}, fmt.Errorf("jinja: JSON integer %s does not fit in 64 bits (Python's would be a big int)", s)
			}
			return Int(n), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return Value{}, err
		}
		return Float(f), nil
	case json.Delim:
		switch t {
		case '[':
			var items []Value
			for dec.More() {
				v, err := fromJSON(dec, depth+1)
				if err != nil {
					return Value{}, err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return Value{}, err
			}
			if items == nil {
				items = []Value{}
			}
			return List(items...), nil
		case '{':
			d := NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return Value{}, err
				}
				k, _ := kt.(string)
				v, err := fromJSON(dec, depth+1)
				if err != nil {
					return Value{}, err
				}
				if err := d.Set(String(k), v); err != nil {
					return Value{}, err
				}
			}
			if _, err := dec.Token(); err != nil {
				return Value{}, err
			}
			return DictValue(d), nil
		}
	}
	return Value{}, fmt.Errorf("jinja: unexpected JSON token %v", t)
}
