package trainer_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gotpu/gotpu/trainer"
)

// TestInterruptWhenEvaluationIsDue: an interruption at a step whose evaluation is due still
// saves the checkpoint of that step (the evaluation is skipped), so the run can be resumed.
func TestInterruptWhenEvaluationIsDue(t *testing.T) {
	rt := openRT(t, 1)
	a := baseArgs(t)
	a.MaxSteps, a.EvalStrategy, a.SaveStrategy, a.SaveSteps = 8, "steps", "steps", 100
	two := 2.0
	a.EvalSteps = &two
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(32, 0), counting(8, 1),
		trainer.Options{Runtime: rt, Logger: quiet(), Callbacks: []trainer.Callback{&stopAfter{step: 4, cancel: cancel}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(ctx); err == nil || tr.State().GlobalStep != 4 {
		t.Fatalf("Train: %v at step %d; want the cancellation at step 4", err, tr.State().GlobalStep)
	}
	if _, err := os.Stat(filepath.Join(a.OutputDir, "checkpoint-4", "trainer_state.json")); err != nil {
		t.Fatalf("no checkpoint at the interrupted step: %v", err)
	}
	evals := 0
	for _, e := range tr.State().LogHistory {
		if _, ok := e.EvalLoss(); ok {
			evals++
		}
	}
	if evals != 1 { // step 2's; step 4's was skipped
		t.Errorf("%d evaluations logged, want 1", evals)
	}
	a.ResumeFromCheckpoint = "true"
	tr2, err := trainer.New(a, tinyGPT2(t, rt), counting(32, 0), counting(8, 1), trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tr2.Train(context.Background()); err != nil || out.GlobalStep != 8 {
		t.Fatalf("resumed Train: %+v, %v", out, err)
	}
}
