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
	var ints [3]int64
	for i, a := range args {
		if i > 2 {
			break
		}
		if !a.isIntLike() {
			return Value{}, typeErr("'%s' object cannot be interpreted as an integer", typeName(a))
		}
		ints[i] = a.n
	}
	var start, stop, step int64 = 0, 0, 1
	switch len(args) {
	case 1:
		stop = ints[0]
	case 2:
		start, stop = ints[0], ints[1]
	case 3:
		start, stop, step = ints[0], ints[1], ints[2]
	case 0:
		return Value{}, typeErr("range expected at least 1 argument, got 0")
	default:
		return Value{}, typeErr("range expected at most 3 arguments, got %d", len(args))
	}
	if step == 0 {
		return Value{}, valueErr("range() arg 3 must not be zero")
	}
	var n uint64
	switch {
	case step > 0 && stop > start:
		n = (uint64(stop-start)-1)/uint64(step) + 1
	case step < 0 && stop < start:
		n = (uint64(start-stop)-1)/uint64(-step) + 1
	}
	if n > MaxRange {
		return Value{}, &Error{Type: "OverflowError", Msg: fmt.Sprintf("Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", MaxRange), Python: true}
	}
	items := make([]Value, n)
	for i := range items {
		items[i] = Int(start + int64(i)*step)
	}
	return List(items...), nil
}

func gRange(r *renderer, args []Value, kw []Kwarg) (Value, error) {
	if len(kw) > 0 {
		return Value{}, typeErr("range() takes no keyword arguments")
	}
	v, err := Range(args)
	if err != nil {
		return Value{}, err
	}
	return v, r.chargeResult(v)
}

// dictFrom is dict(*args, **kwargs) with at most one positional mapping or list of pairs.
func (r *renderer) dictFrom(name string, args []Value, kw []Kwarg) (*Dict, error) {
	d := NewDict()
	if len(args) > 1 {
		return nil, typeErr("%s expected at most 1 argument, got %d", name, len(args))
	}
	if len(args) == 1 {
		a := args[0]
		switch a.k {
		case KindDict:
			src := a.dict()
			for i, k := range src.keys {
				_ = d.Set(k, src.vals[i])
			}
		default:
			items, err := r.iterate(a)
			if err != nil {
				return nil, err
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
				if err := d.Set(pair[0], pair[1]); err != nil {
					return nil, err
				}
			}
		}
	}
	for _, k := range kw {
		_ = d.Set(String(k.Name), k.Value)
	}
	return d, r.bud.allocMul(int64(d.Len()), 2*valueSize)
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
