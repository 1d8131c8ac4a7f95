package trainer_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/trainer"
)

// TestNonFiniteInjection: non-finite gradients at step 5 (Options.NonFiniteAt) leave weights and
// optimizer state exactly as after step 4; a run of them aborts at max_consecutive_nonfinite with
// ErrNonFinite, and every checkpoint written is finite and loadable.
func TestNonFiniteInjection(t *testing.T) {
	rt := openRT(t, 1)
	a := baseArgs(t)
	a.MaxSteps, a.SaveSteps, a.SaveStrategy = 7, 1, "steps"
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(32, 0), nil, trainer.Options{Runtime: rt, Logger: quiet(),
		SyncCheckpoints: true, NonFiniteAt: func(step int) bool { return step == 5 }})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"model.safetensors", "optimizer.safetensors"} {
		before, _ := os.ReadFile(filepath.Join(a.OutputDir, "checkpoint-4", f))
		after, _ := os.ReadFile(filepath.Join(a.OutputDir, "checkpoint-5", f))
		if len(before) == 0 || !bytes.Equal(before, after) {
			t.Errorf("%s changed by the skipped step 5", f)
		}
		next, _ := os.ReadFile(filepath.Join(a.OutputDir, "checkpoint-6", f))
		if bytes.Equal(after, next) {
			t.Errorf("%s: step 6 did not update", f)
		}
	}

	rt = openRT(t, 1)
	a = baseArgs(t)
	a.MaxSteps, a.SaveSteps, a.SaveStrategy = 20, 1, "steps"
	a.MaxConsecutiveNonfinite = 4
	tr, err = trainer.New(a, tinyGPT2(t, rt), counting(32, 0), nil, trainer.Options{Runtime: rt, Logger: quiet(),
		NonFiniteAt: func(step int) bool { return step >= 3 }})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Train(context.Background())
	if !errors.Is(err, trainer.ErrNonFinite) || !strings.Contains(err.Error(), "max_consecutive_nonfinite") {
		t.Fatalf("Train = %v, want ErrNonFinite", err)
	}
	t.Log(err)
	l, _ := checkpoint.List(a.OutputDir)
	if len(l) == 0 || l[len(l)-1].Step > 6 {
		t.Fatalf("checkpoints %v", l)
	}
	for _, e := range l {
		if _, err := checkpoint.Open(e.Dir); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResumeRefusesBadCheckpoint: resuming from a damaged checkpoint is an error naming the file,
// never a silent fresh start: a missing trainer_state.json, a flipped bit, and weights whose shape
// does not match the model's config.
func TestResumeRefusesBadCheckpoint(t *testing.T) {
	rt := openRT(t, 1)
	a := baseArgs(t)
	a.MaxSteps, a.SaveSteps, a.SaveStrategy = 2, 2, "steps"
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(32, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(a.OutputDir, "checkpoint-2")
	cases := []struct {
		name, want string
		damage     func(dir string)
	}{
		{"bit flip", "model.safetensors", func(dir string) {
			p := filepath.Join(dir, "model.safetensors")
			b, _ := os.ReadFile(p)
			b[len(b)-3] ^= 1
			os.WriteFile(p, b, 0o644)
		}},
		{"missing trainer_state.json", "trainer_state.json", func(dir string) { os.Remove(filepath.Join(dir, "trainer_state.json")) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			dir := filepath.Join(out, "checkpoint-2")
			copyTree(t, good, dir)
			c.damage(dir)
			b := baseArgs(t)
			b.OutputDir, b.MaxSteps, b.ResumeFromCheckpoint = out, 4, dir
			tr, err := trainer.New(b, tinyGPT2(t, rt), counting(32, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			_, err = tr.Train(context.Background())
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("resume from a damaged checkpoint: %v, want an error naming %s", err, c.want)
			}
			t.Log(err)
		})
	}
	// A checkpoint of a wider model (shape mismatch vs the config of the model being trained).
	t.Run("shape mismatch", func(t *testing.T) {
		b := baseArgs(t)
		b.MaxSteps, b.ResumeFromCheckpoint = 4, good
		cfgModel := gpt2Width(t, rt, 48)
		tr, err := trainer.New(b, cfgModel, counting(32, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		_, err = tr.Train(context.Background())
		if err == nil || !strings.Contains(err.Error(), "model.safetensors: transformer.") {
			t.Fatalf("resume onto another shape: %v, want an error naming the tensor", err)
		}
		t.Log(err)
	})
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	des, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range des {
		b, err := os.ReadFile(filepath.Join(from, d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, d.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRetentionKeepsBest: save_total_limit=1 with load_best_model_at_end keeps the newest
// checkpoint and the best one (HF's rotation), deleting the others only after newer commits.
func TestRetentionKeepsBest(t *testing.T) {
	rt := openRT(t, 1)
	a := baseArgs(t)
	a.MaxSteps = 12
	a.EvalStrategy, a.SaveStrategy = "steps", "steps"
	two := 2.0
	a.EvalSteps, a.SaveSteps, a.LoggingSteps = &two, 2, 2
	one := 1
	a.SaveTotalLimit = &one
	a.LoadBestModelAtEnd = true
	a.MetricForBestModel = "loss"
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(32, 0), noise(8), trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	best := tr.State().BestModelCheckpoint
	if best == nil {
		t.Fatal("no best checkpoint")
	}
	l, _ := checkpoint.List(a.OutputDir)
	var names []string
	hasBest := false
	for _, e := range l {
		names = append(names, filepath.Base(e.Dir))
		hasBest = hasBest || e.Dir == *best
	}
	if !hasBest || len(l) > 2 || l[len(l)-1].Step != 12 {
		t.Fatalf("kept %v, best %s", names, *best)
	}
	t.Logf("kept %v (best %s)", names, filepath.Base(*best))
}
