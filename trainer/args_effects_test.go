package trainer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/trainer"
)

// recording is a dataset that records which examples were read, in order.
type recording struct {
	data.Dataset
	mu   sync.Mutex
	read []int
}

func (r *recording) Get(i int) (data.Example, error) {
	r.mu.Lock()
	r.read = append(r.read, i)
	r.mu.Unlock()
	return r.Dataset.Get(i)
}

func (r *recording) reset() {
	r.mu.Lock()
	r.read = nil
	r.mu.Unlock()
}

// first returns the first n examples read since the last reset.
func (r *recording) first(t *testing.T, n int) []int {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.read) < n {
		t.Fatalf("only %d examples read, want at least %d", len(r.read), n)
	}
	return slices.Sorted(slices.Values(r.read[:n]))
}

func effectArgs(out string) trainer.TrainingArguments {
	a := trainer.DefaultTrainingArguments()
	a.OutputDir = out
	a.PerDeviceTrainBatchSize = 2
	a.LearningRate = 3e-3
	a.MaxSteps, a.SaveSteps, a.LoggingSteps = 6, 3, 1
	noBar := true
	a.DisableTqdm = &noBar
	return a
}

// runRecorded trains a fresh model on a recorded 16-example dataset (8 batches of 2 per epoch)
// and returns the examples each step read, in batches of 2 (the loader reads a batch's examples
// before the next batch's; the order within a batch is not compared).
func runRecorded(t *testing.T, a trainer.TrainingArguments) (*recording, error) {
	t.Helper()
	rt := openRT(t, 1)
	ds := &recording{Dataset: counting(16, 0)}
	tr, err := trainer.New(a, gpt2With(t, rt, 0), ds, nil, trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ds.reset() // New sized the batches by reading every example
	_, err = tr.Train(context.Background())
	return ds, err
}

// TestIgnoreDataSkip: resumed from checkpoint-3 of a run whose epoch has 8 batches, training
// continues with the 4th batch of the epoch (HF skips the batches already seen); with
// ignore_data_skip it draws the epoch's batches again from its first (HF's
// steps_trained_in_current_epoch = 0), in the same order (same epoch, same seed).
func TestIgnoreDataSkip(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "first")
	rec, err := runRecorded(t, effectArgs(first))
	if err != nil {
		t.Fatal(err)
	}
	var batches [][]int
	for k := range 6 {
		b := slices.Sorted(slices.Values(rec.read[2*k : 2*k+2]))
		batches = append(batches, b)
	}
	ckpt := filepath.Join(first, "checkpoint-3")
	for _, c := range []struct {
		ignore bool
		want   []int
	}{{false, batches[3]}, {true, batches[0]}} {
		a := effectArgs(filepath.Join(dir, "resumed"+map[bool]string{false: "-skip", true: "-ignore"}[c.ignore]))
		a.ResumeFromCheckpoint = ckpt
		a.IgnoreDataSkip = c.ignore
		rec, err := runRecorded(t, a)
		if err != nil {
			t.Fatal(err)
		}
		got := rec.first(t, 2)
		t.Logf("ignore_data_skip=%v: first batch after resuming at step 3: examples %v (the epoch's batches: %v)", c.ignore, got, batches)
		if !slices.Equal(got, c.want) {
			t.Errorf("ignore_data_skip=%v: first batch after resume %v, want %v", c.ignore, got, c.want)
		}
	}
	if slices.Equal(batches[0], batches[3]) {
		t.Fatal("the epoch's 1st and 4th batches are the same examples: the test cannot tell skipping from not")
	}
}

// TestDataSeedOrdersBatches: data_seed, not seed, draws the training order (HF's sampler
// generator): the same data_seed gives the same first batch under another seed, another
// data_seed another one.
func TestDataSeedOrdersBatches(t *testing.T) {
	firstBatch := func(seed, dataSeed int) []int {
		a := effectArgs(t.TempDir())
		a.MaxSteps, a.SaveStrategy = 1, "no"
		a.Seed, a.DataSeed = seed, &dataSeed
		rec, err := runRecorded(t, a)
		if err != nil {
			t.Fatal(err)
		}
		return rec.first(t, 2)
	}
	base, otherSeed, otherData := firstBatch(42, 7), firstBatch(43, 7), firstBatch(42, 8)
	t.Logf("first batch: seed 42 data_seed 7 %v, seed 43 data_seed 7 %v, seed 42 data_seed 8 %v", base, otherSeed, otherData)
	if !slices.Equal(base, otherSeed) {
		t.Errorf("seed changed the order under the same data_seed: %v vs %v", base, otherSeed)
	}
	if slices.Equal(base, otherData) {
		t.Errorf("data_seed 7 and 8 drew the same first batch %v", base)
	}
}

