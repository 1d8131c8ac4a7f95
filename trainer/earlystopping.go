package trainer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
)

// ErrEarlyStopping is wrapped by EarlyStopping's configuration errors (HF's assertions).
var ErrEarlyStopping = errors.New("early stopping misconfigured")

// EarlyStopping is Hugging Face's EarlyStoppingCallback(early_stopping_patience,
// early_stopping_threshold): it stops training when metric_for_best_model has not improved on
// the best value so far, by more than Threshold, for Patience evaluations in a row.
//
// # What it expects of the Trainer
//
// On each evaluation it compares e.Metrics[metric] with e.State.BestMetric, so the Trainer must
// call OnEvaluate BEFORE it records this evaluation as the new best (as HF does:
// Trainer.evaluate runs on_evaluate, then _maybe_log_save_evaluate calls
// _determine_best_metric — see DetermineBestMetric). BestMetric is then the best of the
// previous evaluations, and an evaluation improves if
//
//	best_metric is None or (metric OP best_metric and |metric − best_metric| > threshold)
//
// with OP ">" when greater_is_better and "<" otherwise (numpy's greater/less: a NaN never
// improves). An improvement resets PatienceCounter; anything else increments it; when it
// reaches Patience, Control.ShouldTrainingStop is set. The metric is metric_for_best_model,
// prefixed "eval_" unless it already is; if the evaluation lacks it, the callback logs a warning
// and does nothing (HF: "early stopping is disabled").
//
// If the Trainer updated BestMetric before OnEvaluate, every new best would compare equal to
// itself and count as no improvement: training would stop after Patience evaluations
// regardless of progress.
//
// OnTrainBegin checks HF's requirements: metric_for_best_model set and eval_strategy not "no"
// (errors wrapping ErrEarlyStopping). load_best_model_at_end false only draws HF's warning
// (transformers 4.5x and 5.x; older versions asserted it), since the Trainer tracks the best
// metric whenever metric_for_best_model is set.
//
// Its state (patience, threshold and early_stopping_patience_counter) is saved in
// trainer_state.json's stateful_callbacks.EarlyStoppingCallback (SaveState) and restored from
// it on resume (LoadState), as HF's ExportableState does. Not safe for concurrent use.
type EarlyStopping struct {
	BaseCallback
	Patience        int     // early_stopping_patience (HF default 1)
	Threshold       float64 // early_stopping_threshold (HF default 0.0)
	PatienceCounter int     // early_stopping_patience_counter: evaluations without improvement
	// Logger receives HF's warnings; nil means slog.Default().
	Logger *slog.Logger
}

// NewEarlyStopping returns HF's EarlyStoppingCallback(patience, threshold).
func NewEarlyStopping(patience int, threshold float64) *EarlyStopping {
	return &EarlyStopping{Patience: patience, Threshold: threshold}
}

func (c *EarlyStopping) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// OnTrainBegin checks the arguments as HF's on_train_begin does.
func (c *EarlyStopping) OnTrainBegin(_ context.Context, e *Event) error {
	a := e.Args
	if !a.LoadBestModelAtEnd {
		c.logger().Warn("Using EarlyStoppingCallback without load_best_model_at_end=True. " +
			"Once training is finished, the best model will not be loaded automatically.")
	}
	if a.MetricForBestModel == "" {
		return fmt.Errorf("trainer.TrainingArguments.metric_for_best_model: %w: EarlyStoppingCallback requires metric_for_best_model to be defined", ErrEarlyStopping)
	}
	if a.EvalStrategy == "no" || a.EvalStrategy == "" {
		return fmt.Errorf("trainer.TrainingArguments.eval_strategy: %w: EarlyStoppingCallback requires IntervalStrategy of steps or epoch", ErrEarlyStopping)
	}
	return nil
}

