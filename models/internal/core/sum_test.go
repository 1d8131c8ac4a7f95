package core

import (
	"math"
	"math/rand/v2"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// TestAccurateSum: over 100,003 positive float32 terms of mixed magnitudes (a loss-like sum) the
// compensated pairwise sum is the float64 sum rounded to float32, within one ulp, where a plain
// float32 ReduceSum drifts further; its gradient is 1 for every term.
func TestAccurateSum(t *testing.T) {
	rt := openGo(t)
	const n = 100_003
	rng := rand.New(rand.NewPCG(3, 4))
	xs := make([]float32, n)
	var exact float64
	for i := range xs {
		xs[i] = float32(math.Exp(rng.NormFloat64() * 2))
		exact += float64(xs[i])
	}
	sums := func(f func(*Node) *Node) float32 {
		return runGraph(t, rt, func(c *mlctx.Context, g *Graph) *Node {
			return f(Const(g, tensors.FromFlatDataAndDimensions(xs, n)))
		})[0]
	}
	acc, plain := sums(AccurateSum), sums(ReduceAllSum)
	ulp := float64(math.Nextafter32(float32(exact), float32(math.Inf(1))) - float32(exact))
	t.Logf("float64 sum %.3f; AccurateSum %.3f (|d| %.3g ulp), ReduceAllSum %.3f (|d| %.3g ulp)",
		exact, acc, math.Abs(float64(acc)-exact)/ulp, plain, math.Abs(float64(plain)-exact)/ulp)
	if math.Abs(float64(acc)-exact) > ulp {
		t.Errorf("AccurateSum %.4f, float64 sum %.4f: more than one ulp (%.3g) apart", acc, exact, ulp)
	}
	grads := runGraph(t, rt, func(c *mlctx.Context, g *Graph) *Node {
		x := Const(g, tensors.FromFlatDataAndDimensions(xs[:1000], 1000))
		return Gradient(AccurateSum(Mul(x, x)), x)[0]
	})
	for i, gr := range grads {
		if want := 2 * xs[i]; math.Abs(float64(gr-want)) > 1e-5*math.Abs(float64(want)) {
			t.Fatalf("gradient[%d] = %g, want %g", i, gr, want)
		}
	}
	if got := runGraph(t, rt, func(c *mlctx.Context, g *Graph) *Node {
		return AccurateSum(Const(g, tensors.FromFlatDataAndDimensions([]float32{1, 2}, 2)))
	})[0]; got != 3 {
		t.Errorf("sum of 2 terms: %g", got)
	}
}
