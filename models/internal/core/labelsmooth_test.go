package core

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/xla"
)

// hfLabelSmoother is transformers' LabelSmoother written from its definition in float64: rows are
// the logits of the scored positions (already shifted), labels their targets (-100 ignored):
// (1-eps)·Σ nll / N + eps·Σ_pos Σ_v -log_softmax / (N·V).
func hfLabelSmoother(rows [][]float64, labels []int, eps float64) float64 {
	var nll, smooth float64
	n := 0
	for i, r := range rows {
		if labels[i] == IgnoreIndex {
			continue
		}
		m := math.Inf(-1)
		for _, v := range r {
			m = math.Max(m, v)
		}
		s := 0.0
		for _, v := range r {
			s += math.Exp(v - m)
		}
		lse := m + math.Log(s)
		nll += lse - r[labels[i]]
		for _, v := range r {
			smooth += lse - v
		}
		n++
	}
	V := float64(len(rows[0]))
	return (1-eps)*nll/float64(n) + eps*smooth/(float64(n)*V)
}

// The causal LM's label-smoothed loss is HF's LabelSmoother with shift_labels=True (logits[:-1]
// against labels[1:], -100 ignored), within float32 rounding of the float64 formula; factor 0 is
// the plain loss, bit for bit.
func TestCausalLMBatchLossSmoothing(t *testing.T) {
	rt := openGo(t)
	const B, T, V = 2, 6, 11
	rng := rand.New(rand.NewPCG(7, 8))
	flat := make([]float32, B*T*V)
	for i := range flat {
		flat[i] = float32(rng.NormFloat64() * 3)
	}
	labels := []int32{3, 1, -100, 10, 0, 7 /* row 2 */, 5, -100, -100, 2, 9, 4}
	run := func(eps float64, plain bool) float32 {
		return runGraph(t, rt, func(c *mlctx.Context, g *Graph) *Node {
			l := Const(g, tensors.FromFlatDataAndDimensions(flat, B, T, V))
			y := Const(g, tensors.FromFlatDataAndDimensions(labels, B, T))
			if plain {
				return CausalLMLoss(l, y)
			}
			return CausalLMBatchLoss(l, Batch{Labels: y, LabelSmoothing: eps})
		})[0]
	}
	var rows [][]float64
	var targets []int
	for b := range B {
		for p := range T - 1 {
			r := make([]float64, V)
			for v := range V {
				r[v] = float64(flat[(b*T+p)*V+v])
			}
			rows, targets = append(rows, r), append(targets, int(labels[b*T+p+1]))
		}
	}
	for _, eps := range []float64{0.1, 0.5} {
		got, want := float64(run(eps, false)), hfLabelSmoother(rows, targets, eps)
		t.Logf("label_smoothing_factor %.1f: loss %.7f, HF formula (float64) %.7f, diff %.2g", eps, got, want, got-want)
		if math.Abs(got-want) > 1e-6 {
			t.Errorf("eps %g: loss %.7f, want %.7f", eps, got, want)
		}
	}
	if a, b := run(0, false), run(0, true); math.Float32bits(a) != math.Float32bits(b) {
		t.Errorf("factor 0: %v, plain loss %v: not the same bits", a, b)
	}
	if a, b := run(0.1, false), run(0, true); a == b {
		t.Errorf("factor 0.1 left the loss at %v", a)
	}
}

// A single-label classifier is smoothed without the shift; regression and multi-label are refused
// naming label_smoothing_factor (HF's LabelSmoother cannot gather at float targets).
func TestClassificationBatchLossSmoothing(t *testing.T) {
	rt := openGo(t)
	logits := [][]float32{{0.5, -1, 2}, {1, 1, 0}, {-0.3, 0.2, 0.1}}
	labels := []int32{2, -100, 1}
	got := runGraph(t, rt, func(c *mlctx.Context, g *Graph) *Node {
		return ClassificationBatchLoss(SingleLabel, Const(g, logits), Batch{Labels: Const(g, labels), LabelSmoothing: 0.2})
	})[0]
	rows := [][]float64{}
	for _, r := range logits {
		rows = append(rows, []float64{float64(r[0]), float64(r[1]), float64(r[2])})
	}
	want := hfLabelSmoother(rows, []int{2, -100, 1}, 0.2)
	t.Logf("single-label, factor 0.2: loss %.7f, HF formula %.7f", got, want)
	if math.Abs(float64(got)-want) > 1e-6 {
		t.Errorf("loss %.7f, want %.7f", got, want)
	}
	for _, problem := range []string{Regression, MultiLabel} {
		err := buildErr(rt, func(g *Graph) {
			ClassificationBatchLoss(problem, Const(g, [][]float32{{1, 2}}), Batch{Labels: Const(g, [][]float32{{1, 0}}), LabelSmoothing: 0.1})
		})
		if err == nil || !strings.Contains(err.Error(), "label_smoothing_factor") || !strings.Contains(err.Error(), problem) {
			t.Errorf("%s with smoothing: %v, want a refusal naming label_smoothing_factor and %s", problem, err, problem)
		}
	}
}

// buildErr builds a graph with fn and returns the error its panic carries (nil if none).
func buildErr(rt *xla.Runtime, fn func(g *Graph)) (err error) {
	defer xla.Recover(&err, "test")
	g := NewGraph(rt.Backend(), "build")
	fn(g)
	return nil
}