// TestSaveOnlyModel: with save_only_model a checkpoint holds the model (weights, config,
// trainer_state.json, training_args.json) and none of the optimizer, scheduler, RNG or data
// position files; its weights load as a model, and resuming from it is refused, naming
// save_only_model and what to do instead.
func TestSaveOnlyModel(t *testing.T) {
	out := t.TempDir()
	a := effectArgs(out)
	a.MaxSteps = 3
	a.SaveOnlyModel = true
	if _, err := runRecorded(t, a); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(out, "checkpoint-3")
	for _, f := range []string{"model.safetensors", "config.json", "trainer_state.json", "training_args.json"} {
		if _, err := os.Stat(filepath.Join(ckpt, f)); err != nil {
			t.Errorf("save_only_model checkpoint lacks %s: %v", f, err)
		}
	}
	for _, f := range []string{"optimizer.safetensors", "scheduler.json", "rng_state.safetensors", "gotpu_state.json"} {
		if _, err := os.Stat(filepath.Join(ckpt, f)); err == nil {
			t.Errorf("save_only_model checkpoint has %s", f)
		}
	}
	if _, err := models.Load(context.Background(), openRT(t, 1), ckpt, models.LoadOptions{}); err != nil {
		t.Errorf("the model-only checkpoint does not load as a model: %v", err)
	}
	a = effectArgs(out)
	a.MaxSteps, a.ResumeFromCheckpoint = 6, "true"
	_, err := runRecorded(t, a)
	t.Logf("resume from a save_only_model checkpoint: %v", err)
	if !errors.Is(err, trainer.ErrModelOnlyCheckpoint) {
		t.Fatalf("resume from a save_only_model checkpoint: %v, want ErrModelOnlyCheckpoint", err)
	}
	for _, want := range []string{"resume_from_checkpoint", ckpt, "save_only_model", "--model_name_or_path"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal does not mention %q: %v", want, err)
		}
	}
	// A full checkpoint of the same run still resumes.
	full := t.TempDir()
	a = effectArgs(full)
	a.MaxSteps = 3
	if _, err := runRecorded(t, a); err != nil {
		t.Fatal(err)
	}
	a = effectArgs(full)
	a.ResumeFromCheckpoint = "true"
	if _, err := runRecorded(t, a); err != nil {
		t.Fatalf("resume from a full checkpoint: %v", err)
	}
}

// TestEvalStrategyNeedsEvalData: HF's Trainer refuses eval_strategy steps/epoch without an
// eval_dataset; gotpu also refuses load_best_model_at_end and save_strategy best, which would
// otherwise do nothing. Each error names its argument; with evaluation data all are accepted.
func TestEvalStrategyNeedsEvalData(t *testing.T) {
	rt := openRT(t, 1)
	m := gpt2With(t, rt, 0)
	for _, c := range []struct {
		field string
		set   func(*trainer.TrainingArguments)
	}{
		{"eval_strategy", func(a *trainer.TrainingArguments) { a.EvalStrategy = "steps" }},
		{"eval_strategy", func(a *trainer.TrainingArguments) { a.EvalStrategy, a.SaveStrategy = "epoch", "epoch" }},
		{"load_best_model_at_end", func(a *trainer.TrainingArguments) { a.LoadBestModelAtEnd, a.SaveStrategy = true, "no" }},
		{"save_strategy", func(a *trainer.TrainingArguments) { a.SaveStrategy = "best" }},
	} {
		a := effectArgs(t.TempDir())
		c.set(&a)
		_, err := trainer.New(a, m, counting(8, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
		if err == nil || !strings.Contains(err.Error(), c.field) || !strings.Contains(err.Error(), "no evaluation data") {
			t.Errorf("%s without evaluation data: %v, want an error naming it", c.field, err)
			continue
		}
		t.Logf("%s: %v", c.field, err)
		a.EvalStrategy = "steps"
		if a.SaveStrategy != "best" {
			a.SaveStrategy = "steps"
		}
		if _, err := trainer.New(a, m, counting(8, 0), counting(4, 1), trainer.Options{Runtime: rt, Logger: quiet()}); err != nil {
			t.Errorf("%s with evaluation data: %v", c.field, err)
		}
	}
}

// TestAverageTokensAcrossDevicesFalse: false is refused on more than one device, naming the
// field (gotpu averages over all devices' tokens, HF's true), and accepted on one, where HF's two
// normalizations are the same.
func TestAverageTokensAcrossDevicesFalse(t *testing.T) {
	for _, devices := range []int{1, 2} {
		rt := openRT(t, devices)
		a := effectArgs(t.TempDir())
		a.AverageTokensAcrossDevices = false
		_, err := trainer.New(a, gpt2With(t, rt, 0), counting(16, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
		t.Logf("%d devices: %v", devices, err)
		switch {
		case devices == 1 && err != nil:
			t.Errorf("1 device: %v, want accepted", err)
		case devices > 1 && (err == nil || !strings.Contains(err.Error(), "average_tokens_across_devices")):
			t.Errorf("%d devices: %v, want an error naming average_tokens_across_devices", devices, err)
		}
	}
}
