package step

import (
	"context"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

// TestBF16StateFSDP: bf16 weights with fsdp full_shard over 4 of gotpu's virtual devices (the
// moments sharded as their parameters) train as on one device: the losses and gradient norms of
// 3 steps on the fixture's batch (each replica a row of it) are the one-device run's within 2e-3
// (bf16 forward passes over other batch shapes round differently; observed 4e-4), and the
// exported AdamW state is bf16 with the same names and whole shapes.
func TestBF16StateFSDP(t *testing.T) {
	ctx := context.Background()
	fix, _ := readReference(t, "llama-tiny")
	b := fix.hostBatch(t, true)
	run := func(n int, fsdp *FSDP) ([]float64, State) {
		rt := openGoDevices(t, xla.GoBackendGotpu, n)
		m, err := models.Load(ctx, rt, fixtureDir("llama-tiny"), models.LoadOptions{DType: "bfloat16"})
		if err != nil {
			t.Fatal(err)
		}
		opt := DefaultAdamW()
		opt.WeightDecay = 0.01
		s, err := New(rt, m, Config{Optimizer: opt, NumReplicas: n, FSDP: fsdp})
		if err != nil {
			t.Fatal(err)
		}
		var out []float64
		for range 3 {
			res, err := s.Step(ctx, fixtureMicro(b, n), 3e-3)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, res.Loss, res.GradNorm)
		}
		st, err := s.ExportState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return out, st
	}
	one, st1 := run(1, nil)
	sharded, st4 := run(4, &FSDP{Data: 1, Shard: 4, MinNumParams: 8})
	t.Logf("1 device (loss, grad norm per step): %v", one)
	t.Logf("full_shard 4:                        %v", sharded)
	for i := range one {
		if d := sharded[i] - one[i]; d > 2e-3*one[i] || d < -2e-3*one[i] {
			t.Errorf("value %d: %v with full_shard, %v on one device", i, sharded[i], one[i])
		}
	}
	if len(st4.Optimizer) != len(st1.Optimizer) || len(st4.Optimizer) == 0 {
		t.Fatalf("%d optimizer tensors with full_shard, %d on one device", len(st4.Optimizer), len(st1.Optimizer))
	}
	for i, h := range st4.Optimizer {
		if h.DType != dtypes.BFloat16 || h.Name != st1.Optimizer[i].Name || !slices.Equal(h.Shape, st1.Optimizer[i].Shape) {
			t.Errorf("optimizer state %s is %s%v with full_shard; on one device %s is %s%v", h.Name, h.DType, h.Shape,
				st1.Optimizer[i].Name, st1.Optimizer[i].DType, st1.Optimizer[i].Shape)
		}
	}
}
