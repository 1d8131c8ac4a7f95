package step

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

func windowStepper(t *testing.T, rt *xla.Runtime, replicas, window, limit int) *Stepper {
	t.Helper()
	m, err := models.Load(context.Background(), rt, fixtureDir("gpt2-tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	opt := DefaultAdamW()
	opt.WeightDecay = 0.01
	s, err := New(rt, m, Config{Optimizer: opt, NumReplicas: replicas, Window: window, MaxConsecutiveNonfinite: limit})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestWindowScalarsExact: 12 steps dispatched asynchronously with a window of 5 (so two forced
// reads and rows with j and k > 0 of the table), a decaying learning rate and non-finite updates
// at steps 3, 4 and 9 (the optimizer step count then lags the global step by up to 3), end
// bitwise where 12 synchronous Steps end — each of which computes its scalars for exactly its
// own (lr, t) — in parameters, optimizer state, step count, losses and norms.
func TestWindowScalarsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var batches []*data.Batch
	for range 12 {
		batches = append(batches, randomBatch(rng, 4, 16, 1000))
	}
	lr := func(g int) float64 { return 3e-3 * (1 - float64(g)/15) }
	poisoned := map[int]bool{3: true, 4: true, 9: true}

	syncS := windowStepper(t, openGoDevices(t, xla.GoBackendGotpu, 2), 2, 0, 0)
	var want []Result
	for g, b := range batches {
		if poisoned[g+1] {
			syncS.PoisonNextStep()
		}
		res, err := syncS.Step(context.Background(), [][]*data.Batch{split(b, 2)}, lr(g))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res)
	}

	rt := openGoDevices(t, xla.GoBackendGotpu, 2)
	async := windowStepper(t, rt, 2, 5, 0)
	ctx := context.Background()
	if err := async.Begin(0, lr); err != nil {
		t.Fatal(err)
	}
	reads0 := rt.Stats().BlockingReads
	var got []Result
	for g, b := range batches {
		db, err := async.TransferBatch(split(b, 2))
		if err != nil {
			t.Fatal(err)
		}
		if poisoned[g+1] {
			async.PoisonNextStep()
		}
		if _, err := async.Dispatch(ctx, []*DeviceBatch{db}); err != nil {
			t.Fatal(err)
		}
		got = append(got, async.TakeCollected()...)
	}
	rest, err := async.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, rest...)
	if reads := rt.Stats().BlockingReads - reads0; reads != 3 {
		t.Errorf("%d blocking reads for 12 steps in windows of 5, want 3 (2 forced, 1 Collect)", reads)
	}
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		sameNorm := g.GradNorm == w.GradNorm || math.IsNaN(g.GradNorm) && math.IsNaN(w.GradNorm)
		if g.GlobalStep != i+1 || g.LossSum != w.LossSum || g.Count != w.Count || !sameNorm || g.Skipped != w.Skipped {
			t.Errorf("step %d: async %+v, sync %+v", i+1, g, w)
		}
	}
	if async.OptimizerStep() != 9 || syncS.OptimizerStep() != 9 {
		t.Errorf("optimizer steps %d (async) and %d (sync), want 9", async.OptimizerStep(), syncS.OptimizerStep())
	}
	a, err := async.ExportState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, err := syncS.ExportState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, a, b)
}

// TestConsecutiveLimitOnDevice: with max_consecutive_nonfinite 2, the device applies nothing once
// two consecutive updates were skipped, though later gradients are finite: the state read after
// 6 steps is the state after step 2, where the limit was reached at step 4.
func TestConsecutiveLimitOnDevice(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	ctx := context.Background()
	rt := openGoDevices(t, xla.GoBackendGotpu, 1)
	s := windowStepper(t, rt, 1, 8, 2)
	if err := s.Begin(0, func(int) float64 { return 1e-3 }); err != nil {
		t.Fatal(err)
	}
	var at2 State
	for g := range 6 {
		db, err := s.TransferBatch([]*data.Batch{randomBatch(rng, 2, 16, 1000)})
		if err != nil {
			t.Fatal(err)
		}
		if g == 2 || g == 3 {
			s.PoisonNextStep()
		}
		if _, err := s.Dispatch(ctx, []*DeviceBatch{db}); err != nil {
			t.Fatal(err)
		}
		if g == 1 {
			if at2, err = s.ExportState(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	res, err := s.Collect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var skipped []bool
	for _, r := range res {
		skipped = append(skipped, r.Skipped)
	}
	t.Logf("steps 1..6 skipped: %v", skipped)
	if len(res) != 6 {
		t.Fatalf("%d results, want 6 (the export's read keeps steps 1 and 2 for Collect)", len(res))
	}
	for i, r := range res {
		if r.Skipped != (i >= 2) {
			t.Errorf("step %d: skipped %v", i+1, r.Skipped)
		}
	}
	end, err := s.ExportState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, end, at2)
}

// TestDispatchTransfersNothing: Dispatch refuses a batch that is not on its devices, makes no
// host→device transfer itself, and returns before a slow execution (300 ms on purpose) has
// finished.
func TestDispatchTransfersNothing(t *testing.T) {
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go", NumDevices: 2, ExecutionDelay: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	s := windowStepper(t, rt, 2, 4, 0)
	ctx := context.Background()
	if err := s.Begin(0, func(int) float64 { return 1e-3 }); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	b := randomBatch(rng, 4, 16, 1000)
	host := &DeviceBatch{}
	for _, sh := range split(b, 2) {
		in, err := s.batchInputs(sh)
		if err != nil {
			t.Fatal(err)
		}
		host.inputs = append(host.inputs, in)
	}
	if _, err := s.Dispatch(ctx, []*DeviceBatch{host}); err == nil || !strings.Contains(err.Error(), "not on device") {
		t.Fatalf("a host batch was dispatched: %v", err)
	}
	var dbs []*DeviceBatch
	for range 3 {
		db, err := s.TransferBatch(split(b, 2))
		if err != nil {
			t.Fatal(err)
		}
		dbs = append(dbs, db)
	}
	before := rt.Stats()
	start := time.Now()
	var ps []*Pending
	for _, db := range dbs {
		p, err := s.Dispatch(ctx, []*DeviceBatch{db})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	took := time.Since(start)
	select {
	case <-ps[0].Done():
		t.Errorf("the first step finished before Dispatch returned (%s)", took)
	default:
	}
	if d := rt.Stats().Transfers - before.Transfers; d != 0 {
		t.Errorf("Dispatch made %d host→device transfers", d)
	}
	if _, err := s.Collect(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("3 dispatches returned in %s; the 3 steps ran %s later", took, time.Since(start)-took)
}
