package trainer_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/bert"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

func TestAccuracy(t *testing.T) {
	nan := float32(math.NaN())
	p := trainer.EvalPrediction{
		Predictions: []float32{
			0.1, 0.9, 0.0, // argmax 1, label 1: right
			2, 2, 1, // tie: numpy takes index 0, label 1: wrong
			-1, -2, -0.5, // argmax 2, label 2: right
			0, 0, 0, // label -100: not counted
			1, nan, 3, // NaN wins (numpy), label 0: wrong
		},
		PredictionDims: []int{5, 3},
		LabelIDs:       []int32{1, 1, 2, data.IgnoreIndex, 0},
		LabelDims:      []int{5},
	}
	m, err := trainer.Accuracy(p)
	if err != nil {
		t.Fatal(err)
	}
	if m["accuracy"] != 0.5 || len(m) != 1 {
		t.Errorf("Accuracy = %v, want accuracy 0.5 (2 of 4 counted)", m)
	}
	bad := []struct {
		name string
		p    trainer.EvalPrediction
		want string
	}{
		{"token-level", trainer.EvalPrediction{Predictions: make([]float32, 8), PredictionDims: []int{1, 2, 4},
			LabelIDs: []int32{1, 2}, LabelDims: []int{1, 2}}, "want predictions [examples, num_labels]"},
		{"label out of range", trainer.EvalPrediction{Predictions: make([]float32, 4), PredictionDims: []int{2, 2},
			LabelIDs: []int32{0, 2}, LabelDims: []int{2}}, "label 2 is not a class of 2"},
		{"all ignored", trainer.EvalPrediction{Predictions: make([]float32, 2), PredictionDims: []int{1, 2},
			LabelIDs: []int32{data.IgnoreIndex}, LabelDims: []int{1}}, "no labelled examples"},
		{"short logits", trainer.EvalPrediction{Predictions: make([]float32, 3), PredictionDims: []int{2, 2},
			LabelIDs: []int32{0, 1}, LabelDims: []int{2}}, "do not match"},
	}
	for _, c := range bad {
		if _, err := trainer.Accuracy(c.p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// keyedByFirstToken is a 3-class dataset whose label is given by the first token (3, 4 or 5),
// followed by tokens that carry no information; lengths vary so the bucket collator pads.
func keyedByFirstToken(n int, seed uint32) data.SliceDataset {
	var ds data.SliceDataset
	x := seed
	next := func() uint32 { x = x*1664525 + 1013904223; return x >> 16 }
	for i := range n {
		label := int32(i % 3)
		ids := []int32{2, 3 + label} // [CLS]-like start, then the class token
		for range 4 + next()%20 {
			ids = append(ids, 6+int32(next()%50))
		}
		ds = append(ds, data.Example{InputIDs: ids, Label: label, HasLabel: true})
	}
	return ds
}

func tinyBERT(t *testing.T, rt *xla.Runtime, labels int) models.Model {
	t.Helper()
	cfg := bert.DefaultConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.NumHiddenLayers, cfg.NumAttentionHeads, cfg.IntermediateSize = 64, 32, 1, 2, 64
	cfg.MaxPositionEmbeddings = 32
	cfg.HiddenDropoutProb, cfg.AttentionProbsDropoutProb = 0, 0
	cfg.SetNumLabels(labels)
	m, err := models.New(context.Background(), rt, cfg, models.NewOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestComputeMetricsAccuracy: a BERT classifier with compute_metrics = Accuracy reports
// eval_accuracy after eval_loss in its evaluation logs, equal to the accuracy of Predict's
// logits counted here; training lifts it well above chance; metric_for_best_model "accuracy"
// tracks it; Predict reports test_accuracy.
func TestComputeMetricsAccuracy(t *testing.T) {
	rt := openRT(t, 2)
	a := baseArgs(t)
	a.MaxSteps, a.LearningRate = 100, 5e-3
	a.EvalStrategy, a.SaveStrategy = "steps", "steps"
	every := 50.0
	a.EvalSteps, a.SaveSteps, a.LoggingSteps = &every, 50, 50
	a.MetricForBestModel = "accuracy"
	eval := keyedByFirstToken(30, 7) // 30 examples: the last eval batch (8 per step) is partial
	tr, err := trainer.New(a, tinyBERT(t, rt, 3), keyedByFirstToken(96, 1), eval,
		trainer.Options{Runtime: rt, Logger: quiet(), ComputeMetrics: trainer.Accuracy})
	if err != nil {
		t.Fatal(err)
	}
	before, err := tr.Evaluate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	after, err := tr.Evaluate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("eval_accuracy %.3f before training, %.3f after", before["eval_accuracy"], after["eval_accuracy"])
	if after["eval_accuracy"] < 0.9 {
		t.Errorf("eval_accuracy after training %.3f, want ≥ 0.9 on a task the first token decides", after["eval_accuracy"])
	}
	p, err := tr.Predict(context.Background(), eval)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Dims) != 2 || p.Dims[0] != 30 || p.Dims[1] != 3 {
		t.Fatalf("Predict dims %v, want [30 3]", p.Dims)
	}
	correct := 0
	for i := range 30 {
		row := p.Logits[i*3 : i*3+3]
		best := 0
		for j := range row {
			if row[j] > row[best] {
				best = j
			}
		}
		ex, _ := eval.Get(i)
		if int32(best) == ex.Label {
			correct++
		}
	}
	want := float64(correct) / 30
	if after["eval_accuracy"] != want || p.Metrics["test_accuracy"] != want {
		t.Errorf("eval_accuracy %v, test_accuracy %v; counted from the logits: %v", after["eval_accuracy"], p.Metrics["test_accuracy"], want)
	}
	// Every evaluation log has eval_accuracy right after eval_loss, and the best metric is the
	// best accuracy of the evaluations during training.
	st := tr.State()
	var accs []float64
	for _, e := range st.LogHistory {
		if _, ok := e.EvalLoss(); !ok {
			continue
		}
		keys := []string{}
		for _, m := range e.Members() {
			keys = append(keys, m.Key)
		}
		if len(keys) < 2 || keys[0] != "eval_loss" || keys[1] != "eval_accuracy" {
			t.Errorf("evaluation log keys %v, want eval_loss then eval_accuracy", keys)
			continue
		}
		v, _ := e.Members()[1].Value.Float()
		accs = append(accs, v)
	}
	if len(accs) != 4 { // before, steps 50 and 100, after
		t.Fatalf("%d evaluation logs, want 4", len(accs))
	}
	if st.BestMetric == nil || *st.BestMetric != max(accs[1], accs[2]) {
		t.Errorf("best_metric %v, want the best training-time accuracy of %v", st.BestMetric, accs[1:3])
	}
}

// TestComputeMetricsErrors: compute_metrics' errors stop the evaluation naming it, and a
// result named like a metric the Trainer reports itself is refused.
func TestComputeMetricsErrors(t *testing.T) {
	rt := openRT(t, 1)
	for _, c := range []struct {
		fn   trainer.ComputeMetrics
		want string
	}{
		{trainer.Accuracy, "trainer.Accuracy: want predictions [examples, num_labels]"}, // a causal LM
		{func(trainer.EvalPrediction) (map[string]float64, error) { return map[string]float64{"runtime": 1}, nil }, `"runtime"`},
		{func(trainer.EvalPrediction) (map[string]float64, error) {
			return map[string]float64{"x": 1, "eval_x": 2}, nil
		}, "prefixed form"},
	} {
		tr, err := trainer.New(baseArgs(t), tinyGPT2(t, rt), nil, counting(4, 0),
			trainer.Options{Runtime: rt, Logger: quiet(), ComputeMetrics: c.fn})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Evaluate(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Evaluate error %v, want one containing %q", err, c.want)
		}
	}
}

// TestLoadBestModelThenEvaluate: after load_best_model_at_end, the trainer's own Evaluate runs
// the best checkpoint's weights, not the last ones. A compute_metrics that scores only the first
// evaluation makes step 2 the best while the loss keeps falling until step 6.
func TestLoadBestModelThenEvaluate(t *testing.T) {
	rt := openRT(t, 1)
	a := baseArgs(t)
	a.MaxSteps = 6
	a.EvalStrategy, a.SaveStrategy = "steps", "steps"
	two := 2.0
	a.EvalSteps, a.SaveSteps, a.LoggingSteps = &two, 2, 2
	a.LoadBestModelAtEnd, a.MetricForBestModel = true, "first"
	calls := 0
	first := func(p trainer.EvalPrediction) (map[string]float64, error) {
		calls++
		if len(p.PredictionDims) != 3 || len(p.LabelDims) != 2 || p.LabelDims[0] != 8 || p.LabelDims[1] != 16 {
			t.Errorf("causal LM prediction dims %v, label dims %v", p.PredictionDims, p.LabelDims)
		}
		if calls == 1 {
			return map[string]float64{"first": 1}, nil
		}
		return map[string]float64{"first": 0}, nil
	}
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(32, 0), counting(8, 3),
		trainer.Options{Runtime: rt, Logger: quiet(), ComputeMetrics: first})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := tr.State()
	if st.BestModelCheckpoint == nil || !strings.HasSuffix(*st.BestModelCheckpoint, "checkpoint-2") {
		t.Fatalf("best checkpoint %v, want checkpoint-2", st.BestModelCheckpoint)
	}
	var losses []float64
	for _, e := range st.LogHistory {
		if l, ok := e.EvalLoss(); ok {
			losses = append(losses, l)
		}
	}
	if len(losses) != 3 || !(losses[2] < losses[0]) {
		t.Fatalf("eval losses %v: want 3, falling", losses)
	}
	m, err := tr.Evaluate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := math.Abs(m["eval_loss"] - losses[0]); d > 1e-6 {
		t.Errorf("Evaluate after load_best_model_at_end: eval_loss %.6f, the best checkpoint's %.6f, the last one's %.6f",
			m["eval_loss"], losses[0], losses[2])
	}
}
