package trainer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/trainer/step"
	"github.com/gotpu/gotpu/xla"
)

// Evaluate runs the evaluation set and returns HF's metrics (eval_loss, what
// Options.ComputeMetrics returns, eval_-prefixed, eval_runtime, eval_samples_per_second,
// eval_steps_per_second), logging them as HF does.
func (t *Trainer) Evaluate(ctx context.Context) (metrics map[string]float64, err error) {
	defer xla.Recover(&err, "trainer.Evaluate")
	control := TrainerControl{}
	return t.evaluate(ctx, &Event{Args: &t.args, State: &t.state, Control: &control}, false)
}

// evaluate runs the evaluation set. Only evaluations during training (inTraining) compete for
// best_metric, as in HF, where _determine_best_metric runs in _maybe_log_save_evaluate and not
// in evaluate(): a manual evaluation before or after training must not mark a checkpoint best.
func (t *Trainer) evaluate(ctx context.Context, ev *Event, inTraining bool) (map[string]float64, error) {
	if t.eval == nil || t.eval.Len() == 0 {
		return nil, errors.New("trainer: no evaluation data")
	}
	start := time.Now()
	t.compiles.ensure(t.rt)
	programs, compileSecs := t.stepper.Compilations()
	size := t.args.PerDeviceEvalBatchSize * t.replicas
	var weighted, examples float64
	steps := 0
	var preds predictionCollector
	// Without compute_metrics the batches are dispatched as they come and their loss sums read
	// once at the end: one blocking read per evaluation. compute_metrics needs every batch's
	// logits on the host, so then each batch is read as it finishes (one read per batch), which
	// keeps at most one batch of logits in host memory.
	var pend []*step.EvalPending
	var sizes []int
	add := func(r step.EvalResult, size int) {
		if r.Terms > 0 {
			// HF's evaluation_loop repeats each batch's mean loss per example and averages.
			weighted += r.LossSum / r.Terms * float64(size)
			examples += float64(size)
		}
	}
	err := t.forEachEvalBatch(ctx, t.eval, func(b *data.Batch, _ int) error {
		p, err := t.stepper.DispatchEval(ctx, b)
		if err != nil {
			return err
		}
		steps++
		// The evaluation bar (HF's prediction_bar) counts dispatched batches: without
		// compute_metrics their results are read once at the end.
		ev.PredictionSteps = (t.eval.Len() + size - 1) / size
		if err := t.callbacks.OnPredictionStep(ctx, ev); err != nil {
			return err
		}
		if t.metricsFn == nil {
			pend, sizes = append(pend, p), append(sizes, b.Size)
			return nil
		}
		res, err := t.stepper.ReadEval(ctx, []*step.EvalPending{p}, true)
		if err != nil {
			return err
		}
		flat, dims, err := res[0].Logits.Float32s()
		if err != nil {
			return err
		}
		if err := preds.add(flat, dims, b); err != nil {
			return err
		}
		add(res[0], b.Size)
		return nil
	})
	if err == nil && len(pend) > 0 {
		var res []step.EvalResult
		if res, err = t.stepper.ReadEval(ctx, pend, false); err == nil {
			for i, r := range res {
				add(r, sizes[i])
			}
		}
	}
	if err != nil {
		return nil, err
	}
	t.logEvalCompiles("evaluation", programs, compileSecs) // compilelog.go
	extra, extraKeys, err := preds.metrics(t.metricsFn, "eval")
	if err != nil {
		return nil, err
	}
	runtime := time.Since(start).Seconds()
	metrics := map[string]float64{
		"eval_loss":               weighted / examples,
		"eval_runtime":            PyRound(runtime, 4),
		"eval_samples_per_second": PyRound(float64(t.eval.Len())/runtime, 3),
		"eval_steps_per_second":   PyRound(float64(steps)/runtime, 3),
	}
	// HF's order: the loss, compute_metrics' results, then the speed metrics.
	entry := NewLogEntry(JSONMember{"eval_loss", JSONFloatValue(metrics["eval_loss"])})
	for _, k := range extraKeys {
		metrics[k] = extra[k]
		entry = entry.With(k, JSONFloatValue(extra[k]))
	}
	entry = entry.With("eval_runtime", JSONFloatValue(metrics["eval_runtime"])).
		With("eval_samples_per_second", JSONFloatValue(metrics["eval_samples_per_second"])).
		With("eval_steps_per_second", JSONFloatValue(metrics["eval_steps_per_second"]))
	if err := t.logEntry(ctx, ev, entry); err != nil {
		return nil, err
	}
	ev.Metrics = metrics
	defer func() { ev.Metrics = nil }()
	if err := t.callbacks.OnEvaluate(ctx, ev); err != nil {
		return nil, err
	}
	if !inTraining {
		return metrics, nil
	}
	// HF's _determine_best_metric runs after on_evaluate (so EarlyStopping compares with the best
	// of the previous evaluations).
	isBest, err := DetermineBestMetric(&t.args, &t.state, metrics)
	if err != nil {
		return nil, err
	}
	t.newBest = t.newBest || isBest
	return metrics, nil
}

