package trainer_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/qwen3"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// Qwen3 through the Trainer: the generic trainer tests use GPT-2; these run a tiny random
// Qwen3ForCausalLM (head_dim 16 != hidden/heads 8, GQA 4/2, q_norm/k_norm, a sliding-window
// layer) through exact resume, replicas and bf16 mixed precision. Its fixture parity (3 AdamW
// steps, HF's decay groups) is in trainer/step's TestFixtureAdamW and cmd/gotpu's
// TestTrainReproducesFixtures.

func tinyQwen3(t *testing.T, rt *xla.Runtime) models.Model {
	t.Helper()
	c := qwen3.DefaultConfig()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 64, 32, 48, 2
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.MaxPositionEmbeddings = 4, 2, 16, 16
	w := 6
	c.UseSlidingWindow, c.SlidingWindow, c.MaxWindowLayers = true, &w, 1
	c.Rope.Theta = 1e6
	m, err := models.New(context.Background(), rt, c, models.NewOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func qwen3Args(out string, perDevice int, bf16 bool) trainer.TrainingArguments {
	a := trainer.DefaultTrainingArguments()
	a.OutputDir = out
	a.PerDeviceTrainBatchSize, a.LearningRate, a.WeightDecay = perDevice, 3e-3, 0.01
	a.MaxSteps, a.SaveSteps, a.LoggingSteps, a.SaveStrategy = 6, 3, 1, "steps"
	a.BF16 = bf16
	noBar := true
	a.DisableTqdm = &noBar
	return a
}

// trainQwen3 trains a fresh tiny Qwen3 (same seed every time); stop > 0 cancels after that step,
// resume continues from the latest checkpoint.
func trainQwen3(t *testing.T, devices, perDevice int, bf16 bool, out string, stop int, resume bool) *trainer.TrainerState {
	t.Helper()
	rt := openRT(t, devices)
	a := qwen3Args(out, perDevice, bf16)
	if resume {
		a.ResumeFromCheckpoint = "true"
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cbs []trainer.Callback
	if stop > 0 {
		cbs = append(cbs, &stopAfter{step: stop, cancel: cancel})
	}
	tr, err := trainer.New(a, tinyQwen3(t, rt), counting(24, 0), nil, trainer.Options{Runtime: rt, Logger: quiet(), Callbacks: cbs})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Train(ctx)
	if stop > 0 {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted run: %v", err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	return tr.State()
}

// TestQwen3ExactResume: 6 steps straight and 3 + resume + 3 give bitwise-identical weights,
// optimizer state and RNG state and the same logged losses: on one device in float32, and on two
// replicas with bf16 mixed precision.
func TestQwen3ExactResume(t *testing.T) {
	for _, c := range []struct {
		devices, perDevice int
		bf16               bool
	}{{1, 4, false}, {2, 2, true}} {
		t.Run(fmt.Sprintf("devices=%d,bf16=%v", c.devices, c.bf16), func(t *testing.T) {
			straight, split := t.TempDir(), t.TempDir()
			a := trainQwen3(t, c.devices, c.perDevice, c.bf16, straight, 0, false)
			trainQwen3(t, c.devices, c.perDevice, c.bf16, split, 3, false)
			if l, _ := checkpoint.List(split); len(l) != 1 || l[0].Step != 3 {
				t.Fatalf("after the interrupted run: %v", l)
			}
			b := trainQwen3(t, c.devices, c.perDevice, c.bf16, split, 0, true)
			sameRun(t, straight, split, 6, a, b, "config.json")
			la := loggedLosses(a)
			if !(la[6] < la[1]) {
				t.Errorf("did not learn: losses %v", la)
			}
			// The checkpoint is an HF Qwen3 directory.
			rt := openRT(t, 1)
			if m, err := models.Load(context.Background(), rt, filepath.Join(split, "checkpoint-6"), models.LoadOptions{}); err != nil || m.Architecture() != "Qwen3ForCausalLM" {
				t.Errorf("checkpoint-6 as a model directory: %v", err)
			}
		})
	}
}

// TestQwen3Replicas: 2 replicas of 2 examples end within float32 rounding of 1 device of 4 (the
// same global batch); bf16 mixed precision follows float32 within bf16's precision and is not
// float32 in disguise.
func TestQwen3Replicas(t *testing.T) {
	one, two, half := t.TempDir(), t.TempDir(), t.TempDir()
	l1 := loggedLosses(trainQwen3(t, 1, 4, false, one, 0, false))
	l2 := loggedLosses(trainQwen3(t, 2, 2, false, two, 0, false))
	lb := loggedLosses(trainQwen3(t, 2, 2, true, half, 0, false))
	x := readF32(t, filepath.Join(one, "checkpoint-6", "model.safetensors"))
	y := readF32(t, filepath.Join(two, "checkpoint-6", "model.safetensors"))
	worst := 0.0
	for n, xv := range x {
		yv, ok := y[n]
		if !ok || len(yv) != len(xv) {
			t.Fatalf("%s missing or reshaped", n)
		}
		for i := range xv {
			worst = max(worst, math.Abs(float64(xv[i]-yv[i])))
		}
	}
	t.Logf("max |1 device - 2 replicas| = %g; losses float32 %v, bf16 %v", worst, l1, lb)
	if worst > 1e-6 {
		t.Errorf("2 replicas differ from 1 device by %g > 1e-6", worst)
	}
	for s, v := range l1 {
		if math.Abs(l2[s]-v) > 1e-4 {
			t.Errorf("step %d: loss %v on 1 device, %v on 2 replicas", s, v, l2[s])
		}
		if math.Abs(lb[s]-v) > 5e-2*v {
			t.Errorf("step %d: bf16 loss %v, float32 %v", s, lb[s], v)
		}
	}
	if lb[1] == l1[1] && lb[6] == l1[6] {
		t.Error("bf16 losses equal the float32 ones: mixed precision is not in effect")
	}
}
