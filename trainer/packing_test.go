package trainer_test

import (
	"context"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/trainer"
)

// packedDataset is n random examples of 3..17 tokens packed by data.PackBFD into rows of 32.
func packedDataset(t *testing.T, n int, seed uint64) data.SliceDataset {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 21))
	exs := make([]data.Example, n)
	for i := range exs {
		ids := make([]int32, 3+rng.IntN(15))
		for j := range ids {
			ids[j] = int32(1 + rng.IntN(511))
		}
		exs[i].InputIDs = ids
	}
	rows, err := data.PackBFD(exs, 32)
	if err != nil {
		t.Fatal(err)
	}
	return data.SliceDataset(rows)
}

// TestPackedTrainingThroughTrainer: 20 steps of the Llama fixture on packed rows through the
// Trainer (the pipelined loader, which puts each batch with its position ids on the devices ahead
// of the step; 2 replicas) compile exactly one training program; losses are finite and fall, and
// the evaluations of packed rows at steps 10 and 20 give finite losses.
func TestPackedTrainingThroughTrainer(t *testing.T) {
	rt := openRT(t, 2)
	m, err := models.Load(context.Background(), rt, filepath.Join("..", "testdata", "models", "llama-tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := baseArgs(t)
	a.PerDeviceTrainBatchSize, a.PerDeviceEvalBatchSize = 2, 2
	a.MaxSteps, a.LoggingSteps, a.SaveStrategy = 20, 5, "no"
	a.EvalStrategy = "steps"
	ten := 10.0
	a.EvalSteps = &ten
	train, eval := packedDataset(t, 80, 1), packedDataset(t, 16, 2)
	tr, err := trainer.New(a, m, train, eval, trainer.Options{Runtime: rt, Logger: quiet(),
		Collator: data.CausalLMCollator{BlockSize: 32}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	var compiles int64
	var losses, evals []float64
	for _, e := range tr.State().LogHistory {
		if l, ok := e.EvalLoss(); ok && !math.IsNaN(l) && !math.IsInf(l, 0) {
			evals = append(evals, l)
		}
		if n, ok := e.Int("compile_count"); ok {
			compiles += n
		}
		if l, ok := e.Loss(); ok {
			if math.IsNaN(l) || math.IsInf(l, 0) {
				t.Fatalf("loss %v in %v", l, e)
			}
			losses = append(losses, l)
		}
	}
	t.Logf("%d packed rows, 20 steps: %d programs compiled (training entries), logged losses %.4f, eval losses %.4f", len(train), compiles, losses, evals)
	if compiles != 1 {
		t.Errorf("20 packed steps compiled %d programs, want 1", compiles)
	}
	if len(losses) != 4 || losses[3] >= losses[0] {
		t.Errorf("logged losses %v: want 4, falling", losses)
	}
	if len(evals) != 2 {
		t.Errorf("finite eval losses %v, want 2", evals)
	}
}
