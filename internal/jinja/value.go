package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
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
	r      *renderer // the render calling; nil for a Call made outside one
}

// Str is str(v) built under the limits of the render that made the call: values a template
// built can be DAGs whose text is exponentially long (a list doubled with [x, x]), which
// Value.String would walk to the end. Its error is the render's *LimitError or context error,
// which the callable returns to stop the render.
func (c *Call) Str(v Value) (string, error) {
	if c.r == nil {
		return v.String(), nil
	}
	return c.r.print(v)
}

// Alloc charges n bytes that the callable is about to allocate against the render's MaxBytes,
// before it allocates them; a callable whose result can be much larger than its arguments calls
// it first. (What it returns is charged again once it has returned, as every callable's result
// is.) Its error is the render's *LimitError, which the callable returns.
func (c *Call) Alloc(n int64) error {
	if c.r == nil {
		return nil
	}
	return c.r.bud.alloc(n)
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
	// idx finds scalar keys and tidx tuple keys (by their structural hash, keyOf; tuples of
	// the same hash are told apart by keyEqual); both are built once the dict grows past a few
	// keys.
	idx  map[dictKey]int
	tidx map[uint64][]int
}

// dictKey is what a key is found by: the same for keys Python finds each other by. A tuple's
// holds its structural hash in n.
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

// hashSeed seeds the hash of tuple keys; it is set once, when the package is loaded.
var hashSeed = maphash.MakeSeed()

// scalarKey is the dictKey of a hashable value other than a tuple.
func scalarKey(v Value) (dictKey, bool) {
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
	}
	return dictKey{}, false
}

// keyOf returns the dictKey of v. A tuple's is a hash of its items, computed in place (the old
// key was a string as long as all its items together, built before anything was charged), one
// step charged per value and the strings' bytes as a scan. ok is false when v is unhashable;
// bad is then the value that is (v, or the item of a tuple that is), which Python's message
// names. err is the budget's.
func keyOf(bud *budget, v Value) (k dictKey, bad Value, ok bool, err error) {
	if v.k != KindTuple {
		k, ok = scalarKey(v)
		return k, v, ok, nil
	}
	h, bad, ok, err := tupleHash(bud, v, 0)
	return dictKey{k: KindTuple, n: int64(h)}, bad, ok, err
}

func tupleHash(bud *budget, v Value, depth int) (uint64, Value, bool, error) {
	if err := bud.step(1); err != nil {
		return 0, v, false, err
	}
	if depth > maxNest {
		return 0, v, false, nil
	}
	const prime = 1099511628211 // FNV-1a's
	items := v.list()
	h := uint64(14695981039346656037) ^ uint64(len(items))
	for _, it := range items {
		var x uint64
		switch it.k {
		case KindTuple:
			ih, bad, ok, err := tupleHash(bud, it, depth+1)
			if !ok || err != nil {
				return 0, bad, ok, err
			}
			x = ih ^ uint64(KindTuple)<<56
		default:
			if err := bud.step(1); err != nil {
				return 0, it, false, err
			}
			k, ok := scalarKey(it)
			if !ok {
				return 0, it, false, nil
			}
			x = uint64(k.n) ^ uint64(k.k)<<56
			if k.k == KindString {
				if err := bud.scan(len(k.s)); err != nil {
					return 0, it, false, err
				}
				x = maphash.String(hashSeed, k.s)
			}
		}
		h = (h ^ x) * prime
	}
	return h, v, true, nil
}

// keyEqual reports whether two hashable keys are the same key, comparing tuples item by item
// (the same tuple at once, as Python does), one step charged per value.
func keyEqual(bud *budget, a, b Value, depth int) (bool, error) {
	if err := bud.step(1); err != nil {
		return false, err
	}
	if a.k == KindTuple || b.k == KindTuple {
		if a.k != b.k {
			return false, nil
		}
		if a.p == b.p {
			return true, nil
		}
		x, y := a.list(), b.list()
		if len(x) != len(y) || depth > maxNest {
			return false, nil
		}
		for i := range x {
			if eq, err := keyEqual(bud, x[i], y[i], depth+1); !eq || err != nil {
				return false, err
			}
		}
		return true, nil
	}
	ka, _ := scalarKey(a)
	kb, _ := scalarKey(b)
	return ka == kb, nil
}

