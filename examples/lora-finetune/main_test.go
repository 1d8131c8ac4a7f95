package main

import (
	"context"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/xla"
)

const testTokenizer = "../../testdata/tokenizers/mistral-7b/tokenizer.json.gz"

// mergeTolerance bounds |held-out loss of the merged model − that of the adapted model|. The two
// compute the same function and differ only in float32 rounding: the merged weight W + s·B·A is
// rounded once to float32 (relative error 2⁻²⁴ ≈ 6e-8 per weight) where the adapted model adds
// two separately rounded products, so each logit moves by a few ulps and the mean cross-entropy
// (~4 nats in this test, float32 ulp 4.8e-7) by about that much (measured: 1.2e-7 and 2.5e-7 in
// this test's runs, 9e-16 and 0 in the README's). 1e-4 is ~200 ulps of the loss: no rounding
// reaches it, and a wrong merge (no scaling, a transposed delta, a missed layer) moves the loss
// by about the adapter's whole effect, which the test requires to be at least 100 times the
// tolerance.
const mergeTolerance = 1e-4

func shortOptions(t *testing.T) options {
	o := defaultOptions()
	o.baseSteps, o.maxSteps, o.blockSize, o.batch, o.gradAccum, o.vocab = 20, 20, 32, 4, 2, 256
	o.evalEvery, o.saveEvery, o.trainBytes, o.evalBlocks = 10, 10, 32<<10, 8
	o.outputDir = t.TempDir()
	o.tokenizerPath, o.device, o.quiet = testTokenizer, "go", true
	o.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return o
}

// TestLoRAFineTune runs the example small (a base model trained in full on code, LoRA r 8 on every
// linear layer adapting it to comments) and checks the outcomes it reports: the held-out
// perplexity drops; only the adapter is trained, with a matching optimizer state far below full
// fine-tuning's; the adapter's files have PEFT's names and reload to the same model; the merged
// model reloads with models.Load as a plain Llama whose held-out loss is the adapted model's.
func TestLoRAFineTune(t *testing.T) {
	o := shortOptions(t)
	res, err := run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	res.print(&out)
	t.Log("\n" + out.String())
	if res.baseSteps != o.baseSteps || res.steps != o.maxSteps {
		t.Fatalf("trained %d base and %d LoRA steps, want %d and %d", res.baseSteps, res.steps, o.baseSteps, o.maxSteps)
	}
	if !(res.after < res.before) {
		t.Errorf("held-out loss %.5f before, %.5f after LoRA: want lower after", res.before, res.after)
	}

	// Llama-tiny's shape: 2 layers × 7 linear layers (q k v o gate up down); the head is not one.
	const layers, r = 2, 8
	if len(res.targets) != 2*7 {
		t.Fatalf("adapted %d layers (%v), want the 14 linear layers of 2 Llama blocks", len(res.targets), res.targets)
	}
	// Each block: q 64→64, k 64→32, v 64→32, o 64→64, gate 64→128, up 64→128, down 128→64; an
	// adapted in→out layer has r·in + out·r parameters.
	var want int64
	for _, d := range [][2]int{{64, 64}, {64, 32}, {64, 32}, {64, 64}, {64, 128}, {64, 128}, {128, 64}} {
		want += int64(r * (d[0] + d[1]))
	}
	want *= layers
	if res.trainable != want || res.all <= res.trainable {
		t.Errorf("trainable %d of %d parameters, want %d of more", res.trainable, res.all, want)
	}
	// AdamW keeps two float32 moments per trained parameter: the adapter's only.
	if res.loraOptBytes != 8*res.trainable {
		t.Errorf("LoRA optimizer state %d bytes, want 8 × %d trainable parameters", res.loraOptBytes, res.trainable)
	}
	if res.fullOptBytes != 8*(res.all-res.trainable) {
		t.Errorf("full fine-tuning optimizer state %d bytes, want 8 × the base model's %d parameters", res.fullOptBytes, res.all-res.trainable)
	}

	checkAdapterFiles(t, res, o)

	// The saved adapter on the base read back from disk is the model just trained: the same
	// weights through the same programs.
	if res.reloaded != res.after {
		t.Errorf("adapter reloaded with peft.Load: held-out loss %.9f, the adapted model's %.9f", res.reloaded, res.after)
	}
	if d := math.Abs(res.merged - res.after); d > mergeTolerance {
		t.Errorf("merged model: held-out loss %.9f, adapted %.9f: |difference| %.2e above %.0e", res.merged, res.after, d, mergeTolerance)
	}
	if effect := math.Abs(res.before - res.after); effect < 100*mergeTolerance {
		t.Errorf("the adapter moved the held-out loss by only %.2e: too little for the merge check to tell a merged model from the base", effect)
	}
	checkMergedModel(t, res)
}

