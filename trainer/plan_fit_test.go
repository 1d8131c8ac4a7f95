package trainer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
)

// planFitConfig is the 8B config the planner is fitted against (Llama-3.1-8B-Instruct's
// config.json, copied from the shared fixture store's hf-files/configs).
const planFitConfig = "../testdata/hf-configs/llama3.1-8b-instruct_config.json"

// cutConfig writes cfgPath with num_hidden_layers set to layers into dir and parses it.
func cutConfig(t testing.TB, cfgPath string, layers int, dir string) models.Config {
	t.Helper()
	b, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Skipf("the 8B config is not here (%v)", err)
	}
	var raw map[string]any
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	raw["num_hidden_layers"] = layers
	out, _ := json.Marshal(raw)
	path := filepath.Join(dir, fmt.Sprintf("config-%dl.json", layers))
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := models.ParseConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// planVariant is one run of the planner-vs-compiler fit.
type planVariant struct {
	layers, batch, block int
	fsdp, lora, ckpt     bool
	dtype                string // parameters' dtype: "" float32, "bfloat16"
}

func (v planVariant) String() string {
	var parts []string
	parts = append(parts, fmt.Sprintf("L%d b%d×%d", v.layers, v.batch, v.block))
	if v.fsdp {
		parts = append(parts, "fsdp")
	} else {
		parts = append(parts, "dp")
	}
	if v.lora {
		parts = append(parts, "lora")
	} else {
		parts = append(parts, "full")
	}
	if v.dtype == "bfloat16" {
		parts = append(parts, "bf16-base")
	} else {
		parts = append(parts, "f32")
	}
	if v.ckpt {
		parts = append(parts, "ckpt")
	}
	return strings.Join(parts, " ")
}

// planFitRequest is the PlanRequest of a variant: bf16 mixed precision, AdamW, LoRA r 16
// all-linear.
func planFitRequest(cfg models.Config, v planVariant) PlanRequest {
	a := DefaultTrainingArguments()
	a.BF16, a.PerDeviceTrainBatchSize, a.GradientCheckpointing = true, v.batch, v.ckpt
	req := PlanRequest{Model: cfg, Args: a, BlockSize: v.block, FSDP: v.fsdp, ParamDType: v.dtype}
	if v.lora {
		lc := peft.DefaultLoraConfig()
		lc.R, lc.LoraAlpha, lc.LoraDropout = 16, 32, 0.05
		lc.TargetModules, lc.TargetModulesRegex = peft.CommandLineTargets([]string{"all-linear"})
		req.Lora = &lc
	}
	return req
}

// planFitRecord is one compiled variant: what testdata/plan/fit holds.
type planFitRecord struct {
	Variant                             string
	Layers, Batch, Block                int
	FSDP, LoRA, Checkpointing           bool
	DType                               string
	Argument, Output, Alias, Temp, Code int64
	Seconds                             float64
}

func (r planFitRecord) variant() planVariant {
	return planVariant{layers: r.Layers, batch: r.Batch, block: r.Block, fsdp: r.FSDP, lora: r.LoRA, ckpt: r.Checkpointing, dtype: r.DType}
}

func (r planFitRecord) total() int64 { return r.Argument + r.Output - r.Alias + r.Temp + r.Code }

// planFitRecorded is the compiler's figures the planner was fitted on
// (BenchmarkPlanFitLlama8BCuts with GOTPU_PLAN_FIT_OUT).
const planFitRecorded = "../testdata/plan/fit/llama3.1-8b-cuts.json"

// TestPlanMatchesRecordedCompilerFigures checks the planner against XLA's compiled memory
// figures recorded for Llama-3.1-8B cut to 1, 2 and 4 layers on 8 XLA CPU devices (± FSDP,
// ± LoRA r 16 all-linear, ± gradient checkpointing, float32 or bf16 base; the record of
// BenchmarkPlanFitLlama8BCuts): every total within 10%. It prints the planner-vs-compiler
// table of docs/memory-plan.md.
func TestPlanMatchesRecordedCompilerFigures(t *testing.T) {
	b, err := os.ReadFile(planFitRecorded)
	if err != nil {
		t.Fatal(err)
	}
	var records []planFitRecord
	if err := json.Unmarshal(b, &records); err != nil {
		t.Fatalf("%s: %v", planFitRecorded, err)
	}
	if len(records) < 40 {
		t.Fatalf("%s: %d records, want the 1/2/4-layer variants", planFitRecorded, len(records))
	}
	dir := t.TempDir()
	var rows []string
	worst := 0.0
	for _, r := range records {
		v := r.variant()
		cfg := cutConfig(t, planFitConfig, v.layers, dir)
		req := planFitRequest(cfg, v)
		req.Devices, req.Targets = 8, []PlanTarget{{Name: "cpu", Devices: 8, HBM: 1 << 62}}
		p, err := PlanFSDP(req)
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		rows = append(rows, planFitRow(v, r.Argument, r.Output, r.Alias, r.Temp, r.total(), p))
		ratio := float64(p.Total) / float64(r.total())
		worst = max(worst, abs(ratio-1))
		if ratio < 0.9 || ratio > 1.1 {
			t.Errorf("%s: planner %d bytes, compiler %d (plan/xla %.3f): off by more than 10%%", v, p.Total, r.total(), ratio)
		}
	}
	t.Logf("planner vs compiler (%s), GiB per device; worst %.1f%%:\n%s", filepath.Base(planFitRecorded), 100*worst,
		strings.Join(rows, "\n"))
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// planFitRow is one line of the planner-vs-compiler table.
func planFitRow(v planVariant, arg, out, alias, temp, total int64, p Plan) string {
	return fmt.Sprintf("%-34s arg %6.3f out %6.3f alias %6.3f temp %6.3f total %6.3f | plan persist %6.3f upd %6.3f trans %6.3f total %6.3f | plan/xla %.3f",
		v, gib(arg), gib(out), gib(alias), gib(temp), gib(total), gib(p.Persistent), gib(p.Updated),
		gib(p.Total-p.Persistent-p.Updated), gib(p.Total), float64(p.Total)/float64(total))
}

func gib(b int64) float64 { return float64(b) / (1 << 30) }
