package trainer_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/trainer"
)

// TestEvalOnStart: eval_on_start evaluates once before the first update — the log history's
// first entry is an eval_loss at step 0 equal to evaluating the untrained model — without
// competing for best_metric; without it no step-0 evaluation is logged; with no evaluation
// data it is an error naming the argument.
func TestEvalOnStart(t *testing.T) {
	rt := openRT(t, 1)
	ctx := context.Background()
	m := tinyGPT2(t, rt)
	a := baseArgs(t)
	a.MaxSteps, a.SaveStrategy = 3, "no"
	ref, err := trainer.New(a, m, nil, noise(8), trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.Evaluate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	firstEval := func(onStart bool) (float64, int, bool) {
		a := baseArgs(t)
		a.MaxSteps, a.SaveStrategy, a.EvalOnStart = 3, "no", onStart
		a.MetricForBestModel = "loss"
		tr, err := trainer.New(a, tinyGPT2(t, rt), counting(32, 0), noise(8), trainer.Options{Runtime: rt, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Train(ctx); err != nil {
			t.Fatal(err)
		}
		st := tr.State()
		if st.BestMetric != nil {
			t.Errorf("eval_on_start=%v: best_metric %v set by an evaluation outside the loop", onStart, *st.BestMetric)
		}
		for _, e := range st.LogHistory {
			if l, ok := e.EvalLoss(); ok {
				step, _ := e.Step()
				return l, step, true
			}
		}
		return 0, 0, false
	}
	got, step, ok := firstEval(true)
	if !ok || step != 0 {
		t.Fatalf("eval_on_start: first evaluation logged %v at step %d, want one at step 0", ok, step)
	}
	if math.Abs(got-want["eval_loss"]) > 1e-6 {
		t.Fatalf("eval_on_start logged eval_loss %.7f, the untrained model evaluates to %.7f", got, want["eval_loss"])
	}
	if _, _, ok := firstEval(false); ok {
		t.Fatal("without eval_on_start (and eval_strategy no) an evaluation was logged")
	}

	a.EvalOnStart = true
	tr, err := trainer.New(a, m, counting(8, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(ctx); err == nil || !strings.Contains(err.Error(), "eval_on_start") {
		t.Fatalf("eval_on_start without evaluation data: %v, want an error naming eval_on_start", err)
	}
}
