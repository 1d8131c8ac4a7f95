package trainer_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/trainer"
)

// loraCase is a LoRA run on the resume tests' GPT-2 (resumeCase), with its own adapter.
type loraCase struct {
	resumeCase
	loraDropout float64
}

func (c loraCase) peftConfig() *peft.LoraConfig {
	cfg := peft.DefaultLoraConfig()
	cfg.R, cfg.LoraAlpha, cfg.LoraDropout = 4, 8, c.loraDropout
	cfg.TargetModules = []string{"c_attn", "c_fc"}
	cfg.InitLoraWeights = false // both factors non-zero, so both get gradients from step 1
	return &cfg
}

// train is resumeCase.train with the case's adapter attached by the trainer.
func (c loraCase) train(t *testing.T, out string, stop int, resume bool) *trainer.TrainerState {
	t.Helper()
	rc := c.resumeCase
	rc.peft = c.peftConfig()
	return rc.train(t, c.devices, c.perDevice, out, stop, resume)
}

// TestLoRAExactResume: a LoRA run of 10 steps + resume + 10 writes bitwise the same adapter,
// optimizer state and RNG state at step 20 as 20 steps straight, and logs the same losses: on one
// device, with gradient accumulation, and on two devices with dropout in the model and on the
// LoRA branches (the RNG state is part of what resumes), and with FSDP over two devices. The
// checkpoints hold the adapter only.
func TestLoRAExactResume(t *testing.T) {
	for _, c := range []loraCase{
		{resumeCase: resumeCase{devices: 1, perDevice: 4, accumulation: 1}},
		{resumeCase: resumeCase{devices: 1, perDevice: 2, accumulation: 4}, loraDropout: 0.1},
		{resumeCase: resumeCase{devices: 2, perDevice: 2, accumulation: 1, dropout: 0.1}, loraDropout: 0.1},
		// FSDP: the adapter, its moments and the frozen base are sharded over the mesh.
		{resumeCase: resumeCase{devices: 2, perDevice: 2, accumulation: 1, fsdp: []string{"full_shard"}}},
	} {
		t.Run(fmt.Sprintf("devices=%d,accumulation=%d,dropout=%v,lora_dropout=%v,fsdp=%v", c.devices, c.accumulation, c.dropout, c.loraDropout, c.fsdp), func(t *testing.T) {
			straight, split := t.TempDir(), t.TempDir()
			a := c.train(t, straight, 0, false)
			c.train(t, split, 10, false)
			if l, _ := checkpoint.List(split); len(l) != 1 || l[0].Step != 10 {
				t.Fatalf("after the interrupted run: %v", l)
			}
			ck := filepath.Join(split, "checkpoint-10")
			for _, f := range []string{"model.safetensors", "config.json"} {
				if _, err := os.Stat(filepath.Join(ck, f)); err == nil {
					t.Errorf("checkpoint has %s: a LoRA checkpoint holds the adapter, not the base model", f)
				}
			}
			checkAdapterOnly(t, filepath.Join(ck, "adapter_model.safetensors"), "")
			checkAdapterOnly(t, filepath.Join(ck, "optimizer.safetensors"), "adamw_")
			b := c.train(t, split, 0, true)
			sameLoRARun(t, straight, split, 20, a, b)
		})
	}
}

// checkAdapterOnly: every tensor of a checkpoint file is a LoRA factor's (after prefix/).
func checkAdapterOnly(t *testing.T, path, kindPrefix string) {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Names()) == 0 {
		t.Fatalf("%s: no tensors", path)
	}
	for _, n := range f.Names() {
		name := n
		if kindPrefix != "" {
			kind, rest, ok := strings.Cut(n, "/")
			if !ok || !strings.HasPrefix(kind, kindPrefix) {
				t.Errorf("%s: tensor %s is not optimizer state", path, n)
			}
			name = rest
		}
		if !strings.HasPrefix(name, "base_model.model.transformer.h.") || !(strings.HasSuffix(name, ".lora_A.weight") || strings.HasSuffix(name, ".lora_B.weight")) {
			t.Errorf("%s: tensor %s is not a LoRA factor", path, n)
		}
	}
}

func sameLoRARun(t *testing.T, straight, split string, steps int, a, b *trainer.TrainerState) {
	t.Helper()
	sameRunFiles(t, straight, split, steps, a, b, []string{"adapter_model.safetensors", "adapter_config.json", "optimizer.safetensors", "rng_state.safetensors"})
}

// TestLoRAFrozenBase: after LoRA training the base weights are bitwise what they were (the
// merged-away adapter aside), the adapter moved, and on 2 devices the adapter ends within 1e-6 of
// the 1-device run with the same global batch (only the order of the gradient sums differs).
func TestLoRAFrozenBase(t *testing.T) {
	run := func(devices, perDevice int) (models.Model, map[string][]float32) {
		rt := openRT(t, devices)
		c := loraCase{resumeCase: resumeCase{devices: devices, perDevice: perDevice, accumulation: 1, lr: 1e-3, maxSteps: 6}}
		a := c.args(t.TempDir())
		a.SaveStrategy = "no"
		base := gpt2With(t, rt, 0)
		before := modelValues(t, base)
		tr, err := trainer.New(a, base, counting(40, 0), nil, trainer.Options{Runtime: rt, Logger: quiet(), PeftConfig: c.peftConfig()})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Train(context.Background()); err != nil {
			t.Fatal(err)
		}
		ad, ok := peft.Of(tr.Model())
		if !ok {
			t.Fatal("the trained model has no adapter")
		}
		after := modelValues(t, ad.Base())
		for name, v := range before {
			if fmt.Sprint(v) != fmt.Sprint(after[name]) {
				t.Errorf("base weight %s changed in LoRA training", name)
			}
		}
		return tr.Model(), modelValues(t, tr.Model())
	}
	_, one := run(1, 4)
	_, two := run(2, 2)
	worst := 0.0
	for name, v := range one {
		for i := range v {
			worst = max(worst, abs64(float64(v[i])-float64(two[name][i])))
		}
	}
	t.Logf("adapter after 6 steps: max |1 device - 2 devices| = %g", worst)
	if worst > 1e-6 {
		t.Errorf("adapters on 1 and 2 devices differ by %g > 1e-6", worst)
	}
}

func abs64(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// modelValues reads every parameter m lists (the adapter's for a LoRA model) to host float32.
func modelValues(t *testing.T, m models.Model) map[string][]float32 {
	t.Helper()
	dir := t.TempDir()
	if err := m.Save(dir, models.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	name := "model.safetensors"
	if _, ok := peft.Of(m); ok {
		name = "adapter_model.safetensors"
	}
	out, _, err := safetensors.ReadFloat32File(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return out
}
