package core

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/xla"
)

func openGo(t testing.TB) *xla.Runtime {
	t.Helper()
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func TestParseSize(t *testing.T) {
	good := map[string]int64{"5GB": 5_000_000_000, "500MiB": 500 << 20, "10KB": 10_000, "3KiB": 3072, "8Mb": 1_000_000, "1234": 1234, "2GiB": 2 << 30}
	for s, want := range good {
		if got, err := ParseSize(s); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "5TB", "1.5GB", "GB", "-3", "0", "5 GB"} {
		if _, err := ParseSize(s); err == nil {
			t.Errorf("ParseSize(%q) accepted", s)
		}
	}
}

// huggingface_hub's rule: a tensor over the limit gets its own shard; otherwise a tensor that would
// overflow the current shard starts the next one.
func TestSplitShards(t *testing.T) {
	mk := func(name string, n int) safetensors.Tensor {
		return safetensors.Tensor{Name: name, DType: safetensors.U8, Shape: []int{n}}
	}
	in := []safetensors.Tensor{mk("a", 4), mk("b", 4), mk("c", 3), mk("big", 20), mk("d", 10), mk("e", 1)}
	var got []string
	for _, s := range SplitShards(in, 10) {
		var names []string
		for _, x := range s {
			names = append(names, x.Name)
		}
		got = append(got, strings.Join(names, "+"))
	}
	want := "a+b|big|c|d|e" // big skips the queue and c is still being filled when it arrives
	if strings.Join(got, "|") != want {
		t.Fatalf("shards %v, want %s", got, want)
	}
}

func TestFormatPyFloat(t *testing.T) {
	cases := map[float64]string{1e-5: "1e-05", 1e-12: "1e-12", 10000: "10000.0", 0.02: "0.02", 0.1: "0.1", 500000: "500000.0",
		1e16: "1e+16", 1.5e-7: "1.5e-07", 0: "0.0", 123456789012345.0: "123456789012345.0", 0.0001: "0.0001"}
	for f, want := range cases {
		if got := formatPyFloat(f); got != want {
			t.Errorf("formatPyFloat(%g) = %s, want %s", f, got, want)
		}
	}
}

// Unchanged fields keep their original spelling; changed ones are written the Python way; unknown
// fields survive; keys are sorted with two-space indentation.
func TestRawConfigMarshal(t *testing.T) {
	raw, err := ParseRawConfig("c.json", []byte(`{"z": {"b": [1, 2], "a": null}, "eps": 1e-05, "theta": 10000.0, "n": 3}`))
	if err != nil {
		t.Fatal(err)
	}
	out, err := raw.Marshal([]Field{
		{Key: "eps", Value: PyFloat(1e-5), Always: true},
		{Key: "theta", Value: PyFloat(5e5), Always: true},
		{Key: "new", Value: 7, Always: true},
		{Key: "absent_default", Value: false, Default: false},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := "{\n  \"eps\": 1e-05,\n  \"n\": 3,\n  \"new\": 7,\n  \"theta\": 500000.0,\n  \"z\": {\n    \"b\": [\n      1,\n      2\n    ],\n    \"a\": null\n  }\n}\n"
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	var n int
	if err := raw.Int("z", &n); err == nil || !strings.Contains(err.Error(), `c.json: field "z"`) {
		t.Errorf("type error: %v", err)
	}
}

// runScalar builds and runs a graph of no inputs returning one float32 tensor.
func runGraph(t *testing.T, rt *xla.Runtime, fn func(c *mlctx.Context, g *Graph) *Node) []float32 {
	t.Helper()
	c := mlctx.New()
	c.SetParam(mlctx.ParamInitialSeed, int64(42))
	e, err := mlctx.NewExec(rt.Backend(), c, fn)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	out, err := e.Exec()
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[float32](out[0])
}

func TestDropout(t *testing.T) {
	rt := openGo(t)
	const n, p = 20000, 0.25
	vals := runGraph(t, rt, func(c *mlctx.Context, g *Graph) *Node {
		return Dropout(c, Ones(g, shapes.Make(dtypes.Float32, n)), p, true)
	})
	zeros, sum := 0, 0.0
	for _, v := range vals {
		switch v {
		case 0:
			zeros++
		case float32(1 / (1 - p)):
		default:
			t.Fatalf("dropout produced %g (want 0 or %g)", v, 1/(1-p))
		}
		sum += float64(v)
	}
	if frac := float64(zeros) / n; math.Abs(frac-p) > 0.02 {
		t.Errorf("dropped %.3f, want %.2f", frac, p)
	}
	if mean := sum / n; math.Abs(mean-1) > 0.03 {
		t.Errorf("mean %.3f, want 1 (inverted dropout)", mean)
	}
	same := runGraph(t, rt, func(c *mlctx.Context, g *Graph) *Node {
		return Dropout(c, Ones(g, shapes.Make(dtypes.Float32, 8)), p, false)
	})
	for _, v := range same {
		if v != 1 {
			t.Fatal("dropout active outside training")
		}
	}
}

// Causal LM loss: shifted labels, -100 ignored, mean over the rest; checked against a direct
// float64 computation.
func TestCausalLMLoss(t *testing.T) {
	rt := openGo(t)
	logits := [][]float32{{0.1, 2, -1}, {1, 0, 0.5}, {-2, 0.3, 0.3}, {0, 0, 1}}
	labels := []int32{2, 1, -100, 0} // position t predicts labels[t+1]: 1, ignored, 0, nothing
	flat := make([]float32, 0, 12)
	for _, r := range logits {
		flat = append(flat, r...)
	}
	got := runGraph(t, rt, func(c *mlctx.Context, g *Graph) *Node {
		l := Const(g, tensors.FromFlatDataAndDimensions(flat, 1, 4, 3))
		y := Const(g, tensors.FromFlatDataAndDimensions(labels, 1, 4))
		return CausalLMLoss(l, y)
	})[0]
	nll := func(row []float32, k int) float64 {
		s := 0.0
		for _, v := range row {
			s += math.Exp(float64(v))
		}
		return math.Log(s) - float64(row[k])
	}
	want := (nll(logits[0], 1) + nll(logits[2], 0)) / 2
	if math.Abs(float64(got)-want) > 1e-6 {
		t.Fatalf("loss %.7f, want %.7f", got, want)
	}
}

func TestClassificationLosses(t *testing.T) {
	rt := openGo(t)
	mse := runGraph(t, rt, func(c *mlctx.Context, g *Graph) *Node {
		return ClassificationLoss(Regression, Const(g, [][]float32{{1}, {3}}), Const(g, []float32{0, 1}))
	})[0]
	if math.Abs(float64(mse)-2.5) > 1e-6 {
		t.Errorf("MSE %g, want 2.5", mse)
	}
	bce := runGraph(t, rt, func(c *mlctx.Context, g *Graph) *Node {
		return ClassificationLoss(MultiLabel, Const(g, [][]float32{{0, 2}}), Const(g, [][]float32{{1, 0}}))
	})[0]
	want := (math.Log(2) + math.Log1p(math.Exp(2))) / 2
	if math.Abs(float64(bce)-want) > 1e-6 {
		t.Errorf("BCE %g, want %g", bce, want)
	}
}