// OnEvaluate counts an evaluation without improvement and stops training after Patience of
// them in a row. See EarlyStopping for the order it expects.
func (c *EarlyStopping) OnEvaluate(_ context.Context, e *Event) error {
	key := bestMetricKey(e.Args)
	value, ok := e.Metrics[key]
	if !ok {
		c.logger().Warn(fmt.Sprintf("early stopping required metric_for_best_model, but did not find %s so early stopping is disabled", key))
		return nil
	}
	if improves(value, e.State.BestMetric, greaterIsBetter(e.Args), c.Threshold) {
		c.PatienceCounter = 0
	} else {
		c.PatienceCounter++
	}
	if c.PatienceCounter >= c.Patience {
		control(e).ShouldTrainingStop = true
	}
	return nil
}

// improves is HF's check_metric_value condition.
func improves(value float64, best *float64, greater bool, threshold float64) bool {
	if best == nil {
		return true
	}
	better := value < *best
	if greater {
		better = value > *best
	}
	return better && math.Abs(value-*best) > threshold
}

// State returns what HF's EarlyStoppingCallback.state() saves.
func (c *EarlyStopping) State() EarlyStoppingCallbackState {
	return EarlyStoppingCallbackState{Patience: c.Patience, Threshold: c.Threshold, PatienceCounter: c.PatienceCounter}
}

// Restore sets the callback from saved state. Like HF's _load_callback_state, which rebuilds
// the callback from the saved args, the saved patience and threshold replace the current ones.
func (c *EarlyStopping) Restore(s EarlyStoppingCallbackState) {
	c.Patience, c.Threshold, c.PatienceCounter = s.Patience, s.Threshold, s.PatienceCounter
}

// SaveState stores the callback's state in st.EarlyStopping (written to
// stateful_callbacks.EarlyStoppingCallback).
func (c *EarlyStopping) SaveState(st *TrainerState) {
	s := c.State()
	st.EarlyStopping = &s
}

// LoadState restores the callback from st.EarlyStopping; false if st has none.
func (c *EarlyStopping) LoadState(st *TrainerState) bool {
	if st.EarlyStopping == nil {
		return false
	}
	c.Restore(*st.EarlyStopping)
	return true
}

// bestMetricKey is metric_for_best_model with HF's "eval_" prefix.
func bestMetricKey(a *TrainingArguments) string {
	if strings.HasPrefix(a.MetricForBestModel, "eval_") {
		return a.MetricForBestModel
	}
	return "eval_" + a.MetricForBestModel
}

// greaterIsBetter is args.greater_is_better, None counting as false as in HF's "np.greater if
// args.greater_is_better else np.less" (Finalize sets it whenever metric_for_best_model is set).
func greaterIsBetter(a *TrainingArguments) bool {
	return a.GreaterIsBetter != nil && *a.GreaterIsBetter
}

// DetermineBestMetric is HF's Trainer._determine_best_metric (transformers 4.5x/5.x), which the
// Trainer runs after each evaluation, after OnEvaluate: if metric_for_best_model is set and the
// evaluation beats state.best_metric (strictly, in the greater_is_better direction; no
// threshold), it records the value as BestMetric and, with save_strategy "steps" or "epoch",
// the step as BestGlobalStep, and reports true. The best_model_checkpoint path is the saver's
// business (HF sets it when it writes that step's checkpoint). A missing metric is an error, as
// HF raises KeyError.
func DetermineBestMetric(a *TrainingArguments, st *TrainerState, metrics map[string]float64) (bool, error) {
	if a.MetricForBestModel == "" {
		return false, nil
	}
	key := bestMetricKey(a)
	value, ok := metrics[key]
	if !ok {
		keys := make([]string, 0, len(metrics))
		for k := range metrics {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return false, fmt.Errorf("trainer.TrainingArguments.metric_for_best_model: %q is not among the evaluation metrics %v; "+
			"make compute_metrics return it or change metric_for_best_model", key, keys)
	}
	greater := greaterIsBetter(a)
	if st.BestMetric == nil {
		best := math.Inf(1)
		if greater {
			best = math.Inf(-1)
		}
		st.BestMetric = &best
	}
	better := value < *st.BestMetric
	if greater {
		better = value > *st.BestMetric
	}
	if !better {
		return false, nil
	}
	st.BestMetric = &value
	if a.SaveStrategy == "steps" || a.SaveStrategy == "epoch" {
		step := st.GlobalStep
		st.BestGlobalStep = &step
	}
	return true, nil
}
