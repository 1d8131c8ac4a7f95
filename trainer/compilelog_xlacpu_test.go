//go:build !noxla

package trainer_test

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"testing"

	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla/pjrttest"
)

// TestCompilationCacheInTrainingLogOnXLACPU: two trainers, each on its own runtime opened on XLA's
// CPU plugin (2 devices) after the previous one closed, with the same compilation cache
// directory, train the same tiny GPT-2 for 3 steps with one evaluation. The first run's log says
// the training step and the evaluation programs were compiled (source=xla, cache misses), the
// second's that they came from the cache (source=cache, programs_compiled=0, cache hits); the
// closing "compilation" line sums each run; and the two runs' log_history losses are bitwise
// the same.
func TestCompilationCacheInTrainingLogOnXLACPU(t *testing.T) {
	dir := t.TempDir()
	type run struct {
		recs      []map[string]any
		history   []trainer.LogEntry
		trainLoss float64 // TrainOutput's, not rounded as log_history's loss is
	}
	train := func() run {
		rt := pjrttest.OpenCPUPluginWithCache(t, 2, dir)
		defer rt.Close()
		if _, ok := rt.CompileStats(); !ok {
			t.Fatal("the CPU plugin's runtime has no compile counters: the compile hook was not installed (see the warning at Open)")
		}
		a := baseArgs(t)
		a.MaxSteps, a.LoggingSteps, a.PerDeviceTrainBatchSize, a.PerDeviceEvalBatchSize = 3, 1, 2, 2
		a.SaveStrategy = "no"
		evalSteps := 2.0
		a.EvalStrategy, a.EvalSteps = "steps", &evalSteps
		var logs bytes.Buffer
		tr, err := trainer.New(a, tinyGPT2(t, rt), counting(16, 0), noise(4), trainer.Options{Runtime: rt,
			Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		out, err := tr.Train(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return run{recs: logRecords(t, logs.Bytes()), history: tr.State().LogHistory, trainLoss: out.TrainingLoss}
	}
	first, second := train(), train()

	for i, r := range []run{first, second} {
		for _, prefix := range []string{"compiled the training step in ", "compiled the evaluation step in ", "compilation"} {
			rec := findRecord(t, r.recs, prefix)
			t.Logf("run %d: %s: source=%v programs_compiled=%v xla_compile_seconds=%v cache_hits=%v cache_load_seconds=%v cache_misses=%v cache_writes=%v",
				i+1, rec["msg"], rec["source"], rec["programs_compiled"], rec["xla_compile_seconds"], rec["cache_hits"],
				rec["cache_load_seconds"], rec["cache_misses"], rec["cache_writes"])
			if rec["compilation_cache"] != dir {
				t.Errorf("run %d: %q: compilation_cache=%v, want %s", i+1, rec["msg"], rec["compilation_cache"], dir)
			}
			if i == 0 {
				if num(rec, "programs_compiled") < 1 || num(rec, "cache_misses") < 1 || num(rec, "cache_hits") != 0 {
					t.Errorf("first run, %q: %v; want programs compiled, cache misses, no hits", rec["msg"], rec)
				}
				if prefix != "compilation" && rec["source"] != "xla" {
					t.Errorf("first run, %q: source=%v, want xla", rec["msg"], rec["source"])
				}
			} else {
				if num(rec, "programs_compiled") != 0 || num(rec, "cache_hits") < 1 || num(rec, "cache_misses") != 0 {
					t.Errorf("second run, %q: %v; want no programs compiled, cache hits, no misses", rec["msg"], rec)
				}
				if prefix != "compilation" && rec["source"] != "cache" {
					t.Errorf("second run, %q: source=%v, want cache", rec["msg"], rec["source"])
				}
			}
		}
		sum := findRecord(t, r.recs, "compilation")
		if w := num(sum, "cache_writes"); (i == 0) != (w >= 1) || num(sum, "cache_errors") != 0 {
			t.Errorf("run %d: summary %v: want cache writes in the first run only, no errors", i+1, sum)
		}
	}

	// Losses: every log_history entry's loss and eval_loss, and the run's train_loss, bitwise.
	losses := func(r run) []float64 {
		out := []float64{r.trainLoss}
		for _, e := range r.history {
			for _, k := range []string{"loss", "eval_loss"} {
				if f, ok := e.Float(k); ok {
					out = append(out, f)
				}
			}
		}
		return out
	}
	l1, l2 := losses(first), losses(second)
	t.Logf("train_loss, then log_history's losses: first run %v, second %v", l1, l2)
	if len(l1) != 5 || len(l1) != len(l2) { // train_loss, 3 training entries, 1 evaluation
		t.Fatalf("losses: first run %v, second %v; want 5 each", l1, l2)
	}
	for i := range l1 {
		if math.Float64bits(l1[i]) != math.Float64bits(l2[i]) {
			t.Errorf("loss %d: %v from the compiled program, %v from the cached one", i, l1[i], l2[i])
		}
	}
}
