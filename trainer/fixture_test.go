package trainer_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// fixtureCheckpoint is a checkpoint written by this version of gotpu (format 1), kept so that
// later versions keep reading it. Regenerate (only on a deliberate format change) with
//
//	GOTPU_WRITE_CHECKPOINT_FIXTURE=1 go test -run TestCheckpointFixture ./trainer/
const fixtureCheckpoint = "../testdata/checkpoint/gpt2-micro/checkpoint-2"

func microGPT2(t *testing.T, rt *xla.Runtime) models.Model {
	t.Helper()
	cfg := gpt2.DefaultConfig()
	cfg.VocabSize, cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 64, 8, 1, 2, 16
	cfg.ResidPdrop, cfg.EmbdPdrop, cfg.AttnPdrop = 0.1, 0.1, 0.1
	m, err := models.New(context.Background(), rt, cfg, models.NewOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func microArgs(out string) trainer.TrainingArguments {
	a := trainer.DefaultTrainingArguments()
	a.OutputDir = out
	a.PerDeviceTrainBatchSize, a.LearningRate = 4, 3e-3
	a.MaxSteps, a.SaveSteps, a.LoggingSteps, a.SaveStrategy = 4, 2, 1, "steps"
	noBar := true
	a.DisableTqdm = &noBar
	return a
}

// TestCheckpointFixture: the committed format-1 checkpoint verifies, its model directory loads
// with models.Load (HF layout), and training resumes from it to the same weights as a run
// straight through.
//
// The fixture was written on simplego, and resuming must reproduce the straight run bit for bit,
// so both runs use simplego: another backend's first two steps round differently (its matrix
// products sum in another order), which is not what this test is about. Exact resume on the
// default backend is checked by the resume tests that train and resume on it.
func TestCheckpointFixture(t *testing.T) {
	rt, err := xla.Open(context.Background(), xla.Config{Device: xla.DeviceGo, NumDevices: 1, GoBackend: xla.GoBackendSimpleGo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	if os.Getenv("GOTPU_WRITE_CHECKPOINT_FIXTURE") != "" {
		out := filepath.Dir(fixtureCheckpoint)
		os.RemoveAll(out)
		a := microArgs(out)
		a.MaxSteps = 4
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		tr, err := trainer.New(a, microGPT2(t, rt), counting(16, 0), nil, trainer.Options{Runtime: rt, Logger: quiet(),
			Callbacks: []trainer.Callback{&stopAfter{step: 2, cancel: cancel}}})
		if err != nil {
			t.Fatal(err)
		}
		tr.Train(ctx)
		os.Remove(filepath.Join(out, "log_history.jsonl"))
	}
	ck, err := checkpoint.Open(fixtureCheckpoint, "model.safetensors", "optimizer.safetensors", "trainer_state.json")
	if err != nil {
		t.Fatal(err)
	}
	if ck.Manifest.Step != 2 {
		t.Fatalf("fixture step %d", ck.Manifest.Step)
	}
	if _, err := models.Load(context.Background(), rt, fixtureCheckpoint, models.LoadOptions{}); err != nil {
		t.Fatalf("the checkpoint is not an HF model directory: %v", err)
	}
	straight := t.TempDir()
	tr, err := trainer.New(microArgs(straight), microGPT2(t, rt), counting(16, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	resumed := t.TempDir()
	a := microArgs(resumed)
	a.ResumeFromCheckpoint = fixtureCheckpoint
	tr, err = trainer.New(a, microGPT2(t, rt), counting(16, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	x, _ := os.ReadFile(filepath.Join(straight, "checkpoint-4", "model.safetensors"))
	y, _ := os.ReadFile(filepath.Join(resumed, "checkpoint-4", "model.safetensors"))
	if len(x) == 0 || string(x) != string(y) {
		t.Fatal("resuming from the fixture does not reproduce the straight run")
	}
}
