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
		if err := d.Set(k, v); err != nil {
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
		if v, ok := obj.dict().Get(String(name)); ok {
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
		if v, ok := obj.dict().Get(key); ok {
			return v, nil
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
		ascii := isASCII(s)
		var runes []string
		n := int64(len(s))
		if !ascii {
			runes = splitRunes(s)
			n = int64(len(runes))
		}
		a, b, st, err := sliceIndices(n, start, stop, step)
		if err != nil {
			return Value{}, err
		}
		if st == 1 {
			if b <= a {
				return String(""), nil
			}
			if ascii {
				return String(s[a:b]), nil
			}
			off := 0
			for _, x := range runes[:a] {
				off += len(x)
			}
			end := off
			for _, x := range runes[a:b] {
				end += len(x)
			}
			return String(s[off:end]), nil
		}
		bb := &bounded{bud: &r.bud}
		for i := a; (st > 0 && i < b) || (st < 0 && i > b); i += st {
			if ascii {
				bb.WriteByte(s[i])
			} else {
				bb.WriteString(runes[i])
			}
		}
		return String(bb.String()), bb.err
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

// splitRunes returns each code point of s as a substring.
func splitRunes(s string) []string {
	out := make([]string, 0, len(s))
	for i := range s {
		out = append(out, s[i:i+runeSize(s, i)])
	}
	return out
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
		v, err := f.fn(&Call{Name: f.name, Args: args, Kwargs: kw})
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
	return b.String(), b.err
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
		ok, err := compareOp(op, l, rv)
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

func compareOp(op string, a, b Value) (bool, error) {
	switch op {
	case "==":
		return equal(a, b), nil
	case "!=":
		return !equal(a, b), nil
	case "in":
		return contains2(b, a)
	case "notin":
		in, err := contains2(b, a)
		return !in, err
	}
	if a.k == KindUndefined {
		return false, undefError(a)
	}
	if b.k == KindUndefined {
		return false, undefError(b)
	}
	c, err := compare(a, b)
	if err != nil {
		if e, ok := err.(*Error); ok && e.Msg == "" {
			return false, typeErr("'%s' not supported between instances of '%s' and '%s'", op, typeName(a), typeName(b))
		}
		return false, err
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	case ">=":
		return c >= 0, nil
	}
	return false, fmt.Errorf("jinja: unknown comparison %q", op)
}

// equal is Python's ==.
func equal(a, b Value) bool { return equalN(a, b, 0) }

func equalN(a, b Value, depth int) bool {
	if depth > maxNest {
		return false
	}
	if a.isNum() && b.isNum() {
		if a.k == KindFloat || b.k == KindFloat {
			return toFloat(a) == toFloat(b)
		}
		return a.n == b.n
	}
	switch a.k {
	case KindString:
		return b.k == KindString && a.s == b.s
	case KindNone:
		return b.k == KindNone
	case KindUndefined:
		return b.k == KindUndefined
	case KindList, KindTuple:
		if b.k != a.k {
			return false
		}
		x, y := a.list(), b.list()
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalN(x[i], y[i], depth+1) {
				return false
			}
		}
		return true
	case KindDict:
		if b.k != KindDict {
			return false
		}
		x, y := a.dict(), b.dict()
		if x.Len() != y.Len() {
			return false
		}
		for i, k := range x.keys {
			v, ok := y.Get(k)
			if !ok || !equalN(x.vals[i], v, depth+1) {
				return false
			}
		}
		return true
	}
	return a.k == b.k && a.p == b.p
}

func toFloat(v Value) float64 {
	if v.k == KindFloat {
		return v.f()
	}
	return float64(v.n)
}

// compare orders two values as Python's < does; a TypeError with an empty message means the
// types do not order (the caller names the operator).
func compare(a, b Value) (int, error) { return compareN(a, b, 0) }

func compareN(a, b Value, depth int) (int, error) {
	if depth > maxNest {
		return 0, &Error{Type: "RecursionError", Msg: "maximum recursion depth exceeded in comparison", Python: true}
	}
	if a.isNum() && b.isNum() {
		if a.k == KindFloat || b.k == KindFloat {
			x, y := toFloat(a), toFloat(b)
			switch {
			case x < y:
				return -1, nil
			case x > y:
				return 1, nil
			}
			return 0, nil
		}
		switch {
		case a.n < b.n:
			return -1, nil
		case a.n > b.n:
			return 1, nil
		}
		return 0, nil
	}
	if a.k == KindString && b.k == KindString {
		return strings.Compare(a.s, b.s), nil
	}
	if (a.k == KindList || a.k == KindTuple) && a.k == b.k {
		x, y := a.list(), b.list()
		for i := 0; i < len(x) && i < len(y); i++ {
			if equal(x[i], y[i]) {
				continue
			}
			return compareN(x[i], y[i], depth+1)
		}
		return len(x) - len(y), nil
	}
	return 0, &Error{Type: "TypeError", Python: true}
}

// contains2 is Python's `item in container`.
func contains2(container, item Value) (bool, error) {
	switch container.k {
	case KindString:
		if item.k != KindString {
			return false, typeErr("'in <string>' requires string as left operand, not %s", typeName(item))
		}
		return strings.Contains(container.s, item.s), nil
	case KindList, KindTuple:
		for _, x := range container.list() {
			if equal(x, item) {
				return true, nil
			}
		}
		return false, nil
	case KindDict:
		if _, ok := hashKey(item); !ok {
			return false, typeErr("unhashable type: '%s'", typeName(item))
		}
		_, ok := container.dict().Get(item)
		return ok, nil
	case KindUndefined:
		return false, nil
	}
	return false, typeErr("argument of type '%s' is not iterable", typeName(container))
}

// runeSize is the byte length of the code point at s[i] (1 for an invalid byte).
func runeSize(s string, i int) int {
	_, n := utf8.DecodeRuneInString(s[i:])
	return n
}
