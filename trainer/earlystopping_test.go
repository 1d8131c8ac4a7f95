package trainer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"testing"
)

func esArgs(metric string, greater bool) *TrainingArguments {
	a := DefaultTrainingArguments()
	a.EvalStrategy, a.SaveStrategy = "steps", "steps"
	a.LoadBestModelAtEnd = true
	a.MetricForBestModel = metric
	a.GreaterIsBetter = &greater
	return &a
}

// runEvaluations plays HF's Trainer for a sequence of evaluations: evaluate() calls
// on_evaluate, then _maybe_log_save_evaluate calls _determine_best_metric. It returns the
// patience counter after each evaluation and the 1-based evaluation that stopped training (0:
// none).
func runEvaluations(t *testing.T, es *EarlyStopping, a *TrainingArguments, key string, values []float64, bestFirst bool) ([]int, int) {
	t.Helper()
	st := NewTrainerState()
	cbs := Callbacks{es}
	ctl := &TrainerControl{}
	if err := cbs.OnTrainBegin(context.Background(), &Event{Args: a, State: &st, Control: ctl}); err != nil {
		t.Fatal(err)
	}
	var counters []int
	for i, v := range values {
		st.GlobalStep = (i + 1) * 10
		metrics := map[string]float64{key: v, "eval_runtime": 1}
		if bestFirst {
			if _, err := DetermineBestMetric(a, &st, metrics); err != nil {
				t.Fatal(err)
			}
		}
		if err := cbs.OnEvaluate(context.Background(), &Event{Args: a, State: &st, Control: ctl, Metrics: metrics}); err != nil {
			t.Fatal(err)
		}
		if !bestFirst {
			if _, err := DetermineBestMetric(a, &st, metrics); err != nil {
				t.Fatal(err)
			}
		}
		counters = append(counters, es.PatienceCounter)
		if ctl.ShouldTrainingStop {
			return counters, i + 1
		}
	}
	return counters, 0
}

func TestEarlyStoppingSequences(t *testing.T) {
	nan := math.NaN()
	for _, c := range []struct {
		name      string
		metric    string // metric_for_best_model
		greater   bool
		patience  int
		threshold float64
		values    []float64
		counters  []int
		stopAt    int
	}{
		{"improving loss never stops", "loss", false, 1, 0, []float64{3, 2.5, 2, 1.9, 1.8}, []int{0, 0, 0, 0, 0}, 0},
		{"plateau after patience 2", "loss", false, 2, 0, []float64{1.0, 0.9, 0.95, 0.96}, []int{0, 0, 1, 2}, 4},
		{"equal is no improvement", "eval_loss", false, 1, 0, []float64{1.0, 1.0}, []int{0, 1}, 2},
		{"worse then better resets", "loss", false, 2, 0, []float64{1.0, 1.1, 0.8, 0.9, 0.85}, []int{0, 1, 0, 1, 2}, 5},
		// 0.97 beats 1.0 by 0.03 < threshold: counted as no improvement, yet it becomes the best
		// (the Trainer's best metric has no threshold); 0.93 is then within 0.05 of 0.97.
		{"threshold", "loss", false, 3, 0.05, []float64{1.0, 0.97, 0.93, 0.80}, []int{0, 1, 2, 0}, 0},
		{"accuracy, greater is better", "accuracy", true, 2, 0, []float64{0.5, 0.6, 0.55, 0.58}, []int{0, 0, 1, 2}, 4},
		{"accuracy with threshold", "eval_accuracy", true, 1, 0.01, []float64{0.5, 0.505}, []int{0, 1}, 2},
		{"NaN never improves", "loss", false, 1, 0, []float64{1.0, nan}, []int{0, 1}, 2},
		// HF quirk: the first evaluation always counts as an improvement (best is None), and a NaN
		// first leaves best at +inf, which any number then beats.
		{"NaN first", "loss", false, 1, 0, []float64{nan, 5, 6}, []int{0, 0, 1}, 3},
		{"patience 0 stops at once", "loss", false, 0, 0, []float64{1.0}, []int{0}, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := esArgs(c.metric, c.greater)
			key := "eval_" + strings.TrimPrefix(c.metric, "eval_")
			counters, stop := runEvaluations(t, NewEarlyStopping(c.patience, c.threshold), a, key, c.values, false)
			if stop != c.stopAt || !equalInts(counters, c.counters) {
				t.Errorf("counters %v, stop at %d; want %v, stop at %d", counters, stop, c.counters, c.stopAt)
			}
		})
	}
}

// TestEarlyStoppingNeedsOnEvaluateFirst shows why the order matters: were the best metric
// recorded before OnEvaluate, a steadily improving run would stop after patience evaluations.
func TestEarlyStoppingNeedsOnEvaluateFirst(t *testing.T) {
	a := esArgs("loss", false)
	values := []float64{3, 2, 1, 0.5}
	if _, stop := runEvaluations(t, NewEarlyStopping(2, 0), a, "eval_loss", values, false); stop != 0 {
		t.Fatalf("HF order stopped an improving run at evaluation %d", stop)
	}
	if _, stop := runEvaluations(t, NewEarlyStopping(2, 0), a, "eval_loss", values, true); stop != 2 {
		t.Fatalf("best-first order: stop at %d, want 2 (every evaluation equals the best)", stop)
	}
}

