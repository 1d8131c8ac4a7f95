package jinja

import (
	"math"
	"math/bits"
	"strings"
)

func (e *binExpr) eval(r *renderer) (Value, error) {
	a, err := r.evalExpr(e.l)
	if err != nil {
		return Value{}, err
	}
	b, err := r.evalExpr(e.r)
	if err != nil {
		return Value{}, err
	}
	v, err := r.binop(e.op, a, b)
	if err != nil {
		if e2, ok := err.(*Error); ok && e2.Type == "OverflowError" && e2.Msg == "" {
			return Value{}, overflowErr(e.line)
		}
		return Value{}, withLine(err, e.line)
	}
	return v, nil
}

func unsupported(op string, a, b Value) error {
	return typeErr("unsupported operand type(s) for %s: '%s' and '%s'", op, typeName(a), typeName(b))
}

// binop is Python's binary operator on two values (ints are 64-bit: overflow is an error).
func (r *renderer) binop(op string, a, b Value) (Value, error) {
	if a.k == KindUndefined {
		return Value{}, undefError(a)
	}
	if b.k == KindUndefined {
		return Value{}, undefError(b)
	}
	if a.isNum() && b.isNum() {
		return numop(op, a, b)
	}
	switch op {
	case "+":
		switch {
		case a.k == KindString && b.k == KindString:
			if err := r.bud.alloc(int64(len(a.s)) + int64(len(b.s))); err != nil {
				return Value{}, err
			}
			return Value{k: KindString, s: a.s + b.s, safe: a.safe}, nil
		case a.k == KindString:
			return Value{}, typeErr("can only concatenate str (not \"%s\") to str", typeName(b))
		case (a.k == KindList || a.k == KindTuple) && a.k == b.k:
			x, y := a.list(), b.list()
			if err := r.bud.allocMul(int64(len(x)+len(y)), valueSize); err != nil {
				return Value{}, err
			}
			out := make([]Value, 0, len(x)+len(y))
			out = append(append(out, x...), y...)
			return Value{k: a.k, p: &listObj{items: out}}, nil
		case a.k == KindList || a.k == KindTuple:
			return Value{}, typeErr("can only concatenate %s (not \"%s\") to %s", typeName(a), typeName(b), typeName(a))
		}
	case "*":
		switch {
		case (a.k == KindString || a.isSeq()) && b.isIntLike():
			return r.repeat(a, b.n)
		case (b.k == KindString || b.isSeq()) && a.isIntLike():
			return r.repeat(b, a.n)
		case a.k == KindString || a.isSeq() || b.k == KindString || b.isSeq():
			other := b
			if b.k == KindString || b.isSeq() {
				other = a
			}
			if other.isNum() || other.k == KindString || other.isSeq() {
				return Value{}, typeErr("can't multiply sequence by non-int of type '%s'", typeName(other))
			}
		}
	case "%":
		if a.k == KindString {
			return r.percentFormat(a.s, b)
		}
	}
	return Value{}, unsupported(op, a, b)
}

// repeat is s * n for a str or a list, charged before it is made.
func (r *renderer) repeat(v Value, n int64) (Value, error) {
	if n < 0 {
		n = 0
	}
	if v.k == KindString && (v.s == "" || n == 0) {
		return String(""), nil
	}
	if v.isSeq() && (len(v.list()) == 0 || n == 0) {
		// nothing to repeat: at once, however large n is (a loop appending nothing 10**18
		// times would outlast any deadline)
		return Value{k: v.k, p: &listObj{items: []Value{}}}, nil
	}
	if v.k == KindString {
		if err := r.bud.allocMul(n, int64(len(v.s))); err != nil {
			return Value{}, err
		}
		return String(strings.Repeat(v.s, int(n))), nil
	}
	items := v.list()
	if err := r.bud.allocMul(n, int64(len(items))*valueSize); err != nil {
		return Value{}, err
	}
	out := make([]Value, 0, int(n)*len(items))
	for range n {
		out = append(out, items...)
	}
	return Value{k: v.k, p: &listObj{items: out}}, nil
}

