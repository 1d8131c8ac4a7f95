package jinja

import "fmt"

// MaxRange is the sandbox's limit on range() (jinja2.sandbox.MAX_RANGE).
const MaxRange = 100000

// globals are the engine's default globals; render variables shadow them.
var globals map[string]Value

func init() {
	globals = map[string]Value{
		"range":     builtinValue("range", gRange),
		"dict":      builtinValue("dict", gDict),
		"namespace": builtinValue("namespace", gNamespace),
		"cycler":    builtinValue("cycler", gCycler),
		"joiner":    builtinValue("joiner", gJoiner),
	}
}

func builtinValue(name string, fn func(r *renderer, args []Value, kw []Kwarg) (Value, error)) Value {
	return Value{k: KindCallable, p: &builtin{name: name, fn: fn}}
}

// Range is Python's range under Jinja2's sandbox: 1 to 3 int arguments, at most MaxRange items.
func Range(args []Value) (Value, error) {
	start, step, n, err := rangeArgs(args)
	if err != nil {
		return Value{}, err
	}
	items := make([]Value, n)
	for i := range items {
		items[i] = Int(start + int64(i)*step)
	}
	return List(items...), nil
}

// rangeArgs checks range's arguments and returns its start, step and length.
func rangeArgs(args []Value) (start, step int64, n uint64, err error) {
	var ints [3]int64
	for i, a := range args {
		if i > 2 {
			break
		}
		if !a.isIntLike() {
			return 0, 0, 0, typeErr("'%s' object cannot be interpreted as an integer", typeName(a))
		}
		ints[i] = a.n
	}
	var stop int64
	start, step = 0, 1
	switch len(args) {
	case 1:
		stop = ints[0]
	case 2:
		start, stop = ints[0], ints[1]
	case 3:
		start, stop, step = ints[0], ints[1], ints[2]
	case 0:
		return 0, 0, 0, typeErr("range expected at least 1 argument, got 0")
	default:
		return 0, 0, 0, typeErr("range expected at most 3 arguments, got %d", len(args))
	}
	if step == 0 {
		return 0, 0, 0, valueErr("range() arg 3 must not be zero")
	}
	switch {
	case step > 0 && stop > start:
		n = (uint64(stop-start)-1)/uint64(step) + 1
	case step < 0 && stop < start:
		n = (uint64(start-stop)-1)/uint64(-step) + 1
	}
	if n > MaxRange {
		return 0, 0, 0, &Error{Type: "OverflowError", Msg: fmt.Sprintf("Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", MaxRange), Python: true}
	}
	return start, step, n, nil
}

// gRange is range(), its list charged before it is made.
func gRange(r *renderer, args []Value, kw []Kwarg) (Value, error) {
	if len(kw) > 0 {
		return Value{}, typeErr("range() takes no keyword arguments")
	}
	_, _, n, err := rangeArgs(args)
	if err != nil {
		return Value{}, err
	}
	if err := r.bud.allocMul(int64(n), valueSize); err != nil {
		return Value{}, err
	}
	return Range(args)
}

// dictFrom is dict(*args, **kwargs) with at most one positional mapping or list of pairs. Its
// entries are charged before the dict is made (at most one per item and keyword).
func (r *renderer) dictFrom(name string, args []Value, kw []Kwarg) (*Dict, error) {
	d := NewDict()
	if len(args) > 1 {
		return nil, typeErr("%s expected at most 1 argument, got %d", name, len(args))
	}
	var items []Value
	var src *Dict
	if len(args) == 1 {
		if args[0].k == KindDict {
			src = args[0].dict()
		} else {
			var err error
			if items, err = r.iterate(args[0]); err != nil {
				return nil, err
			}
		}
	}
	n := int64(len(items)) + int64(len(kw))
	if src != nil {
		n += int64(src.Len())
	}
	if err := r.bud.allocMul(n, 2*valueSize); err != nil {
		return nil, err
	}
	if src != nil {
		for i, k := range src.keys {
			if err := d.set(&r.bud, k, src.vals[i]); err != nil {
				return nil, err
			}
		}
	}
	for i, it := range items {
		if it.k == KindUndefined || (it.k == KindList && it.p.(*listObj).gen != "") {
			return nil, typeErr("cannot convert dictionary update sequence element #%d to a sequence", i)
		}
		pair, err := r.iterate(it)
		if err != nil {
			return nil, typeErr("cannot convert dictionary update sequence element #%d to a sequence", i)
		}
		if len(pair) != 2 {
			return nil, valueErr("dictionary update sequence element #%d has length %d; 2 is required", i, len(pair))
		}
		if err := d.set(&r.bud, pair[0], pair[1]); err != nil {
			return nil, err
		}
	}
	for _, k := range kw {
		if err := d.set(&r.bud, String(k.Name), k.Value); err != nil {
			return nil, err
		}
	}
	return d, nil
}

func gDict(r *renderer, args []Value, kw []Kwarg) (Value, error) {
	d, err := r.dictFrom("dict", args, kw)
	if err != nil {
		return Value{}, err
	}
	return DictValue(d), nil
}

func gNamespace(r *renderer, args []Value, kw []Kwarg) (Value, error) {
	d, err := r.dictFrom("Namespace", args, kw)
	if err != nil {
		return Value{}, err
	}
	return Value{k: KindNamespace, p: &namespace{d: d}}, nil
}

// cycler is jinja2.utils.Cycler.
type cycler struct {
	items []Value
	pos   int
}

func gCycler(r *renderer, args []Value, kw []Kwarg) (Value, error) {
	if len(args) == 0 {
		return Value{}, typeErr("at least one item has to be provided")
	}
	return Value{k: KindObject, p: &cycler{items: append([]Value{}, args...)}}, nil
}

func gJoiner(r *renderer, args []Value, kw []Kwarg) (Value, error) {
	a, err := bindArgs("joiner", args, kw, "sep")
	if err != nil {
		return Value{}, err
	}
	sep := String(", ")
	if has(a[0]) {
		sep = a[0]
	}
	used := false
	return builtinValue("joiner", func(r *renderer, args []Value, kw []Kwarg) (Value, error) {
		if !used {
			used = true
			return String(""), nil
		}
		return sep, nil
	}), nil
}