func TestEarlyStoppingMissingMetric(t *testing.T) {
	var logs bytes.Buffer
	es := NewEarlyStopping(1, 0)
	es.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	es.PatienceCounter = 5
	a := esArgs("accuracy", true)
	st := NewTrainerState()
	ctl := &TrainerControl{}
	err := es.OnEvaluate(context.Background(), &Event{Args: a, State: &st, Control: ctl, Metrics: map[string]float64{"eval_loss": 1}})
	if err != nil || ctl.ShouldTrainingStop || es.PatienceCounter != 5 {
		t.Errorf("missing metric: err %v, stop %v, counter %d", err, ctl.ShouldTrainingStop, es.PatienceCounter)
	}
	if !strings.Contains(logs.String(), "did not find eval_accuracy so early stopping is disabled") {
		t.Errorf("warning %q", logs.String())
	}
}

func TestEarlyStoppingOnTrainBegin(t *testing.T) {
	var logs bytes.Buffer
	es := NewEarlyStopping(1, 0)
	es.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	st := NewTrainerState()
	ev := func(a *TrainingArguments) *Event { return &Event{Args: a, State: &st, Control: &TrainerControl{}} }

	a := esArgs("", false)
	if err := es.OnTrainBegin(context.Background(), ev(a)); !errors.Is(err, ErrEarlyStopping) || !strings.Contains(err.Error(), "metric_for_best_model") {
		t.Errorf("no metric: %v", err)
	}
	a = esArgs("loss", false)
	a.EvalStrategy = "no"
	if err := es.OnTrainBegin(context.Background(), ev(a)); !errors.Is(err, ErrEarlyStopping) || !strings.Contains(err.Error(), "eval_strategy") {
		t.Errorf("eval_strategy no: %v", err)
	}
	a = esArgs("loss", false)
	if err := es.OnTrainBegin(context.Background(), ev(a)); err != nil || logs.Len() != 0 {
		t.Errorf("valid arguments: %v, log %q", err, logs.String())
	}
	a.LoadBestModelAtEnd = false
	if err := es.OnTrainBegin(context.Background(), ev(a)); err != nil || !strings.Contains(logs.String(), "without load_best_model_at_end=True") {
		t.Errorf("load_best_model_at_end false: %v, log %q", err, logs.String())
	}
}

// The state goes through trainer_state.json as HF writes it.
func TestEarlyStoppingStateRoundTrip(t *testing.T) {
	es := NewEarlyStopping(4, 0.125)
	es.PatienceCounter = 3
	st := NewTrainerState()
	es.SaveState(&st)
	raw := st.MarshalHF()
	for _, want := range []string{`"early_stopping_patience": 4`, `"early_stopping_threshold": 0.125`, `"early_stopping_patience_counter": 3`} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("trainer_state.json lacks %s:\n%s", want, raw)
		}
	}
	back, err := ParseTrainerState(raw, "trainer_state.json")
	if err != nil {
		t.Fatal(err)
	}
	restored := NewEarlyStopping(1, 0)
	if !restored.LoadState(back) || restored.State() != es.State() {
		t.Errorf("restored %+v, want %+v", restored.State(), es.State())
	}
	empty := NewTrainerState()
	if restored.LoadState(&empty) {
		t.Error("LoadState from a state without EarlyStoppingCallback reported true")
	}
}

func TestDetermineBestMetric(t *testing.T) {
	a := esArgs("loss", false)
	st := NewTrainerState()
	st.GlobalStep = 10
	if better, err := DetermineBestMetric(a, &st, map[string]float64{"eval_loss": 2}); !better || err != nil || *st.BestMetric != 2 || *st.BestGlobalStep != 10 {
		t.Fatalf("first: %v %v %v", better, err, st.BestMetric)
	}
	st.GlobalStep = 20
	if better, _ := DetermineBestMetric(a, &st, map[string]float64{"eval_loss": 2}); better || *st.BestGlobalStep != 10 {
		t.Errorf("equal value counted as better")
	}
	a.SaveStrategy = "best"
	if better, _ := DetermineBestMetric(a, &st, map[string]float64{"eval_loss": 1}); !better || *st.BestMetric != 1 || *st.BestGlobalStep != 10 {
		t.Errorf("save_strategy best must not record best_global_step: %v", *st.BestGlobalStep)
	}
	_, err := DetermineBestMetric(a, &st, map[string]float64{"eval_runtime": 1, "eval_acc": 2})
	if err == nil || !strings.Contains(err.Error(), `"eval_loss" is not among the evaluation metrics [eval_acc eval_runtime]`) {
		t.Errorf("missing metric: %v", err)
	}
	a.MetricForBestModel = ""
	if better, err := DetermineBestMetric(a, &st, nil); better || err != nil {
		t.Errorf("no metric_for_best_model: %v %v", better, err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
