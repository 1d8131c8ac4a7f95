package step

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

// trainLosses runs steps updates on the same batch and returns the losses.
func trainLosses(t *testing.T, backend string, cfg Config, fixture string, b *data.Batch, steps int, lr float64) []float64 {
	t.Helper()
	s := newFixtureStepper(t, openGoBackend(t, backend), fixture, cfg)
	var losses []float64
	for range steps {
		res, err := s.Step(context.Background(), [][]*data.Batch{{b}}, lr)
		if err != nil {
			t.Fatal(err)
		}
		if res.Skipped {
			t.Fatal("update skipped")
		}
		losses = append(losses, res.Loss)
	}
	return losses
}

// TestBF16MixedPrecision: bf16 compute with float32 master weights gives the float32 loss within
// bf16's precision on the first step (8 bits of mantissa, ~0.4% per value: 1% is generous), then
// follows the float32 run (training amplifies the differences: 5% after 5 fast steps) and learns.
func TestBF16MixedPrecision(t *testing.T) {
	for _, backend := range goBackends {
		t.Run(backend, func(t *testing.T) { bf16MixedPrecision(t, backend) })
	}
}

func bf16MixedPrecision(t *testing.T, backend string) {
	b := randomBatch(rand.New(rand.NewPCG(5, 6)), 4, 16, 512)
	opt := DefaultAdamW()
	f32 := trainLosses(t, backend, Config{Optimizer: opt, NumReplicas: 1}, "llama-tiny", b, 5, 3e-3)
	bf16 := trainLosses(t, backend, Config{Optimizer: opt, NumReplicas: 1, BF16: true}, "llama-tiny", b, 5, 3e-3)
	for i := range f32 {
		tol := 5e-2
		if i == 0 {
			tol = 1e-2
		}
		if math.Abs(bf16[i]-f32[i]) > tol*f32[i] {
			t.Errorf("step %d: bf16 loss %.5f, float32 %.5f", i+1, bf16[i], f32[i])
		}
	}
	if bf16[0] == f32[0] {
		t.Error("bf16 loss equals the float32 one exactly: mixed precision is not in effect")
	}
	if !(bf16[len(bf16)-1] < bf16[0]) {
		t.Errorf("bf16 run did not learn: %v", bf16)
	}
}

// TestAdafactorLearns: HF's Adafactor configuration trains (the loss falls on a repeated batch)
// and keeps factored state for matrices.
func TestAdafactorLearns(t *testing.T) {
	b := randomBatch(rand.New(rand.NewPCG(7, 8)), 4, 16, 512)
	opt := Optimizer{Name: "adafactor", WeightDecay: 0.01, MaxGradNorm: 1}
	losses := trainLosses(t, xla.GoBackendSimpleGo, Config{Optimizer: opt, NumReplicas: 1}, "llama-tiny", b, 6, 1e-2)
	if !(losses[len(losses)-1] < losses[0]-0.1) {
		t.Fatalf("Adafactor did not learn: %v", losses)
	}
}

// TestNonFiniteSkipsUpdate: NaN gradients leave parameters, optimizer state and the optimizer
// step count untouched.
func TestNonFiniteSkipsUpdate(t *testing.T) {
	rt := openGo(t)
	m, err := models.Load(context.Background(), rt, fixtureDir("llama-tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(rt, m, Config{Optimizer: DefaultAdamW(), NumReplicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	b := randomBatch(rand.New(rand.NewPCG(9, 10)), 2, 8, 512)
	if _, err := s.Step(context.Background(), [][]*data.Batch{{b}}, 1e-3); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, m)
	// All labels ignored: the loss is 0/0 = NaN, and so are the gradients.
	bad := *b
	bad.Labels = make([]int32, len(b.Labels))
	for i := range bad.Labels {
		bad.Labels[i] = data.IgnoreIndex
	}
	res, err := s.Step(context.Background(), [][]*data.Batch{{&bad}}, 1e-3)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Skipped || s.OptimizerStep() != 1 {
		t.Fatalf("non-finite step not skipped: %+v, optimizer step %d", res, s.OptimizerStep())
	}
	after := snapshot(t, m)
	for name, vals := range before {
		for i, v := range vals {
			if after[name][i] != v && !(math.IsNaN(v) && math.IsNaN(after[name][i])) {
				t.Fatalf("%s[%d] changed from %v to %v in a skipped step", name, i, v, after[name][i])
			}
		}
	}
}

// snapshot copies every variable of the model's context (parameters and optimizer state).
func snapshot(t *testing.T, m models.Model) map[string][]float64 {
	out := map[string][]float64{}
	for v := range m.Context().IterVariables() {
		if v.Shape().DType.IsFloat() {
			out[v.ScopeAndName()] = floats(t, v.MustValue())
		}
	}
	return out
}
