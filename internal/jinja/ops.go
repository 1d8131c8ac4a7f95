package jinja

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// withLine puts the line of the node into an *Error that has none.
func withLine(err error, line int) error {
	if e, ok := err.(*Error); ok && e.Line == 0 {
		c := *e
		c.Line = line
		return &c
	}
	return err
}

func (e *constExpr) eval(r *renderer) (Value, error) { return e.v, nil }

func (e *nameExpr) eval(r *renderer) (Value, error) { return r.lookup(e.name), nil }

func (e *listExpr) eval(r *renderer) (Value, error) {
	if err := r.bud.allocMul(int64(len(e.items)), valueSize); err != nil {
		return Value{}, err
	}
	items := make([]Value, len(e.items))
	for i, it := range e.items {
		v, err := r.evalExpr(it)
		if err != nil {
			return Value{}, err
		}
		items[i] = v
	}
	if e.tuple {
		return Tuple(items...), nil
	}
	return List(items...), nil
}

func (e *dictExpr) eval(r *renderer) (Value, error) {
	if err := r.bud.allocMul(int64(len(e.keys)), 2*valueSize); err != nil {
		return Value{}, err
	}
	d := NewDict()
	for i := range e.keys {
		k, err := r.evalExpr(e.keys[i])
		if err != nil {
			return Value{}, err
		}
		v, err := r.evalExpr(e.vals[i])
		if err != nil {
			return Value{}, err
		}
		if err := d.set(&r.bud, k, v); err != nil {
			return Value{}, withLine(err, e.line)
		}
	}
	return DictValue(d), nil
}

// evalExpr evaluates a sub-expression, counting a step.
func (r *renderer) evalExpr(e expr) (Value, error) {
	if err := r.bud.step(1); err != nil {
		return Value{}, err
	}
	return e.eval(r)
}

func (e *getattrExpr) eval(r *renderer) (Value, error) {
	obj, err := r.evalExpr(e.obj)
	if err != nil {
		return Value{}, err
	}
	v, err := r.getattr(obj, e.name)
	return v, withLine(err, e.line)
}

func (e *getitemExpr) eval(r *renderer) (Value, error) {
	obj, err := r.evalExpr(e.obj)
	if err != nil {
		return Value{}, err
	}
	if s, ok := e.key.(*sliceExpr); ok {
		if obj.k == KindUndefined {
			return Value{}, withLine(undefError(obj), e.line)
		}
		v, err := r.slice(obj, s)
		return v, withLine(err, e.line)
	}
	key, err := r.evalExpr(e.key)
	if err != nil {
		return Value{}, err
	}
	v, err := r.getitem(obj, key)
	return v, withLine(err, e.line)
}

func (e *sliceExpr) eval(r *renderer) (Value, error) {
	return Value{}, engineErr("TypeError", "a slice is only valid in a subscript")
}

// getattr is the sandbox's getattr (obj.name): Python attributes first (methods, namespace
// and loop attributes), then items.
func (r *renderer) getattr(obj Value, name string) (Value, error) {
	if obj.k == KindUndefined {
		return Value{}, undefError(obj)
	}
	if v, ok, err := r.pyAttr(obj, name); ok || err != nil {
		return v, err
	}
	if obj.k == KindDict {
		if v, ok := obj.dict().GetString(name); ok {
			return v, nil
		}
	}
	return undefAttr(obj, String(name)), nil
}

// getitem is the sandbox's getitem (obj[key]): items first, then attributes for str keys.
func (r *renderer) getitem(obj, key Value) (Value, error) {
	switch obj.k {
	case KindUndefined:
		return Value{}, undefError(obj)
	case KindDict:
		v, ok, err := obj.dict().get(&r.bud, key)
		if ok || err != nil {
			return v, err
		}
	case KindList, KindTuple:
		if g := obj.p.(*listObj).gen; g != "" {
			return Value{}, typeErr("'%s' object is not subscriptable", g)
		}
		if key.isIntLike() {
			items := obj.list()
			i := key.n
			if i < 0 {
				i += int64(len(items))
			}
			if i >= 0 && i < int64(len(items)) {
				return items[i], nil
			}
		}
	case KindString:
		if key.isIntLike() {
			if err := r.bud.scan(len(obj.s)); err != nil {
				return Value{}, err
			}
			if c, ok := runeAt(obj.s, key.n); ok {
				return String(c), nil
			}
		}
	}
	if key.k == KindString {
		if v, ok, err := r.pyAttr(obj, key.s); ok || err != nil {
			return v, err
		}
	}
	return undefAttr(obj, key), nil
}

