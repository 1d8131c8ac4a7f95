package jinja

import (
	"fmt"
	"strings"
)

// Python's comparisons: ==, <, in. Each charges a step per pair of values it compares, so that
// values shared many times over (a DAG: [x, x] doubled) meet MaxSteps and the context's end
// instead of being compared path by path.

func compareOp(bud *budget, op string, a, b Value) (bool, error) {
	switch op {
	case "==":
		return equal(bud, a, b)
	case "!=":
		eq, err := equal(bud, a, b)
		return !eq, err
	case "in":
		return contains2(bud, b, a)
	case "notin":
		in, err := contains2(bud, b, a)
		return !in, err
	}
	if a.k == KindUndefined {
		return false, undefError(a)
	}
	if b.k == KindUndefined {
		return false, undefError(b)
	}
	c, err := compare(bud, a, b)
	if err != nil {
		if unorderable(err) {
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

// equal is Python's ==. It charges a step per pair of values compared (a value shared many
// times over, a DAG, is otherwise compared path by path without end), and, as Python's
// PyObject_RichCompareBool, takes the same list, tuple or dict as equal to itself without
// comparing its items.
func equal(bud *budget, a, b Value) (bool, error) { return equalN(bud, a, b, 0) }

func equalN(bud *budget, a, b Value, depth int) (bool, error) {
	if err := bud.step(1); err != nil {
		return false, err
	}
	if depth > maxNest {
		return false, nil
	}
	if a.isNum() && b.isNum() {
		if a.k == KindFloat || b.k == KindFloat {
			return toFloat(a) == toFloat(b), nil
		}
		return a.n == b.n, nil
	}
	switch a.k {
	case KindString:
		return b.k == KindString && a.s == b.s, nil
	case KindNone:
		return b.k == KindNone, nil
	case KindUndefined:
		return b.k == KindUndefined, nil
	case KindList, KindTuple:
		if b.k != a.k {
			return false, nil
		}
		if a.p == b.p {
			return true, nil
		}
		x, y := a.list(), b.list()
		if len(x) != len(y) {
			return false, nil
		}
		for i := range x {
			if eq, err := equalN(bud, x[i], y[i], depth+1); !eq || err != nil {
				return false, err
			}
		}
		return true, nil
	case KindDict:
		if b.k != KindDict {
			return false, nil
		}
		if a.p == b.p {
			return true, nil
		}
		x, y := a.dict(), b.dict()
		if x.Len() != y.Len() {
			return false, nil
		}
		for i, k := range x.keys {
			v, ok, err := y.get(bud, k)
			if !ok || err != nil {
				return false, err
			}
			if eq, err := equalN(bud, x.vals[i], v, depth+1); !eq || err != nil {
				return false, err
			}
		}
		return true, nil
	}
	return a.k == b.k && a.p == b.p, nil
}

func toFloat(v Value) float64 {
	if v.k == KindFloat {
		return v.f()
	}
	return float64(v.n)
}

// compare orders two values as Python's < does, charging a step per pair of values compared;
// a TypeError with an empty message (unorderable) means the types do not order (the caller
// names the operator).
func compare(bud *budget, a, b Value) (int, error) { return compareN(bud, a, b, 0) }

// unorderable reports whether err is compare's "these types do not order", as opposed to a
// limit, the context's end or a recursion error, which callers pass on unchanged.
func unorderable(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Type == "TypeError" && e.Msg == ""
}

func compareN(bud *budget, a, b Value, depth int) (int, error) {
	if err := bud.step(1); err != nil {
		return 0, err
	}
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
			eq, err := equalN(bud, x[i], y[i], depth+1)
			if err != nil {
				return 0, err
			}
			if eq {
				continue
			}
			return compareN(bud, x[i], y[i], depth+1)
		}
		return len(x) - len(y), nil
	}
	return 0, &Error{Type: "TypeError", Python: true}
}

// contains2 is Python's `item in container`.
func contains2(bud *budget, container, item Value) (bool, error) {
	switch container.k {
	case KindString:
		if item.k != KindString {
			return false, typeErr("'in <string>' requires string as left operand, not %s", typeName(item))
		}
		if err := bud.scan(len(container.s)); err != nil {
			return false, err
		}
		return strings.Contains(container.s, item.s), nil
	case KindList, KindTuple:
		for _, x := range container.list() {
			if eq, err := equal(bud, x, item); eq || err != nil {
				return eq, err
			}
		}
		return false, nil
	case KindDict:
		h, bad, ok, err := keyOf(bud, item)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, typeErr("unhashable type: '%s'", typeName(bad))
		}
		i, err := container.dict().findKey(bud, item, h)
		return i >= 0, err
	case KindUndefined:
		return false, nil
	}
	return false, typeErr("argument of type '%s' is not iterable", typeName(container))
}
