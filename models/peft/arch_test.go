package peft_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/peft"
)

// TestEveryArchitecture: an all-linear adapter with both factors non-zero on every architecture's
// fixture moves the logits, gives every factor a gradient, saves and reloads bitwise, and merged
// into the base weights gives the adapted model's logits (float32 noise: 2e-5). A wrong
// transposition, scaling or missing module in any architecture breaks the last check.
func TestEveryArchitecture(t *testing.T) {
	rt := openGo(t)
	ctx := context.Background()
	for _, fx := range []struct {
		name   string
		rslora bool
	}{{"gpt2-tiny", false}, {"llama-tiny", true}, {"qwen3-tiny", false}, {"gemma3-tiny", true}, {"bert-tiny", false}} {
		t.Run(fx.name, func(t *testing.T) {
			dir := filepath.Join(modelsDir(t), fx.name)
			in := fixtureBatch(t, dir)
			load := func() models.Model {
				m, err := models.Load(ctx, rt, dir, models.LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			base := load()
			plain, err := core.Run(rt.Backend(), base, in, false)
			if err != nil {
				t.Fatal(err)
			}
			cfg := peft.DefaultLoraConfig()
			cfg.R, cfg.LoraAlpha, cfg.UseRSLoRA, cfg.InitLoraWeights = 4, 8, fx.rslora, false
			cfg.TargetModulesRegex = peft.AllLinear
			m, err := peft.New(ctx, rt, base, cfg, peft.Options{Seed: 5})
			if err != nil {
				t.Fatal(err)
			}
			adapted, err := core.Run(rt.Backend(), m, in, true)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(plain.Logits, adapted.Logits); d < 1e-3 {
				t.Errorf("the adapter moves the logits by %g only", d)
			}
			for name, g := range adapted.Grads {
				if maxAbs(g) == 0 {
					t.Errorf("%s has a zero gradient", name)
				}
			}
			ad, _ := peft.Of(m)
			t.Logf("%d adapted layers, %d adapter tensors", len(ad.TargetModules()), len(m.Params()))
			saved := t.TempDir()
			if err := m.Save(saved, models.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			re, err := peft.Load(ctx, rt, load(), saved, peft.Options{})
			if err != nil {
				t.Fatal(err)
			}
			again, err := core.Run(rt.Backend(), re, in, false)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(adapted.Logits, again.Logits); d != 0 {
				t.Errorf("reloaded adapter: logits differ by %g", d)
			}
			merged, err := peft.Merge(ctx, re)
			if err != nil {
				t.Fatal(err)
			}
			mres, err := core.Run(rt.Backend(), merged, in, false)
			if err != nil {
				t.Fatal(err)
			}
			d := maxDiff(adapted.Logits, mres.Logits)
			t.Logf("merged vs adapted logits: max |d| %.2g", d)
			if d > 2e-5 {
				t.Errorf("merged model's logits differ from the adapted model's by %g", d)
			}
		})
	}
}

// fixtureBatch is a base fixture's batch (BERT's with its mask, token types and labels).
func fixtureBatch(t *testing.T, dir string) core.Inputs {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		InputIDs      [][]int         `json:"input_ids"`
		AttentionMask [][]int         `json:"attention_mask"`
		TokenTypeIDs  [][]int         `json:"token_type_ids"`
		Labels        json.RawMessage `json:"labels"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	mat := func(x [][]int) *tensors.Tensor {
		if x == nil {
			return nil
		}
		flat := make([]int32, 0, len(x)*len(x[0]))
		for _, row := range x {
			for _, v := range row {
				flat = append(flat, int32(v))
			}
		}
		return tensors.FromFlatDataAndDimensions(flat, len(x), len(x[0]))
	}
	in := core.Inputs{InputIDs: mat(r.InputIDs), AttentionMask: mat(r.AttentionMask), TokenTypeIDs: mat(r.TokenTypeIDs)}
	var classes []int32
	if json.Unmarshal(r.Labels, &classes) == nil && classes != nil {
		in.Labels = tensors.FromFlatDataAndDimensions(classes, len(classes))
	} else {
		in.Labels = in.InputIDs
	}
	return in
}

func maxDiff(a, b *tensors.Tensor) float64 {
	x, y := tensors.MustCopyFlatData[float32](a), tensors.MustCopyFlatData[float32](b)
	d := 0.0
	for i := range x {
		d = max(d, math.Abs(float64(x[i])-float64(y[i])))
	}
	return d
}

func maxAbs(a *tensors.Tensor) float64 {
	d := 0.0
	for _, v := range tensors.MustCopyFlatData[float32](a) {
		d = max(d, math.Abs(float64(v)))
	}
	return d
}
