package core

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// AccurateSum is the sum of every element of a float32 x, rounded once: the float64 sum of the
// elements rounded to float32, up to a few units in the last place of float32's second word.
// A float32 ReduceSum of n terms drifts by up to n rounding errors, which over a batch of
// thousands of tokens is several ulps of the mean loss; that drift depends on how the terms are
// laid out, so the loss of a packed row and the token-weighted mean of its examples run alone
// (the same per-token values) would differ by it. Here the terms are added pairwise (a tree of
// log2 n levels) with each addition's rounding error kept exactly (Knuth's TwoSum, as the
// step's exactSum does across micro-batches) and the errors added back at the end.
//
// The gradient is ReduceAllSum's (1 for every element): the compensation is a constant to
// autodiff, computed on StopGradient'ed values. XLA does not reassociate floating-point
// arithmetic, so the error terms survive compilation. Other dtypes get ReduceAllSum.
func AccurateSum(x *Node) *Node {
	plain := ReduceAllSum(x)
	n := x.Shape().Size()
	if x.DType() != dtypes.Float32 || n <= 2 {
		return plain
	}
	g := x.Graph()
	v := StopGradient(Reshape(x, n))
	p := 1
	for p < n {
		p *= 2
	}
	if p > n {
		v = Concatenate([]*Node{v, Zeros(g, shapes.Make(dtypes.Float32, p-n))}, 0)
	}
	errs := ScalarZero(g, dtypes.Float32)
	for m := p; m > 1; m /= 2 {
		pairs := Reshape(v, m/2, 2)
		a := Reshape(Slice(pairs, AxisRange(), AxisRange(0, 1)), m/2)
		b := Reshape(Slice(pairs, AxisRange(), AxisRange(1, 2)), m/2)
		s := Add(a, b)
		bb := Sub(s, a)
		e := Add(Sub(a, Sub(s, bb)), Sub(b, bb))
		// The errors are ~2^-24 of the partial sums: their own float32 sum is exact enough.
		errs = Add(errs, ReduceAllSum(e))
		v = s
	}
	total := Add(Reshape(v), errs)
	// plain + (total - plain): total's value, plain's gradient. For terms of one sign (losses)
	// the two are within a factor of two, so total - plain is exact (Sterbenz) and the result
	// is total; with cancellation it carries at most one more rounding.
	return Add(plain, StopGradient(Sub(total, plain)))
}
