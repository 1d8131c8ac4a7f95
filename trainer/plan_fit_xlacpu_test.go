//go:build !noxla

package trainer

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla/pjrttest"
)

// planFitVariants are the runs of the fit for each layer count: ± FSDP, ± LoRA (r 16
// all-linear), ± gradient checkpointing, float32 or bf16 base, two token counts.
var planFitVariants = []planVariant{
	{batch: 1, block: 256, fsdp: true},
	{batch: 1, block: 1024, fsdp: true},
	{batch: 1, block: 1024, fsdp: true, ckpt: true},
	{batch: 1, block: 256, fsdp: true, ckpt: true},
	{batch: 1, block: 256, fsdp: true, dtype: "bfloat16"},
	{batch: 1, block: 256, fsdp: true, dtype: "bfloat16", ckpt: true},
	{batch: 1, block: 256, fsdp: true, lora: true, dtype: "bfloat16"},
	{batch: 2, block: 1024, fsdp: true, lora: true, dtype: "bfloat16"},
	{batch: 1, block: 256, fsdp: true, lora: true, dtype: "bfloat16", ckpt: true},
	{batch: 2, block: 1024, fsdp: true, lora: true, dtype: "bfloat16", ckpt: true},
	{batch: 1, block: 256, fsdp: true, lora: true},
	{batch: 1, block: 256, lora: true, dtype: "bfloat16"},
	{batch: 1, block: 256, lora: true, dtype: "bfloat16", ckpt: true},
	{batch: 1, block: 256},
}

// BenchmarkPlanFitLlama8BCuts compiles (without running) the train step of cut-down versions of
// Llama-3.1-8B (its widths and vocabulary, 1, 2 and 4 layers) on 8 devices of XLA's CPU plugin
// and prints the compiler's figures next to the planner's: the data the planner's memory model
// (plan_xla.go) is fitted on. It is a benchmark, not a test, because it takes tens of minutes on
// two cores: `make plan-fit` runs it (GOTPU_PLAN_FIT=quick: one variant per layer count;
// GOTPU_PLAN_FIT_ONLY=substring keeps the variants whose name has it). GOTPU_PLAN_FIT_OUT=FILE
// writes the compiler's figures as JSON: testdata/plan/fit/llama3.1-8b-cuts.json is such a file,
// which TestPlanMatchesRecordedCompilerFigures checks the planner against on every run. It fails
// when a total is off by more than 10%.
func BenchmarkPlanFitLlama8BCuts(b *testing.B) {
	var t testing.TB = b
	mode := os.Getenv("GOTPU_PLAN_FIT")
	rt := pjrttest.OpenCPUPlugin(t, 8)
	dir := t.TempDir()
	var variants []planVariant
	for _, l := range []int{1, 2, 4} {
		for _, v := range planFitVariants {
			v.layers = l
			variants = append(variants, v)
			if mode == "quick" {
				break
			}
		}
	}
	if only := os.Getenv("GOTPU_PLAN_FIT_ONLY"); only != "" {
		var keep []planVariant
		for _, v := range variants {
			if strings.Contains(v.String(), only) {
				keep = append(keep, v)
			}
		}
		variants = keep
	}
	var rows []string
	var records []planFitRecord
	for _, v := range variants {
		cfg := cutConfig(t, planFitConfig, v.layers, dir)
		c, err := CompilePlanShapes(context.Background(), rt, planFitRequest(cfg, v))
		if err != nil {
			t.Errorf("%s: %v", v, err)
			continue
		}
		m, p := c.Stats, c.Plan
		records = append(records, planFitRecord{Variant: v.String(), Layers: v.layers, Batch: v.batch, Block: v.block,
			FSDP: v.fsdp, LoRA: v.lora, Checkpointing: v.ckpt, DType: v.dtype, Argument: m.Argument, Output: m.Output,
			Alias: m.Alias, Temp: m.Temp, Code: m.GeneratedCode, Seconds: c.Seconds})
		if out := os.Getenv("GOTPU_PLAN_FIT_OUT"); out != "" {
			// Written after every variant, so an interrupted run keeps what it measured.
			js, _ := json.MarshalIndent(records, "", "  ")
			if err := os.WriteFile(out, append(js, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		row := planFitRow(v, m.Argument, m.Output, m.Alias, m.Temp, m.Total(), p)
		t.Logf("%s (%.0fs)", row, c.Seconds)
		rows = append(rows, row)
		if ratio := float64(p.Total) / float64(m.Total()); ratio < 0.9 || ratio > 1.1 {
			t.Errorf("%s: planner %d bytes, compiler %d: off by more than 10%%", v, p.Total, m.Total())
		}
	}
	t.Logf("planner vs compiler, GiB per device:\n%s", strings.Join(rows, "\n"))
}

// TestPlanMatchesCompilerSmallLlamaOnXLACPU is the CI-sized check of the fitted model: a small
// Llama with the 8B's structure (grouped-query attention 4:1, intermediate 3.5 × hidden, a
// vocabulary about 31 × hidden, heads × block over hidden + intermediate as the 8B at 256 tokens)
// compiled without running on 8 XLA CPU devices,
// FSDP full fine-tuning with and without checkpointing and LoRA on a bf16 base with it: the
// planner's total within 10% of the compiler's for each.
func TestPlanMatchesCompilerSmallLlamaOnXLACPU(t *testing.T) {
	rt := pjrttest.OpenCPUPlugin(t, 8)
	dir := t.TempDir()
	raw := `{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 1024, "intermediate_size": 3584,
		"num_attention_heads": 16, "num_key_value_heads": 4, "num_hidden_layers": 2, "vocab_size": 32064,
		"max_position_embeddings": 1024, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": false}`
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := models.ParseConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []planVariant{
		{layers: 2, batch: 2, block: 128, fsdp: true},
		{layers: 2, batch: 2, block: 128, fsdp: true, ckpt: true},
		{layers: 2, batch: 2, block: 128, fsdp: true, lora: true, dtype: "bfloat16", ckpt: true},
	} {
		c, err := CompilePlanShapes(context.Background(), rt, planFitRequest(cfg, v))
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		m, p := c.Stats, c.Plan
		t.Logf("%s (%.1fs)", planFitRow(v, m.Argument, m.Output, m.Alias, m.Temp, m.Total(), p), c.Seconds)
		if ratio := float64(p.Total) / float64(m.Total()); ratio < 0.9 || ratio > 1.1 {
			t.Errorf("%s: planner %d bytes, compiler %d (plan/xla %.3f): off by more than 10%%", v, p.Total, m.Total(), ratio)
		}
	}
}