func numop(op string, a, b Value) (Value, error) {
	if a.k != KindFloat && b.k != KindFloat {
		x, y := a.n, b.n
		switch op {
		case "+":
			s, c := bits.Add64(uint64(x), uint64(y), 0)
			_ = c
			if (x >= 0) == (y >= 0) && (int64(s) >= 0) != (x >= 0) {
				return Value{}, &Error{Type: "OverflowError"}
			}
			return Int(int64(s)), nil
		case "-":
			s := x - y
			if (x >= 0) != (y >= 0) && (s >= 0) != (x >= 0) {
				return Value{}, &Error{Type: "OverflowError"}
			}
			return Int(s), nil
		case "*":
			if x != 0 && y != 0 {
				p := x * y
				if p/y != x || (x == -1 && y == math.MinInt64) || (y == -1 && x == math.MinInt64) {
					return Value{}, &Error{Type: "OverflowError"}
				}
				return Int(p), nil
			}
			return Int(0), nil
		case "/":
			if y == 0 {
				return Value{}, &Error{Type: "ZeroDivisionError", Msg: "division by zero", Python: true}
			}
			return Float(float64(x) / float64(y)), nil
		case "//":
			if y == 0 {
				return Value{}, &Error{Type: "ZeroDivisionError", Msg: "integer division or modulo by zero", Python: true}
			}
			if x == math.MinInt64 && y == -1 {
				return Value{}, &Error{Type: "OverflowError"}
			}
			q := x / y
			if (x%y != 0) && ((x < 0) != (y < 0)) {
				q--
			}
			return Int(q), nil
		case "%":
			if y == 0 {
				return Value{}, &Error{Type: "ZeroDivisionError", Msg: "integer modulo by zero", Python: true}
			}
			if y == -1 {
				return Int(0), nil
			}
			m := x % y
			if m != 0 && ((m < 0) != (y < 0)) {
				m += y
			}
			return Int(m), nil
		case "**":
			if y < 0 {
				if x == 0 {
					return Value{}, &Error{Type: "ZeroDivisionError", Msg: "0.0 cannot be raised to a negative power", Python: true}
				}
				return Float(math.Pow(float64(x), float64(y))), nil
			}
			res := int64(1)
			base := x
			for e := y; e > 0; e >>= 1 {
				if e&1 == 1 {
					hi, lo := bits.Mul64(uint64(abs64(res)), uint64(abs64(base)))
					if hi != 0 || lo > math.MaxInt64 {
						return Value{}, &Error{Type: "OverflowError"}
					}
					neg := (res < 0) != (base < 0)
					res = int64(lo)
					if neg {
						res = -res
					}
				}
				if e > 1 {
					hi, lo := bits.Mul64(uint64(abs64(base)), uint64(abs64(base)))
					if hi != 0 || lo > math.MaxInt64 {
						return Value{}, &Error{Type: "OverflowError"}
					}
					base = int64(lo)
				}
			}
			return Int(res), nil
		}
	}
	x, y := toFloat(a), toFloat(b)
	switch op {
	case "+":
		return Float(x + y), nil
	case "-":
		return Float(x - y), nil
	case "*":
		return Float(x * y), nil
	case "/":
		if y == 0 {
			return Value{}, &Error{Type: "ZeroDivisionError", Msg: "float division by zero", Python: true}
		}
		return Float(x / y), nil
	case "//":
		if y == 0 {
			return Value{}, &Error{Type: "ZeroDivisionError", Msg: "float floor division by zero", Python: true}
		}
		return Float(pyFloorDiv(x, y)), nil
	case "%":
		if y == 0 {
			return Value{}, &Error{Type: "ZeroDivisionError", Msg: "float modulo", Python: true}
		}
		return Float(pyFmod(x, y)), nil
	case "**":
		if x == 0 && y < 0 {
			return Value{}, &Error{Type: "ZeroDivisionError", Msg: "0.0 cannot be raised to a negative power", Python: true}
		}
		if x < 0 && y != math.Trunc(y) {
			return Value{}, engineErr("ValueError", "negative number raised to a fractional power (Python gives a complex number)")
		}
		p := math.Pow(x, y)
		if math.IsInf(p, 0) && !math.IsInf(x, 0) && !math.IsInf(y, 0) {
			return Value{}, &Error{Type: "OverflowError", Msg: "(34, 'Numerical result out of range')", Python: true}
		}
		return Float(p), nil
	}
	return Value{}, unsupported(op, a, b)
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// pyFmod is Python's float %: the result has the divisor's sign.
func pyFmod(x, y float64) float64 {
	m := math.Mod(x, y)
	if m != 0 {
		if (y < 0) != (m < 0) {
			m += y
		}
	} else {
		m = math.Copysign(0, y)
	}
	return m
}

// pyFloorDiv is Python's float //.
func pyFloorDiv(x, y float64) float64 {
	m := math.Mod(x, y)
	div := (x - m) / y
	if m != 0 && (y < 0) != (m < 0) {
		div--
	}
	if div == 0 {
		return math.Copysign(0, x/y)
	}
	f := math.Floor(div)
	if div-f > 0.5 {
		f++
	}
	return f
}
