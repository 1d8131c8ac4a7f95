package trainer

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/data"
)

// EvalPrediction is what a ComputeMetrics function receives (HF's EvalPrediction): the logits
// of every evaluated example, in dataset order, and the labels the collator built for them.
type EvalPrediction struct {
	// Predictions are the logits, row-major with shape PredictionDims: [examples, num_labels]
	// for a sequence classifier, [examples, seq, vocab] for a causal LM.
	Predictions    []float32
	PredictionDims []int
	// LabelIDs are the labels, row-major with shape LabelDims: [examples] for a classifier,
	// [examples, seq] for a causal LM (data.IgnoreIndex where the loss skips a position).
	LabelIDs  []int32
	LabelDims []int
}

// ComputeMetrics is HF's compute_metrics: it turns an evaluation's predictions into named
// metrics. Evaluate prefixes the names with "eval_" (Predict with "test_") unless they already
// carry that prefix, logs them after eval_loss, and passes them to the callbacks, so
// metric_for_best_model and EarlyStopping can use them. As in HF, it is called only when the
// evaluation data has labels.
type ComputeMetrics func(p EvalPrediction) (map[string]float64, error)

// Accuracy is a ComputeMetrics for sequence classification (what HF's examples load with
// evaluate.load("accuracy")): the fraction of examples whose highest logit is the label,
// returned as "accuracy". Examples labelled data.IgnoreIndex are not counted; a tie goes to the
// lower class index (numpy's argmax). Predictions must be [examples, num_labels] with one label
// per example.
func Accuracy(p EvalPrediction) (map[string]float64, error) {
	if len(p.PredictionDims) != 2 || len(p.LabelDims) != 1 || p.PredictionDims[0] != p.LabelDims[0] {
		return nil, fmt.Errorf("trainer.Accuracy: want predictions [examples, num_labels] and labels [examples], got %v and %v",
			p.PredictionDims, p.LabelDims)
	}
	n, classes := p.PredictionDims[0], p.PredictionDims[1]
	if classes < 1 || len(p.Predictions) != n*classes || len(p.LabelIDs) != n {
		return nil, fmt.Errorf("trainer.Accuracy: %d logits and %d labels do not match the shapes %v and %v",
			len(p.Predictions), len(p.LabelIDs), p.PredictionDims, p.LabelDims)
	}
	correct, counted := 0, 0
	for i, label := range p.LabelIDs {
		if label == data.IgnoreIndex {
			continue
		}
		if label < 0 || int(label) >= classes {
			return nil, fmt.Errorf("trainer.Accuracy: example %d: label %d is not a class of %d", i, label, classes)
		}
		counted++
		if argmax(p.Predictions[i*classes:(i+1)*classes]) == int(label) {
			correct++
		}
	}
	if counted == 0 {
		return nil, errors.New("trainer.Accuracy: no labelled examples")
	}
	return map[string]float64{"accuracy": float64(correct) / float64(counted)}, nil
}

// argmax is numpy's: the first index of the largest value, NaN counting as the largest.
func argmax(row []float32) int {
	best := 0
	for j, v := range row {
		if math.IsNaN(float64(row[best])) {
			break
		}
		if v > row[best] || math.IsNaN(float64(v)) {
			best = j
		}
	}
	return best
}

// predictionCollector gathers logits and labels batch by batch for ComputeMetrics and Predict.
type predictionCollector struct {
	p EvalPrediction
	// unlabelled is set once a batch came without labels: compute_metrics is then not called.
	unlabelled bool
}

// add appends one batch: logits with their dims ([B, C] or [B, T, V]) and the batch's labels.
func (c *predictionCollector) add(logits []float32, dims []int, b *data.Batch) error {
	if c.p.PredictionDims == nil {
		c.p.PredictionDims = append([]int{0}, dims[1:]...)
	}
	if len(dims) != len(c.p.PredictionDims) || !slices.Equal(dims[1:], c.p.PredictionDims[1:]) {
		return fmt.Errorf("trainer: prediction batches have different shapes %v and %v", c.p.PredictionDims, dims)
	}
	c.p.Predictions = append(c.p.Predictions, logits...)
	c.p.PredictionDims[0] += dims[0]
	if b.Labels == nil {
		c.unlabelled = true
		return nil
	}
	labelDims, want := []int{b.Size}, b.Size
	if len(dims) == 3 {
		labelDims, want = []int{b.Size, b.SeqLen}, b.Size*b.SeqLen
	}
	if len(b.Labels) != want || dims[0] != b.Size {
		return fmt.Errorf("trainer: a batch of %d examples has %d labels for logits %v", b.Size, len(b.Labels), dims)
	}
	if c.p.LabelDims == nil {
		c.p.LabelDims = append([]int{0}, labelDims[1:]...)
	}
	c.p.LabelIDs = append(c.p.LabelIDs, b.Labels...)
	c.p.LabelDims[0] += labelDims[0]
	return nil
}

// metrics runs fn (when set and every batch had labels) and prefixes its results; see
// prefixedMetrics.
func (c *predictionCollector) metrics(fn ComputeMetrics, prefix string) (map[string]float64, []string, error) {
	if fn == nil || c.unlabelled || c.p.LabelDims == nil {
		return nil, nil, nil
	}
	return prefixedMetrics(fn, c.p, prefix)
}

// prefixedMetrics runs fn and names its results as HF's evaluation_loop does: prefix + "_" + name
// unless the name already starts with it. A name that collides with the loss or the speed
// metrics the Trainer adds itself is an error rather than a silent overwrite.
func prefixedMetrics(fn ComputeMetrics, p EvalPrediction, prefix string) (map[string]float64, []string, error) {
	got, err := fn(p)
	if err != nil {
		return nil, nil, fmt.Errorf("trainer: compute_metrics: %w", err)
	}
	out := make(map[string]float64, len(got))
	for _, k := range slices.Sorted(maps.Keys(got)) {
		name := k
		if !strings.HasPrefix(k, prefix+"_") {
			name = prefix + "_" + k
		}
		switch strings.TrimPrefix(name, prefix+"_") {
		case "loss", "runtime", "samples_per_second", "steps_per_second":
			return nil, nil, fmt.Errorf("trainer: compute_metrics returned %q, a name the Trainer reports itself", k)
		}
		if _, dup := out[name]; dup {
			return nil, nil, fmt.Errorf("trainer: compute_metrics returned both %q and its prefixed form", k)
		}
		out[name] = got[k]
	}
	return out, slices.Sorted(maps.Keys(out)), nil
}
