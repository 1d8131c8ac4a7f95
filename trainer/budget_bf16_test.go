package trainer

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/trainer/step"
	"github.com/gotpu/gotpu/xla"
)

// TestBudgetBF16AdamWState: the memory budget counts AdamW's state as the stepper allocates it —
// two moments in the parameters' dtype, 2 bytes each for a model loaded as bfloat16 (as torch
// keeps them) and 4 for float32 — for llama-tiny loaded both ways.
func TestBudgetBF16AdamWState(t *testing.T) {
	ctx := context.Background()
	rt, err := xla.Open(ctx, xla.Config{Device: xla.DeviceGo})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for _, tc := range []struct {
		dtype      string
		paramBytes int
	}{{"bfloat16", 2}, {"float32", 4}} {
		m, err := models.Load(ctx, rt, filepath.Join("..", "testdata", "models", "llama-tiny"), models.LoadOptions{DType: tc.dtype})
		if err != nil {
			t.Fatal(err)
		}
		s, err := step.New(rt, m, step.Config{Optimizer: step.DefaultAdamW(), NumReplicas: 1})
		if err != nil {
			t.Fatal(err)
		}
		est, err := EstimateMemory(BudgetRequest{Model: m.Config(), Args: budgetArgs(), SeqLen: 32, ParamBytes: tc.paramBytes})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, p := range m.Params() {
			n += int64(p.NumElements())
		}
		t.Logf("%s: optimizer state %d bytes (estimate %d) for %d parameters", tc.dtype, s.OptimizerStateBytes(), est.Optimizer, n)
		if est.Optimizer != s.OptimizerStateBytes() || est.Optimizer != 2*int64(tc.paramBytes)*n {
			t.Errorf("%s: the budget counts %d bytes of optimizer state, the stepper allocates %d (%d parameters)",
				tc.dtype, est.Optimizer, s.OptimizerStateBytes(), n)
		}
	}
}
