package gobackend

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
)

// TestNativeComparisonsMatchSimpleGo runs every comparison on int32, float32 and bfloat16
// operands — the same shape, a scalar on either side, the one-hot pattern ([n, m, 1] against
// [1, 1, v], split across goroutines) and a column against a row — with equal values, NaNs and
// signed zeros among the floats, natively and on simplego.
func TestNativeComparisonsMatchSimpleGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	type pair struct{ a, b []int }
	pairs := []pair{
		{[]int{7, 33}, []int{7, 33}},
		{[]int{7, 33}, nil},
		{nil, []int{129}},
		{[]int{4, 16, 1}, []int{1, 1, 1031}}, // one-hot: 66k outputs, split across goroutines
		{[]int{5, 1}, []int{1, 9}},
		{[]int{3, 1, 7}, []int{3, 5, 7}},
	}
	size := func(dims []int) int {
		n := 1
		for _, d := range dims {
			n *= d
		}
		return n
	}
	// Few distinct values, so that equality is frequent.
	ints := func(n int) []int32 {
		x := make([]int32, n)
		for i := range x {
			x[i] = int32(rng.IntN(9)) - 4
		}
		return x
	}
	floats := func(n int) []float32 {
		special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0}
		x := make([]float32, n)
		for i := range x {
			if rng.IntN(6) == 0 {
				x[i] = special[rng.IntN(len(special))]
			} else {
				x[i] = float32(rng.IntN(9)-4) / 2
			}
		}
		return x
	}
	halves := func(n int) []bfloat16.BFloat16 {
		x := make([]bfloat16.BFloat16, n)
		for i, f := range floats(n) {
			x[i] = bfloat16.FromFloat32(f)
		}
		return x
	}
	prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, p []backends.Op) []backends.Op {
		var outs []backends.Op
		for _, f := range []func(a, b backends.Op) (backends.Op, error){bld.Equal, bld.NotEqual, bld.LessThan,
			bld.LessOrEqual, bld.GreaterThan, bld.GreaterOrEqual} {
			outs = append(outs, must(f(p[0], p[1])))
		}
		return outs
	}
	for _, pr := range pairs {
		for _, kind := range []string{"int32", "float32", "bfloat16"} {
			var a, b any
			switch kind {
			case "int32":
				a, b = ints(size(pr.a)), ints(size(pr.b))
			case "float32":
				a, b = floats(size(pr.a)), floats(size(pr.b))
			default:
				a, b = halves(size(pr.a)), halves(size(pr.b))
			}
			what := fmt.Sprintf("%s %v vs %v", kind, pr.a, pr.b)
			st := matchSimpleGo(t, what, prog, []arg{{a, pr.a}, {b, pr.b}})
			if st.Comparisons != 6 || st.Segments != 0 {
				t.Fatalf("%s: split %+v, want 6 native comparisons", what, st)
			}
		}
	}
	// A value compared with itself is read once.
	self := func(bld backends.Builder, must func(backends.Op, error) backends.Op, p []backends.Op) []backends.Op {
		return []backends.Op{must(bld.Equal(p[0], p[0])), must(bld.LessThan(p[0], p[0]))}
	}
	matchSimpleGo(t, "self", self, []arg{{floats(100), []int{100}}})
}
