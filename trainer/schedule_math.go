package trainer

import (
	"math"
	"math/big"
)

// HF's schedules call Python's math.cos and ** on floats, which are the C library's cos and pow.
// glibc's are correctly rounded in practice; Go's math.Cos and math.Pow are not (they differ in
// the last bit for some inputs), which shows up as different learning rates in the 16th digit
// of logged values. pyCos and pyPow compute in extended precision with math/big and round once,
// which reproduces glibc: every learning rate in the real trainer_state.json files in
// testdata/hf-files comes out bit for bit.

// cosPrec is the working precision: far more than the 53 bits of the result, so the single
// final rounding is correct.
const cosPrec = 320

// maxReducibleCos bounds the arguments pyCos reduces itself: with the 512-bit π/2 below, the
// reduction stays exact to far beyond cosPrec for |x| < 2^50. Larger arguments (never produced
// by a schedule, whose cosine arguments are at most 2π × num_cycles) use math.Cos.
const maxReducibleCos = 1 << 50

// bigHalfPi is π/2 to 512 bits (a read-only table).
var bigHalfPi = func() *big.Float {
	f, _, err := big.ParseFloat("1.5707963267948966192313216916397514420985846996875529104874722961539082031431044993140174126710585339910740432566411533235469223047752911158626797040642405587251420513509692605527798223114744774651909822144054878329667230642378241168933915826378207261", 10, 512, big.ToNearestEven)
	if err != nil {
		panic(err)
	}
	return f
}()

// pyCos returns cos(x) correctly rounded (what Python's math.cos gives on glibc).
func pyCos(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) >= maxReducibleCos {
		return math.Cos(x)
	}
	if x == 0 {
		return 1
	}
	newF := func() *big.Float { return new(big.Float).SetPrec(cosPrec) }
	bx := newF().SetFloat64(x)
	// x = k·π/2 + r with |r| ≤ π/4.
	q, _ := newF().Quo(bx, bigHalfPi).Float64()
	k := math.Round(q)
	r := newF().Sub(bx, newF().Mul(newF().SetFloat64(k), bigHalfPi))
	var v *big.Float
	switch int64(math.Mod(k, 4)+4) % 4 {
	case 0:
		v = taylor(r, true)
	case 1:
		v = taylor(r, false)
		v.Neg(v)
	case 2:
		v = taylor(r, true)
		v.Neg(v)
	default:
		v = taylor(r, false)
	}
	f, _ := v.Float64()
	return f
}

// taylor sums the Taylor series of cos(r) (even) or sin(r) for |r| ≤ π/4.
func taylor(r *big.Float, even bool) *big.Float {
	newF := func() *big.Float { return new(big.Float).SetPrec(cosPrec) }
	r2 := newF().Mul(r, r)
	term := newF().SetInt64(1)
	n := int64(0)
	if !even {
		term.Set(r)
		n = 1
	}
	sum := newF().Set(term)
	eps := newF().SetMantExp(big.NewFloat(1), -cosPrec-8)
	for i := 0; i < 200; i++ {
		// term_{n+2} = -term_n · r² / ((n+1)(n+2))
		term.Mul(term, r2)
		term.Quo(term, newF().SetInt64((n+1)*(n+2)))
		term.Neg(term)
		n += 2
		sum.Add(sum, term)
		if term.Sign() == 0 || newF().Abs(term).Cmp(eps) < 0 {
			break
		}
	}
	return sum
}

// pyPow returns x**y as Python does on glibc: correctly rounded for integral exponents up to 64
// in magnitude (computed exactly, then rounded once), and math.Pow otherwise (which may differ
// from the C library in the last bit; HF's polynomial schedule defaults to power 1.0, which is
// exact either way).
func pyPow(x, y float64) float64 {
	if y == 1 {
		return x
	}
	if y != math.Trunc(y) || math.Abs(y) > 64 || x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return math.Pow(x, y)
	}
	n := int(math.Abs(y))
	p := new(big.Float).SetPrec(uint(53*n + 64)).SetInt64(1)
	bx := new(big.Float).SetFloat64(x)
	for i := 0; i < n; i++ {
		p.Mul(p, bx) // exact: the precision holds every digit of x^n
	}
	if y < 0 {
		p = new(big.Float).SetPrec(cosPrec).Quo(new(big.Float).SetPrec(cosPrec).SetInt64(1), p)
	}
	f, _ := p.Float64()
	return f
}
