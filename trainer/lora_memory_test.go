package trainer_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/trainer"
)

// The benchmark GPT-2 of `make bench`'s step benchmarks (trainer/step: BenchmarkVsPyTorch's
// benchVocab… constants, BenchmarkTrainStep's fullShape): vocab 8192, d 256, 4 layers, 4 heads,
// 128 positions, batch 8 × seq 128, dropout 0.
const (
	loraBenchVocab, loraBenchEmbd, loraBenchLayers, loraBenchHeads = 8192, 256, 4, 4
	loraBenchSeq, loraBenchBatch                                   = 128, 8
)

func benchGPT2Config() *gpt2.Config {
	cfg := gpt2.DefaultConfig()
	cfg.VocabSize, cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = loraBenchVocab, loraBenchEmbd, loraBenchLayers, loraBenchHeads, loraBenchSeq
	cfg.ResidPdrop, cfg.EmbdPdrop, cfg.AttnPdrop = 0, 0, 0
	return cfg
}

// gpt2LoRAConfig is LoRA r 8 (alpha 16, dropout 0.05) on c_attn. GPT-2 has no q_proj/v_proj: its
// attention's query, key and value projections are one Conv1D, c_attn (d → 3d), and c_attn is
// PEFT's default target for GPT-2 (TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING), the
// counterpart of q_proj,v_proj on Llama; the adapter spans all three projections (lora_B is
// [3d, r]).
func gpt2LoRAConfig() peft.LoraConfig {
	c := peft.DefaultLoraConfig()
	c.R, c.LoraAlpha, c.LoraDropout, c.TargetModules = 8, 16, 0.05, []string{"c_attn"}
	return c
}