// runeAt is s[i] in code points (negative i counts from the end).
func runeAt(s string, i int64) (string, bool) {
	n := int64(utf8.RuneCountInString(s))
	if i < 0 {
		i += n
	}
	if i < 0 || i >= n {
		return "", false
	}
	if n == int64(len(s)) {
		return s[i : i+1], true
	}
	k := int64(0)
	for b := range s {
		if k == i {
			return s[b : b+runeSize(s, b)], true
		}
		k++
	}
	return "", false
}

// sliceIndices is Python's slice.indices.
func sliceIndices(n int64, start, stop, step *int64) (int64, int64, int64, error) {
	st := int64(1)
	if step != nil {
		st = *step
	}
	if st == 0 {
		return 0, 0, 0, valueErr("slice step cannot be zero")
	}
	clamp := func(p *int64, def int64) int64 {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += n
			if v < 0 {
				if st < 0 {
					return -1
				}
				return 0
			}
		} else if v >= n {
			if st < 0 {
				return n - 1
			}
			return n
		}
		return v
	}
	if st > 0 {
		return clamp(start, 0), clamp(stop, n), st, nil
	}
	return clamp(start, n-1), clamp(stop, -1), st, nil
}

func (r *renderer) slice(obj Value, s *sliceExpr) (Value, error) {
	var parts [3]*int64
	for i, e := range []expr{s.start, s.stop, s.step} {
		if e == nil {
			continue
		}
		v, err := r.evalExpr(e)
		if err != nil {
			return Value{}, err
		}
		switch {
		case v.k == KindNone:
		case v.isIntLike():
			n := v.n
			parts[i] = &n
		default:
			return Value{}, typeErr("slice indices must be integers or None or have an __index__ method")
		}
	}
	return r.sliceValue(obj, parts[0], parts[1], parts[2])
}