// find returns the index of key k, -1 when absent or unhashable; err is the budget's.
func (d *Dict) find(bud *budget, k Value) (int, error) {
	if k.k == KindString && d.idx == nil {
		for i, x := range d.keys {
			if x.k == KindString && x.s == k.s {
				return i, nil
			}
		}
		return -1, nil
	}
	h, _, ok, err := keyOf(bud, k)
	if !ok || err != nil {
		return -1, err
	}
	return d.findKey(bud, k, h)
}

// findKey is find for a key whose dictKey is h.
func (d *Dict) findKey(bud *budget, k Value, h dictKey) (int, error) {
	if k.k == KindTuple {
		if d.idx != nil {
			for _, i := range d.tidx[uint64(h.n)] {
				if eq, err := keyEqual(bud, d.keys[i], k, 0); eq || err != nil {
					return i, err
				}
			}
			return -1, nil
		}
		for i, x := range d.keys {
			if x.k != KindTuple {
				continue
			}
			if eq, err := keyEqual(bud, x, k, 0); eq || err != nil {
				return i, err
			}
		}
		return -1, nil
	}
	if d.idx != nil {
		if i, ok := d.idx[h]; ok {
			return i, nil
		}
		return -1, nil
	}
	for i, x := range d.keys {
		if x.k == KindTuple {
			continue
		}
		if hx, _ := scalarKey(x); hx == h {
			return i, nil
		}
	}
	return -1, nil
}

// get is Get under a render's budget.
func (d *Dict) get(bud *budget, k Value) (Value, bool, error) {
	i, err := d.find(bud, k)
	if i < 0 || err != nil {
		return Value{}, false, err
	}
	return d.vals[i], true, nil
}

// set is Set under a render's budget (which the caller charges for the entry).
func (d *Dict) set(bud *budget, k, v Value) error {
	h, bad, ok, err := keyOf(bud, k)
	if err != nil {
		return err
	}
	if !ok {
		return &Error{Type: "TypeError", Msg: fmt.Sprintf("unhashable type: '%s'", typeName(bad)), Python: true}
	}
	i, err := d.findKey(bud, k, h)
	if err != nil {
		return err
	}
	if i >= 0 {
		d.vals[i] = v
		return nil
	}
	d.keys = append(d.keys, k)
	d.vals = append(d.vals, v)
	n := len(d.keys) - 1
	switch {
	case d.idx == nil && len(d.keys) > 8:
		d.idx = make(map[dictKey]int, len(d.keys))
		for i, x := range d.keys {
			hx := h
			if i != n {
				if hx, _, _, err = keyOf(bud, x); err != nil {
					d.idx, d.tidx = nil, nil
					return err
				}
			}
			d.index(hx, i)
		}
	case d.idx != nil:
		d.index(h, n)
	}
	return nil
}

// index records that key i has the dictKey h.
func (d *Dict) index(h dictKey, i int) {
	if h.k != KindTuple {
		d.idx[h] = i
		return
	}
	if d.tidx == nil {
		d.tidx = map[uint64][]int{}
	}
	d.tidx[uint64(h.n)] = append(d.tidx[uint64(h.n)], i)
}

// Get returns the value of key k.
func (d *Dict) Get(k Value) (Value, bool) {
	v, ok, _ := d.get(nil, k)
	return v, ok
}

// GetString returns the value of the str key k.
func (d *Dict) GetString(k string) (Value, bool) { return d.Get(String(k)) }

// Set sets key k (kept at its first position when present). It fails for unhashable keys.
func (d *Dict) Set(k, v Value) error { return d.set(nil, k, v) }

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