// forEachEvalBatch collates ds in order, per_device_eval_batch_size × replicas examples at a time
// (the last batch may be smaller: its shape compiles once more), and calls fn on each, on the
// calling goroutine. A producer goroutine reads and collates up to dataloader_prefetch_factor
// (default 2) batches ahead, so batch n+1 is prepared while the device evaluates batch n, as the
// training loader does; it stops when fn fails or panics, ctx ends, or ds is exhausted, and is
// waited for before forEachEvalBatch returns.
func (t *Trainer) forEachEvalBatch(ctx context.Context, ds data.Dataset, fn func(b *data.Batch, first int) error) (err error) {
	size := t.args.PerDeviceEvalBatchSize * t.replicas
	prefetch := 2
	if t.args.DataloaderPrefetchFactor != nil {
		prefetch = *t.args.DataloaderPrefetchFactor
	}
	type item struct {
		b     *data.Batch
		first int
	}
	pctx, stop := context.WithCancel(ctx)
	ready := make(chan item, prefetch)
	var g errgroup.Group
	g.Go(func() error {
		defer close(ready)
		for first := 0; first < ds.Len(); first += size {
			b, err := t.collateEval(ds, first, min(size, ds.Len()-first))
			if err != nil {
				return err
			}
			select {
			case ready <- item{b, first}:
			case <-pctx.Done():
				return nil // the consumer stopped: its error (or panic) is what is reported
			}
		}
		return nil
	})
	defer func() {
		stop()
		if werr := g.Wait(); werr != nil && err == nil {
			err = werr
		}
	}()
	for it := range ready {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(it.b, it.first); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// collateEval reads and collates the n examples of ds from first.
func (t *Trainer) collateEval(ds data.Dataset, first, n int) (*data.Batch, error) {
	examples := make([]data.Example, n)
	for i := range n {
		ex, err := ds.Get(first + i)
		if err != nil {
			return nil, err
		}
		examples[i] = ex
	}
	b, err := t.collator.Collate(examples)
	if err != nil {
		return nil, fmt.Errorf("trainer: evaluation batch at example %d: %w", first, err)
	}
	return b, nil
}

// Predictions are the outputs of Predict: logits of every example in dataset order, row-major
// with shape Dims ([examples, seq, vocab] for a causal LM, [examples, num_labels] for a
// classifier), and the loss metrics (plus Options.ComputeMetrics', "test_"-prefixed) when the
// dataset has labels.
type Predictions struct {
	Logits  []float32
	Dims    []int
	Metrics map[string]float64
}

// Predict runs the model on ds and returns its logits (HF's trainer.predict).
func (t *Trainer) Predict(ctx context.Context, ds data.Dataset) (p *Predictions, err error) {
	defer xla.Recover(&err, "trainer.Predict")
	var preds predictionCollector
	var weighted, examples float64
	t.compiles.ensure(t.rt)
	programs, compileSecs := t.stepper.Compilations()
	err = t.forEachEvalBatch(ctx, ds, func(b *data.Batch, _ int) error {
		lossSum, terms, logits, err := t.stepper.Evaluate(ctx, b)
		if err != nil {
			return err
		}
		flat, dims, err := logits.Float32s()
		if err != nil {
			return err
		}
		if err := preds.add(flat, dims, b); err != nil {
			return err
		}
		if terms > 0 {
			weighted += lossSum / terms * float64(b.Size)
			examples += float64(b.Size)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.logEvalCompiles("prediction", programs, compileSecs) // compilelog.go
	p = &Predictions{Logits: preds.p.Predictions, Dims: preds.p.PredictionDims}
	if examples > 0 {
		p.Metrics = map[string]float64{"test_loss": weighted / examples}
	}
	extra, _, err := preds.metrics(t.metricsFn, "test")
	if err != nil {
		return nil, err
	}
	for k, v := range extra {
		if p.Metrics == nil {
			p.Metrics = map[string]float64{}
		}
		p.Metrics[k] = v
	}
	return p, nil
}
