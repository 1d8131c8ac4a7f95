package trainer_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/trainer/tensorboard"
	"github.com/gotpu/gotpu/xla"
)

func tinyGPT2(t testing.TB, rt *xla.Runtime) models.Model {
	t.Helper()
	cfg := gpt2.DefaultConfig()
	cfg.VocabSize, cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 64, 32, 2, 2, 16
	cfg.ResidPdrop, cfg.EmbdPdrop, cfg.AttnPdrop = 0, 0, 0
	m, err := models.New(context.Background(), rt, cfg, models.NewOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func counting(n, offset int) data.SliceDataset {
	var ds data.SliceDataset
	for i := range n {
		ids := make([]int32, 16)
		for j := range ids {
			ids[j] = int32((i + j + offset) % 64)
		}
		ds = append(ds, data.Example{InputIDs: ids})
	}
	return ds
}

// noise is a dataset of pseudo-random tokens: a model trained on counting gets worse on it.
func noise(n int) data.SliceDataset {
	var ds data.SliceDataset
	x := uint32(12345)
	for range n {
		ids := make([]int32, 16)
		for j := range ids {
			x = x*1664525 + 1013904223
			ids[j] = int32(x>>16) % 64
		}
		ds = append(ds, data.Example{InputIDs: ids})
	}
	return ds
}

func baseArgs(t *testing.T) trainer.TrainingArguments {
	a := trainer.DefaultTrainingArguments()
	a.OutputDir = t.TempDir()
	a.PerDeviceTrainBatchSize, a.PerDeviceEvalBatchSize = 4, 4
	a.LearningRate = 3e-3
	noBar := true
	a.DisableTqdm = &noBar
	return a
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func openRT(t *testing.T, n int) *xla.Runtime {
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go", NumDevices: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// stopAfter cancels the run's context when the given step ends.
type stopAfter struct {
	trainer.BaseCallback
	step   int
	cancel context.CancelFunc
}

func (s *stopAfter) OnStepEnd(_ context.Context, e *trainer.Event) error {
	if e.State.GlobalStep == s.step {
		s.cancel()
	}
	return nil
}

// TestCancelStopsAfterCurrentStep: cancelling the context ends training after the step in
// progress, with the state at that step and the error reported.
func TestCancelStopsAfterCurrentStep(t *testing.T) {
	rt := openRT(t, 1)
	a := baseArgs(t)
	a.MaxSteps, a.SaveStrategy = 50, "no"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(32, 0), nil,
		trainer.Options{Runtime: rt, Logger: quiet(), Callbacks: []trainer.Callback{&stopAfter{step: 3, cancel: cancel}}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := tr.Train(ctx)
	if err == nil || out.GlobalStep != 3 || tr.State().GlobalStep != 3 {
		t.Fatalf("Train = %+v, %v; want a stop at step 3 with the cancellation error", out, err)
	}
}

// TestEvaluateEarlyStoppingAndBestModel: evaluation every 2 steps records eval_loss, checkpoints
// carry the model and trainer_state.json, early stopping ends a run whose metric stops improving,
// and load_best_model_at_end keeps the best checkpoint's weights.
func TestEvaluateEarlyStoppingAndBestModel(t *testing.T) {
	rt := openRT(t, 2)
	a := baseArgs(t)
	a.MaxSteps = 40
	a.EvalStrategy, a.SaveStrategy = "steps", "steps"
	two := 2.0
	a.EvalSteps, a.SaveSteps, a.LoggingSteps = &two, 2, 2
	a.LoadBestModelAtEnd = true
	a.MetricForBestModel = "loss"
	// Trained on counting and evaluated on noise, the eval loss soon rises: early stopping fires.
	stop := trainer.NewEarlyStopping(2, 0)
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(32, 0), noise(8),
		trainer.Options{Runtime: rt, Logger: quiet(), Callbacks: []trainer.Callback{stop}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := tr.Train(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	st := tr.State()
	evals := 0
	for _, e := range st.LogHistory {
		if _, ok := e.EvalLoss(); ok {
			evals++
		}
	}
	if evals == 0 || st.BestMetric == nil || st.BestModelCheckpoint == nil {
		t.Fatalf("evals %d, best metric %v, best checkpoint %v", evals, st.BestMetric, st.BestModelCheckpoint)
	}
	if out.GlobalStep >= 40 {
		t.Errorf("early stopping did not fire within 40 steps")
	}
	t.Logf("stopped at step %d, best %s = %.4f at %s", out.GlobalStep, a.MetricForBestModel, *st.BestMetric, *st.BestModelCheckpoint)
	for _, f := range []string{"model.safetensors", "config.json", "trainer_state.json", "training_args.json"} {
		if _, err := os.Stat(filepath.Join(*st.BestModelCheckpoint, f)); err != nil {
			t.Errorf("best checkpoint lacks %s: %v", f, err)
		}
	}
	// The model after training is the best checkpoint's: evaluating it gives the best metric.
	tr2, err := trainer.New(a, tr.Model(), nil, noise(8), trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	m, err := tr2.Evaluate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d := m["eval_loss"] - *st.BestMetric; d > 1e-5 || d < -1e-5 {
		t.Errorf("final model's eval_loss %.6f, best_metric %.6f", m["eval_loss"], *st.BestMetric)
	}
}

// TestTensorBoardReport: report_to tensorboard writes event files with HF's tag names.
func TestTensorBoardReport(t *testing.T) {
	rt := openRT(t, 1)
	a := baseArgs(t)
	a.MaxSteps, a.LoggingSteps, a.SaveStrategy = 4, 2, "no"
	a.ReportTo = []string{"tensorboard"}
	a.LoggingDir = filepath.Join(a.OutputDir, "runs")
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(16, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	// The JSON-lines log has the same entries as trainer_state's log_history (2 logs + summary).
	raw, err := os.ReadFile(filepath.Join(a.OutputDir, "log_history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(raw), "\n"); lines != len(tr.State().LogHistory) || lines != 3 {
		t.Errorf("log_history.jsonl has %d lines, log_history %d entries:\n%s", lines, len(tr.State().LogHistory), raw)
	}
	files, _ := filepath.Glob(filepath.Join(a.LoggingDir, "events.out.tfevents.*"))
	if len(files) != 1 {
		t.Fatalf("event files: %v", files)
	}
	events, err := tensorboard.ReadEvents(files[0])
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]int{}
	for _, e := range events {
		for _, v := range e.Values {
			tags[v.Tag]++
		}
	}
	for _, want := range []string{"train/loss", "train/learning_rate", "train/grad_norm", "train/tokens_per_second"} {
		if tags[want] != 2 {
			t.Errorf("tag %s logged %d times, want 2 (tags: %v)", want, tags[want], tags)
		}
	}
}