// checkAdapterFiles: adapter_config.json is PEFT's (r, alpha, dropout, the expanded targets) and
// adapter_model.safetensors holds exactly lora_A [r, in] and lora_B [out, r] per adapted layer
// under PEFT's names, metadata format "pt"; the adapter checkpoints hold the adapter, not the model.
func checkAdapterFiles(t *testing.T, res *result, o options) {
	t.Helper()
	cfg, err := peft.ReadConfig(filepath.Join(res.adapterDir, peft.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.PeftType != "LORA" || cfg.BaseModelNameOrPath != res.baseDir || cfg.R != o.loraR || cfg.LoraAlpha != o.loraAlpha || cfg.LoraDropout != o.loraDropout ||
		cfg.TaskType != "CAUSAL_LM" || !slices.Equal(slices.Sorted(slices.Values(cfg.TargetModules)), slices.Sorted(slices.Values(res.targets))) {
		// all-linear is saved expanded to the module names (fewer than 20 of them), as PEFT saves it.
		t.Errorf("adapter_config.json: peft_type %s, base_model_name_or_path %q, r %d, lora_alpha %v, lora_dropout %v, task_type %s, target_modules %v; want LORA, %q, %d, %v, %v, CAUSAL_LM, %v",
			cfg.PeftType, cfg.BaseModelNameOrPath, cfg.R, cfg.LoraAlpha, cfg.LoraDropout, cfg.TaskType, cfg.TargetModules,
			res.baseDir, o.loraR, o.loraAlpha, o.loraDropout, res.targets)
	}
	f, err := safetensors.Open(filepath.Join(res.adapterDir, peft.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Metadata()["format"] != "pt" {
		t.Errorf("adapter metadata %v, want format pt", f.Metadata())
	}
	key := regexp.MustCompile(`^base_model\.model\.(model\.layers\.[01]\.(?:self_attn|mlp)\.[a-z]+_proj)\.lora_([AB])\.weight$`)
	names := f.Names()
	if len(names) != 2*len(res.targets) {
		t.Errorf("%d adapter tensors, want lora_A and lora_B for each of %d layers: %v", len(names), len(res.targets), names)
	}
	for _, n := range names {
		m := key.FindStringSubmatch(n)
		if m == nil || !slices.Contains(res.targets, m[1]) {
			t.Errorf("adapter tensor %q: not PEFT's base_model.model.<adapted module>.lora_{A,B}.weight", n)
			continue
		}
		info, _ := f.Info(n)
		if info.DType != safetensors.F32 || (m[2] == "A" && info.Shape[0] != o.loraR) || (m[2] == "B" && info.Shape[1] != o.loraR) {
			t.Errorf("adapter tensor %s: %s %v, want float32 with r=%d on the rank side", n, info.DType, info.Shape, o.loraR)
		}
	}
	for _, step := range []int{o.saveEvery, o.maxSteps} {
		dir := filepath.Join(res.adapterDir, "checkpoint-"+strconv.Itoa(step))
		for _, name := range []string{peft.ConfigFile, peft.WeightsFile, "optimizer.safetensors"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Errorf("checkpoint: %v", err)
			}
		}
		for _, name := range []string{"model.safetensors", "config.json"} {
			if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
				t.Errorf("%s holds %s: an adapter run's checkpoint holds the adapter only", dir, name)
			}
		}
	}
}

// checkMergedModel: the merged directory is a plain HF Llama (config.json, model.safetensors, no
// adapter file, no LoRA tensor) that models.Load reads without an adapter.
func checkMergedModel(t *testing.T, res *result) {
	t.Helper()
	for _, name := range []string{peft.ConfigFile, peft.WeightsFile} {
		if _, err := os.Stat(filepath.Join(res.mergedDir, name)); err == nil {
			t.Errorf("the merged model's directory holds %s", name)
		}
	}
	f, err := safetensors.Open(filepath.Join(res.mergedDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, n := range f.Names() {
		if strings.Contains(n, "lora") || strings.HasPrefix(n, peft.KeyPrefix) {
			t.Errorf("merged model tensor %s", n)
		}
	}
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	m, err := models.Load(context.Background(), rt, res.mergedDir, models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, isAdapter := peft.Of(m); isAdapter || m.Architecture() != "LlamaForCausalLM" {
		t.Errorf("merged model loads as %s (adapter: %v), want a plain LlamaForCausalLM", m.Architecture(), isAdapter)
	}
}
