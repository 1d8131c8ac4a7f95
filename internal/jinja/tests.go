package jinja

// testFunc is a test (x is name(args)).
type testFunc func(r *renderer, v Value, args []Value) (bool, error)

var tests map[string]testFunc

func init() {
	tests = map[string]testFunc{
		"boolean": func(r *renderer, v Value, a []Value) (bool, error) { return v.k == KindBool, nil },
		"callable": func(r *renderer, v Value, a []Value) (bool, error) {
			return v.k == KindCallable || v.k == KindUndefined, nil
		},
		"defined": func(r *renderer, v Value, a []Value) (bool, error) { return v.k != KindUndefined, nil },
		"undefined": func(r *renderer, v Value, a []Value) (bool, error) {
			return v.k == KindUndefined, nil
		},
		"divisibleby": func(r *renderer, v Value, a []Value) (bool, error) {
			if err := arity("test_divisibleby", "num", a); err != nil {
				return false, err
			}
			m, err := r.binop("%", v, a[0])
			if err != nil {
				return false, err
			}
			return equal(&r.bud, m, Int(0))
		},
		"escaped": func(r *renderer, v Value, a []Value) (bool, error) { return v.k == KindString && v.safe, nil },
		"even": func(r *renderer, v Value, a []Value) (bool, error) {
			m, err := r.binop("%", v, Int(2))
			if err != nil {
				return false, err
			}
			return equal(&r.bud, m, Int(0))
		},
		"odd": func(r *renderer, v Value, a []Value) (bool, error) {
			m, err := r.binop("%", v, Int(2))
			if err != nil {
				return false, err
			}
			return equal(&r.bud, m, Int(1))
		},
		"false":   func(r *renderer, v Value, a []Value) (bool, error) { return v.k == KindBool && !v.b(), nil },
		"true":    func(r *renderer, v Value, a []Value) (bool, error) { return v.k == KindBool && v.b(), nil },
		"none":    func(r *renderer, v Value, a []Value) (bool, error) { return v.k == KindNone, nil },
		"float":   func(r *renderer, v Value, a []Value) (bool, error) { return v.k == KindFloat, nil },
		"integer": func(r *renderer, v Value, a []Value) (bool, error) { return v.k == KindInt, nil },
		"number":  func(r *renderer, v Value, a []Value) (bool, error) { return v.isNum(), nil },
		"string":  func(r *renderer, v Value, a []Value) (bool, error) { return v.k == KindString, nil },
		"mapping": func(r *renderer, v Value, a []Value) (bool, error) { return v.k == KindDict, nil },
		"sequence": func(r *renderer, v Value, a []Value) (bool, error) {
			if l, ok := v.p.(*listObj); ok && l.gen != "" {
				return false, nil
			}
			return v.k == KindString || v.k == KindList || v.k == KindTuple || v.k == KindDict, nil
		},
		"iterable": func(r *renderer, v Value, a []Value) (bool, error) {
			return v.k == KindString || v.k == KindList || v.k == KindTuple || v.k == KindDict || v.k == KindUndefined, nil
		},
		"lower": func(r *renderer, v Value, a []Value) (bool, error) {
			s, err := r.str(v)
			return pyIsLower(s), err
		},
		"upper": func(r *renderer, v Value, a []Value) (bool, error) {
			s, err := r.str(v)
			return pyIsUpper(s), err
		},
		"sameas": func(r *renderer, v Value, a []Value) (bool, error) {
			if err := arity("test_sameas", "other", a); err != nil {
				return false, err
			}
			o := a[0]
			if v.k != o.k {
				return false, nil
			}
			switch v.k {
			case KindNone:
				return true, nil
			case KindBool:
				return v.n == o.n, nil
			case KindInt:
				return v.n == o.n && v.n >= -5 && v.n <= 256, nil
			case KindString:
				return v.s == o.s, nil
			case KindUndefined:
				return false, nil
			}
			return v.p == o.p, nil
		},
		"filter": func(r *renderer, v Value, a []Value) (bool, error) {
			_, ok := filters[v.s]
			return v.k == KindString && ok, nil
		},
		"test": func(r *renderer, v Value, a []Value) (bool, error) {
			_, ok := tests[v.s]
			return v.k == KindString && ok, nil
		},
		"in": func(r *renderer, v Value, a []Value) (bool, error) {
			if err := arity("test_in", "seq", a); err != nil {
				return false, err
			}
			return contains2(&r.bud, a[0], v)
		},
	}
	for _, op := range [][2]string{{"eq", "=="}, {"equalto", "=="}, {"==", "=="}, {"ne", "!="}, {"!=", "!="},
		{"lt", "<"}, {"lessthan", "<"}, {"<", "<"}, {"le", "<="}, {"<=", "<="}, {"gt", ">"}, {"greaterthan", ">"},
		{">", ">"}, {"ge", ">="}, {">=", ">="}} {
		cmp := op[1]
		tests[op[0]] = func(r *renderer, v Value, a []Value) (bool, error) {
			if len(a) != 1 {
				return false, engineErr("TypeError", "expected 2 arguments, got %d", len(a)+1)
			}
			return compareOp(&r.bud, cmp, v, a[0])
		}
	}
}

// arity checks a test's one argument besides the value, with Python's messages.
func arity(fn, param string, a []Value) error {
	switch {
	case len(a) == 0:
		return typeErr("%s() missing 1 required positional argument: '%s'", fn, param)
	case len(a) > 1:
		return typeErr("%s() takes 2 positional arguments but %d were given", fn, len(a)+1)
	}
	return nil
}