// TestLoRAOptimizerStateBytes: on the benchmark GPT-2, LoRA r 8 on c_attn keeps AdamW state for
// the adapter only — 2 float32 moments × 4 layers × (lora_A 8×256 + lora_B 768×8) = 262,144
// bytes — against 8 bytes per parameter of the whole model for full fine-tuning (42,315,776):
// 99.38% less, and the goal is at least 95% less. The counts are exact: they follow from the
// shapes alone.
func TestLoRAOptimizerStateBytes(t *testing.T) {
	rt := openRT(t, 1)
	cfg := benchGPT2Config()
	const d, layers, r = loraBenchEmbd, loraBenchLayers, 8
	// GPT-2's parameters: wte, wpe, ln_f, and per block ln_1, c_attn (d→3d), c_proj (d→d), ln_2,
	// mlp c_fc (d→4d) and c_proj (4d→d), each linear with a bias (the head is tied to wte).
	block := 2*d + (d*3*d + 3*d) + (d*d + d) + 2*d + (d*4*d + 4*d) + (4*d*d + d)
	allParams := int64(loraBenchVocab*d + loraBenchSeq*d + 2*d + layers*block)
	adapterParams := int64(layers * (r*d + 3*d*r))

	counts := map[bool][2]int64{} // LoRA? → optimizer bytes, trainable parameters
	for _, lora := range []bool{false, true} {
		m, err := models.New(context.Background(), rt, cfg, models.NewOptions{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		opts := trainer.Options{Runtime: rt, Logger: quiet()}
		if lora {
			c := gpt2LoRAConfig()
			opts.PeftConfig = &c
		}
		tr, err := trainer.New(microArgs(t.TempDir()), m, counting(16, 0), nil, opts)
		if err != nil {
			t.Fatal(err)
		}
		trainable, all := tr.ParamCounts()
		wantTrainable, wantAll := allParams, allParams
		if lora {
			wantTrainable, wantAll = adapterParams, allParams+adapterParams
		}
		if trainable != wantTrainable || all != wantAll {
			t.Errorf("LoRA %v: %d trainable of %d parameters, want %d of %d", lora, trainable, all, wantTrainable, wantAll)
		}
		counts[lora] = [2]int64{tr.OptimizerStateBytes(), trainable}
		tr.Close()
	}
	full, lora := counts[false][0], counts[true][0]
	if full != 8*allParams || lora != 8*adapterParams {
		t.Errorf("optimizer state: full fine-tuning %d bytes, LoRA %d; want AdamW's 8 bytes per trained parameter: %d and %d",
			full, lora, 8*allParams, 8*adapterParams)
	}
	reduction := 1 - float64(lora)/float64(full)
	t.Logf("optimizer state: full %d bytes, LoRA r 8 on c_attn %d bytes: %.2f%% less", full, lora, 100*reduction)
	if reduction < 0.95 {
		t.Errorf("LoRA keeps %d optimizer bytes against %d for full fine-tuning: %.2f%% less, want at least 95%%", lora, full, 100*reduction)
	}
}

// TestLoRACheckpointHoldsOnlyTheAdapter: a LoRA run's checkpoint (save_steps) is PEFT's adapter
// directory plus the training state: adapter_config.json, adapter_model.safetensors with exactly
// the adapter's base_model.model.*.lora_{A,B}.weight tensors, and optimizer.safetensors with
// exactly adamw_m/ and adamw_v/ of each of them; no model.safetensors or config.json, and no file
// holds a tensor of the frozen base model.
func TestLoRACheckpointHoldsOnlyTheAdapter(t *testing.T) {
	rt := openRT(t, 1)
	out := t.TempDir()
	c := gpt2LoRAConfig()
	tr, err := trainer.New(microArgs(out), tinyGPT2(t, rt), counting(16, 0), nil,
		trainer.Options{Runtime: rt, Logger: quiet(), PeftConfig: &c})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	var adapter []string // tinyGPT2 has 2 blocks
	for _, l := range []string{"0", "1"} {
		for _, f := range []string{"A", "B"} {
			adapter = append(adapter, "base_model.model.transformer.h."+l+".attn.c_attn.lora_"+f+".weight")
		}
	}
	var moments []string
	for _, kind := range []string{"adamw_m/", "adamw_v/"} {
		for _, n := range adapter {
			moments = append(moments, kind+n)
		}
	}
	var base []string
	for _, p := range tinyGPT2(t, rt).Params() {
		base = append(base, p.Name)
	}
	slices.Sort(adapter)
	slices.Sort(moments)

	for _, step := range []string{"checkpoint-2", "checkpoint-4"} { // microArgs: 4 steps, save every 2
		dir := filepath.Join(out, step)
		cfg, err := peft.ReadConfig(filepath.Join(dir, peft.ConfigFile))
		if err != nil {
			t.Fatal(err)
		}
		if cfg.R != 8 || cfg.LoraAlpha != 16 || !slices.Equal(cfg.TargetModules, []string{"c_attn"}) || !cfg.FanInFanOut {
			t.Errorf("%s: r %d, lora_alpha %v, target_modules %v, fan_in_fan_out %v; want 8, 16, [c_attn], true (GPT-2's Conv1D)",
				step, cfg.R, cfg.LoraAlpha, cfg.TargetModules, cfg.FanInFanOut)
		}
		if got := tensorNames(t, filepath.Join(dir, peft.WeightsFile)); !slices.Equal(got, adapter) {
			t.Errorf("%s/%s holds %v, want the adapter's %v", step, peft.WeightsFile, got, adapter)
		}
		if got := tensorNames(t, filepath.Join(dir, "optimizer.safetensors")); !slices.Equal(got, moments) {
			t.Errorf("%s/optimizer.safetensors holds %v, want AdamW's moments of the adapter only: %v", step, got, moments)
		}
		for _, name := range []string{"model.safetensors", "config.json"} {
			if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
				t.Errorf("%s/%s: %v; a LoRA checkpoint must not hold the base model", step, name, err)
			}
		}
		files, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			for _, n := range tensorNames(t, f) {
				if slices.Contains(base, n) || slices.ContainsFunc(base, func(b string) bool { return strings.HasSuffix(n, "/"+b) }) {
					t.Errorf("%s holds %s, a tensor of the frozen base model", f, n)
				}
			}
		}
	}
}

// tensorNames lists a safetensors file's tensors, sorted.
func tensorNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := f.Names()
	slices.Sort(names)
	return names
}