func (r *renderer) sliceValue(obj Value, start, stop, step *int64) (Value, error) {
	switch obj.k {
	case KindList, KindTuple:
		items := obj.list()
		a, b, st, err := sliceIndices(int64(len(items)), start, stop, step)
		if err != nil {
			return Value{}, err
		}
		var out []Value
		if st == 1 && b > a {
			if err := r.bud.allocMul(b-a, valueSize); err != nil {
				return Value{}, err
			}
			out = append([]Value(nil), items[a:b]...)
		} else {
			for i := a; (st > 0 && i < b) || (st < 0 && i > b); i += st {
				if err := r.bud.alloc(valueSize); err != nil {
					return Value{}, err
				}
				out = append(out, items[i])
			}
		}
		if out == nil {
			out = []Value{}
		}
		if obj.k == KindTuple {
			return Tuple(out...), nil
		}
		return List(out...), nil
	case KindString:
		s := obj.s
		if err := r.bud.scan(len(s)); err != nil {
			return Value{}, err
		}
		ascii := isASCII(s)
		n := int64(len(s))
		if !ascii {
			n = int64(utf8.RuneCountInString(s))
		}
		a, b, st, err := sliceIndices(n, start, stop, step)
		if err != nil {
			return Value{}, err
		}
		if st == 1 {
			// a substring: free, and found without a string per code point
			if b <= a {
				return String(""), nil
			}
			if ascii {
				return String(s[a:b]), nil
			}
			off := runeToByteIndex(s, int(a))
			end := off + runeToByteIndex(s[off:], int(b-a))
			return String(s[off:end]), nil
		}
		bb := &bounded{bud: &r.bud}
		switch {
		case ascii:
			for i := a; ((st > 0 && i < b) || (st < 0 && i > b)) && bb.err == nil; i += st {
				bb.WriteByte(s[i])
			}
		case st > 0:
			next, k := a, int64(0)
			for i := 0; i < len(s) && next < b && bb.err == nil; k++ {
				size := runeSize(s, i)
				if k == next {
					bb.WriteString(s[i : i+size])
					next += st
				}
				i += size
			}
		default:
			next, k := a, n-1
			for i := len(s); i > 0 && next > b && bb.err == nil; k-- {
				_, size := utf8.DecodeLastRuneInString(s[:i])
				if k == next {
					bb.WriteString(s[i-size : i])
					next += st
				}
				i -= size
			}
		}
		out, err := bb.result()
		return String(out), err
	case KindNone:
		return Value{}, typeErr("'NoneType' object is not subscriptable")
	}
	return Value{}, typeErr("'%s' object is not subscriptable", typeName(obj))
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

func (e *callExpr) eval(r *renderer) (Value, error) {
	fn, err := r.evalExpr(e.fn)
	if err != nil {
		return Value{}, err
	}
	args, kw, err := r.evalArgs(e.args, e.kwargs)
	if err != nil {
		return Value{}, err
	}
	v, err := r.call(fn, args, kw, e.line)
	return v, withLine(err, e.line)
}

func (r *renderer) evalArgs(args []expr, kwargs []kwExpr) ([]Value, []Kwarg, error) {
	var av []Value
	if len(args) > 0 {
		av = make([]Value, len(args))
		for i, a := range args {
			v, err := r.evalExpr(a)
			if err != nil {
				return nil, nil, err
			}
			av[i] = v
		}
	}
	var kv []Kwarg
	for _, k := range kwargs {
		v, err := r.evalExpr(k.e)
		if err != nil {
			return nil, nil, err
		}
		kv = append(kv, Kwarg{k.name, v})
	}
	return av, kv, nil
}

// call calls a callable value.
func (r *renderer) call(fn Value, args []Value, kw []Kwarg, line int) (Value, error) {
	if err := r.bud.step(1); err != nil {
		return Value{}, err
	}
	switch f := fn.p.(type) {
	case *goFunc:
		if fn.k != KindCallable {
			break
		}
		v, err := f.fn(&Call{Name: f.name, Args: args, Kwargs: kw, r: r})
		if err != nil {
			return Value{}, err
		}
		return v, r.chargeResult(v)
	case *macro:
		return r.callMacro(f, args, kw)
	case *method:
		return r.callMethod(f, args, kw)
	case *loopObj:
		return r.callLoop(f, args)
	case *builtin:
		return f.fn(r, args, kw)
	}
	if fn.k == KindUndefined {
		return Value{}, undefError(fn)
	}
	return Value{}, typeErr("'%s' object is not callable", typeName(fn))
}

// chargeResult charges what a Go callable returned against MaxBytes.
func (r *renderer) chargeResult(v Value) error {
	switch v.k {
	case KindString:
		return r.bud.alloc(int64(len(v.s)))
	case KindList, KindTuple:
		return r.bud.allocMul(int64(len(v.list())), valueSize)
	case KindDict:
		return r.bud.allocMul(int64(v.dict().Len()), 2*valueSize)
	}
	return nil
}

// builtin is an engine global or helper callable.
type builtin struct {
	name string
	fn   func(r *renderer, args []Value, kw []Kwarg) (Value, error)
}

func (e *filterExpr) eval(r *renderer) (Value, error) {
	v, err := r.evalExpr(e.obj)
	if err != nil {
		return Value{}, err
	}
	return r.applyFilter(e, v)
}

func (r *renderer) applyFilter(e *filterExpr, v Value) (Value, error) {
	f, ok := filters[e.name]
	if !ok {
		return Value{}, &Error{Line: e.line, Type: "TemplateRuntimeError", Msg: fmt.Sprintf("No filter named %s found.", repr(String(e.name))), Python: true}
	}
	args, kw, err := r.evalArgs(e.args, e.kwargs)
	if err != nil {
		return Value{}, err
	}
	if err := r.bud.step(1); err != nil {
		return Value{}, err
	}
	out, err := f(r, v, args, kw)
	return out, withLine(err, e.line)
}

func (e *testExpr) eval(r *renderer) (Value, error) {
	v, err := r.evalExpr(e.obj)
	if err != nil {
		return Value{}, err
	}
	t, ok := tests[e.name]
	if !ok {
		return Value{}, &Error{Line: e.line, Type: "TemplateRuntimeError", Msg: fmt.Sprintf("No test named %s found.", repr(String(e.name))), Python: true}
	}
	args, kw, err := r.evalArgs(e.args, e.kwargs)
	if err != nil {
		return Value{}, err
	}
	for _, k := range kw {
		args = append(args, k.Value)
	}
	if err := r.bud.step(1); err != nil {
		return Value{}, err
	}
	b, err := t(r, v, args)
	return Bool(b), withLine(err, e.line)
}

func (e *logicExpr) eval(r *renderer) (Value, error) {
	l, err := r.evalExpr(e.l)
	if err != nil {
		return Value{}, err
	}
	if l.Truth() != e.and {
		return l, nil
	}
	return r.evalExpr(e.r)
}

func (e *unaryExpr) eval(r *renderer) (Value, error) {
	v, err := r.evalExpr(e.e)
	if err != nil {
		return Value{}, err
	}
	switch e.op {
	case "not":
		return Bool(!v.Truth()), nil
	case "-", "+":
		switch v.k {
		case KindInt, KindBool:
			if e.op == "+" {
				return Int(v.n), nil
			}
			if v.n == math.MinInt64 {
				return Value{}, overflowErr(e.line)
			}
			return Int(-v.n), nil
		case KindFloat:
			if e.op == "+" {
				return v, nil
			}
			return Float(-v.f()), nil
		case KindUndefined:
			return Value{}, withLine(undefError(v), e.line)
		}
		return Value{}, &Error{Line: e.line, Type: "TypeError", Msg: fmt.Sprintf("bad operand type for unary %s: '%s'", e.op, typeName(v)), Python: true}
	}
	return Value{}, fmt.Errorf("jinja: unknown unary operator %q", e.op)
}

func overflowErr(line int) error {
	return &Error{Line: line, Type: "OverflowError", Msg: "integer overflow: this engine's integers are 64-bit"}
}

func (e *condExpr) eval(r *renderer) (Value, error) {
	c, err := r.evalExpr(e.test)
	if err != nil {
		return Value{}, err
	}
	if c.Truth() {
		return r.evalExpr(e.then)
	}
	if e.els == nil {
		where := fmt.Sprintf("line %d", e.line)
		if r.name != "" {
			where += fmt.Sprintf(" in %s", repr(String(r.name)))
		}
		return undefHint("the inline if-expression on " + where + " evaluated to false and no else section was defined."), nil
	}
	return r.evalExpr(e.els)
}

func (e *concatExpr) eval(r *renderer) (Value, error) {
	parts := make([]string, len(e.items))
	total := int64(0)
	for i, it := range e.items {
		v, err := r.evalExpr(it)
		if err != nil {
			return Value{}, err
		}
		s, err := r.str(v)
		if err != nil {
			return Value{}, err
		}
		parts[i] = s
		total += int64(len(s))
	}
	if err := r.bud.alloc(total); err != nil {
		return Value{}, err
	}
	return String(strings.Join(parts, "")), nil
}

// str is str(v), charged against MaxBytes unless v is a string already.
func (r *renderer) str(v Value) (string, error) {
	switch v.k {
	case KindString:
		return v.s, nil
	case KindUndefined:
		if u, _ := v.p.(*undefined); u != nil && u.exc == "SecurityError" {
			return "", undefError(v)
		}
		return "", nil
	}
	b := &bounded{bud: &r.bud}
	writeStr(b, v)
	return b.result()
}

// print is str(v) as Python's str() makes it (an Undefined of any kind is ""), charged against
// MaxBytes unless v is a string already.
func (r *renderer) print(v Value) (string, error) {
	if v.k == KindString {
		return v.s, nil
	}
	b := &bounded{bud: &r.bud}
	writeStr(b, v)
	return b.result()
}

// repr is repr(v), charged against MaxBytes.
func (r *renderer) repr(v Value) (string, error) {
	b := &bounded{bud: &r.bud}
	writeRepr(b, v)
	return b.result()
}

func (e *compareExpr) eval(r *renderer) (Value, error) {
	l, err := r.evalExpr(e.first)
	if err != nil {
		return Value{}, err
	}
	for i, op := range e.ops {
		rv, err := r.evalExpr(e.rest[i])
		if err != nil {
			return Value{}, err
		}
		ok, err := compareOp(&r.bud, op, l, rv)
		if err != nil {
			return Value{}, withLine(err, e.line)
		}
		if !ok {
			return Bool(false), nil
		}
		l = rv
	}
	return Bool(true), nil
}

// runeSize is the byte length of the code point at s[i] (1 for an invalid byte).
func runeSize(s string, i int) int {
	_, n := utf8.DecodeRuneInString(s[i:])
	return n
}
