package trainer

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/shard"
	"github.com/gotpu/gotpu/models"
	gpt2cfg "github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/peft"
)

func planConfig(t *testing.T, path ...string) models.Config {
	t.Helper()
	cfg, err := models.ParseConfig(filepath.Join(append([]string{"..", "testdata"}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func planArgs(batch int, bf16 bool) TrainingArguments {
	a := DefaultTrainingArguments()
	a.PerDeviceTrainBatchSize, a.BF16 = batch, bf16
	return a
}

func mustPlan(t *testing.T, req PlanRequest) Plan {
	t.Helper()
	p, err := PlanFSDP(req)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlanFSDPGPT2Exact: GPT-2 124M over 8 devices — every tensor has a dimension divisible by 8
// (wte [50257, 768] along 768) — keeps exactly 1/8 of the float32 parameters and AdamW moments
// per device; data parallel keeps all of them. The step's outputs are a second copy of that state
// (no aliasing), counted exactly; no whole gradient is held (they are reduce-scattered as they are
// produced: no accumulators, no gradient column); the transients (gathered layers, activations)
// are the fitted model's, positive, and the gathered layers only where weights are sharded.
func TestPlanFSDPGPT2Exact(t *testing.T) {
	cfg := planConfig(t, "hf-configs", "gpt2_lmhead_config.json")
	const params = 124_439_808
	args := planArgs(8, true)
	fsdp := mustPlan(t, PlanRequest{Model: cfg, Args: args, FSDP: true, Devices: 8})
	dp := mustPlan(t, PlanRequest{Model: cfg, Args: args, Devices: 8})
	if fsdp.Params != params || fsdp.Tensors != 148 || fsdp.BlockSize != 1024 || fsdp.Devices != 8 {
		t.Errorf("plan header %+v", fsdp)
	}
	check := func(name string, b PlanBytes, kept int64, gathered bool) {
		t.Helper()
		want := PlanBytes{Parameters: kept * 4, Optimizer: kept * 8, Updated: kept * 12, Gathered: b.Gathered, Activations: b.Activations}
		want.Persistent = want.Parameters + want.Optimizer
		want.Total = want.Persistent + want.Updated + want.Gathered + want.Activations
		if b != want || b.Activations <= 0 || (b.Gathered > 0) != gathered {
			t.Errorf("%s: %+v, want %+v (gathered layers %v)", name, b, want, gathered)
		}
	}
	check("fsdp over 8", fsdp.PlanBytes, params/8, true)
	check("data parallel", dp.PlanBytes, params, false)
	if len(fsdp.Rows) != len(PlanTargets()) {
		t.Fatalf("%d rows", len(fsdp.Rows))
	}
	for _, r := range fsdp.Rows {
		check(r.Target.Name, r.PlanBytes, params/int64(r.Target.Devices), r.Target.Devices > 1) // one device: nothing is sharded
		if r.Err != nil || r.Fits != (r.Total <= r.Target.HBM) {
			t.Errorf("row %s: %+v", r.Target.Name, r)
		}
	}
	// A bf16 base keeps 2 bytes a parameter and AdamW's moments in bf16 (torch's AdamW).
	bf := mustPlan(t, PlanRequest{Model: cfg, Args: args, FSDP: true, Devices: 8, ParamDType: "bfloat16"})
	if bf.Parameters != params/8*2 || bf.Optimizer != params/8*4 || bf.Updated != params/8*6 {
		t.Errorf("bf16 base over 8: %+v", bf.PlanBytes)
	}
}

// TestPlanFSDPFixturesPersistent: the fixtures' persistent bytes over 8 devices (what the FSDP
// step's measurement on gotpu's CPU backend is compared with). Every tensor of the decoder
// fixtures divides by 8 (so exactly 12/8 bytes per parameter); BERT's 3-label classifier bias
// does not, and is refused naming it unless min_num_params keeps it replicated.
func TestPlanFSDPFixturesPersistent(t *testing.T) {
	for _, name := range []string{"gpt2-tiny", "gpt2-tiny-affine", "llama-tiny", "qwen3-tiny", "gemma3-tiny"} {
		cfg := planConfig(t, "models", name, "config.json")
		p := mustPlan(t, PlanRequest{Model: cfg, Args: planArgs(2, false), FSDP: true, Devices: 8})
		if p.Persistent != p.Params*12/8 || p.Parameters*3 != p.Persistent || p.Params%8 != 0 {
			t.Errorf("%s: %d parameters, persistent %d bytes per device; want %d", name, p.Params, p.Persistent, p.Params*12/8)
		}
		t.Logf("%s: %d parameters, %d persistent bytes per device of 8", name, p.Params, p.Persistent)
	}

	bert := planConfig(t, "models", "bert-tiny", "config.json")
	_, err := PlanFSDP(PlanRequest{Model: bert, Args: planArgs(2, false), FSDP: true, Devices: 8})
	if !errors.Is(err, shard.ErrUneven) || !strings.Contains(err.Error(), "classifier.bias") {
		t.Errorf("bert-tiny over 8: %v", err)
	}
	p := mustPlan(t, PlanRequest{Model: bert, Args: planArgs(2, false), FSDP: true, Devices: 8, MinNumParams: 4})
	// classifier.bias [3] replicated; every other tensor (classifier.weight [3, 64] along 64)
	// divides by 8.
	if want := ((p.Params-3)/8 + 3) * 12; p.Persistent != want {
		t.Errorf("bert-tiny, min_num_params 4: persistent %d, want %d", p.Persistent, want)
	}
	for _, r := range p.Rows {
		if r.Err != nil {
			t.Errorf("bert-tiny row %s: %v", r.Target.Name, r.Err)
		}
	}
	// Without min_num_params the multi-device rows are refused, the single-GPU ones are not.
	p = mustPlan(t, PlanRequest{Model: bert, Args: planArgs(2, false), FSDP: true})
	for _, r := range p.Rows {
		if (r.Err != nil) != (r.Target.Devices > 1) || (r.Err != nil && r.Fits) {
			t.Errorf("bert-tiny row %s: err %v, fits %v", r.Target.Name, r.Err, r.Fits)
		}
	}
}

// planFits returns whether req fits on target with and without FSDP.
func planFits(t *testing.T, req PlanRequest, target string) (sharded, replicated bool) {
	t.Helper()
	tg, ok := LookupPlanTarget(target)
	if !ok {
		t.Fatalf("no target %s", target)
	}
	req.Targets = []PlanTarget{tg}
	req.FSDP = true
	s := mustPlan(t, req)
	req.FSDP = false
	r := mustPlan(t, req)
	return s.Rows[0].Fits, r.Rows[0].Fits
}

// TestPlanAcceptance pins the fit results `gotpu plan --bf16` gives for the hub configs (the
// golden files in testdata/plan show the tables), with the state's second copy (the step's
// outputs, not aliased) and the transients fitted to XLA's compiled figures:
//   - Llama-2-7B fits only sharded on v5p-8 at batch 1 × 1024 and 1 × 512; it fits nowhere on
//     v5e-8, sharded or not: its sharded float32 state and that state's second copy alone exceed
//     a v5e chip's 16 GiB; one H200 cannot hold the whole state twice;
//   - Llama-3.2-1B fits only sharded on v5e-8 at batch 1 × 512;
//   - GPT-2 124M fits on v5e-8 either way at batch 1 × 1024, and neither way at the default
//     batch 8 × 1024 (its activations).
func TestPlanAcceptance(t *testing.T) {
	llama7 := planConfig(t, "hf-configs", "llama2-7b-chat_config.json")
	llama1 := planConfig(t, "hf-configs", "llama3.2-1b_config.json")
	gpt2 := planConfig(t, "hf-configs", "gpt2_lmhead_config.json")
	for _, c := range []struct {
		name             string
		req              PlanRequest
		target           string
		sharded, replica bool
	}{
		{"llama2-7b b1x1024 v5p-8", PlanRequest{Model: llama7, Args: planArgs(1, true), BlockSize: 1024}, "v5p-8", true, false},
		{"llama2-7b b1x512 v5p-8", PlanRequest{Model: llama7, Args: planArgs(1, true), BlockSize: 512}, "v5p-8", true, false},
		{"llama2-7b b1x1024 v5e-8", PlanRequest{Model: llama7, Args: planArgs(1, true), BlockSize: 1024}, "v5e-8", false, false},
		{"llama2-7b defaults v5e-8", PlanRequest{Model: llama7, Args: planArgs(8, true)}, "v5e-8", false, false},
		// One H200: 6.74B float32 parameters and moments (81 GB) and their second copy (the
		// step's outputs, not aliased) are more than its 141 GB.
		{"llama2-7b b1x1024 h200", PlanRequest{Model: llama7, Args: planArgs(1, true), BlockSize: 1024}, "h200", false, false},
		{"llama3.2-1b b1x512 v5e-8", PlanRequest{Model: llama1, Args: planArgs(1, true), BlockSize: 512}, "v5e-8", true, false},
		{"llama3.2-1b defaults v5e-8", PlanRequest{Model: llama1, Args: planArgs(8, true)}, "v5e-8", false, false},
		{"gpt2 b1x1024 v5e-8", PlanRequest{Model: gpt2, Args: planArgs(1, true), BlockSize: 1024}, "v5e-8", true, true},
		{"gpt2 defaults v5e-8", PlanRequest{Model: gpt2, Args: planArgs(8, true)}, "v5e-8", false, false},
	} {
		s, r := planFits(t, c.req, c.target)
		if s != c.sharded || r != c.replica {
			t.Errorf("%s: fits sharded %v, replicated %v; want %v, %v", c.name, s, r, c.sharded, c.replica)
		}
	}
	// The 7B's float32 state sharded over 8 and its second copy alone exceed a v5e chip: no batch
	// or block size makes full float32 training fit there.
	p := mustPlan(t, PlanRequest{Model: llama7, Args: planArgs(1, true), BlockSize: 1, FSDP: true, Devices: 8})
	if tg, _ := LookupPlanTarget("v5e-8"); p.Persistent+p.Updated <= tg.HBM {
		t.Errorf("llama2-7b state and its copy %d bytes, v5e HBM %d", p.Persistent+p.Updated, tg.HBM)
	}
}

// TestPlanOptionsAndRefusals: the default block size, Adafactor, gradient accumulation, and the
// arguments PlanFSDP refuses before computing anything.
func TestPlanOptionsAndRefusals(t *testing.T) {
	gpt2 := planConfig(t, "hf-configs", "gpt2_lmhead_config.json")
	tiny := planConfig(t, "models", "gpt2-tiny", "config.json")
	if p := mustPlan(t, PlanRequest{Model: tiny, Args: planArgs(1, false)}); p.BlockSize != 64 {
		t.Errorf("gpt2-tiny default block size %d, want its n_positions 64", p.BlockSize)
	}

	ada := planArgs(1, true)
	ada.Optim = "adafactor"
	p := mustPlan(t, PlanRequest{Model: gpt2, Args: ada})
	fp, _ := models.EstimateFootprint(gpt2)
	if p.Optim != "adafactor" || p.Optimizer != fp.AdafactorState*4 {
		t.Errorf("adafactor: %s, optimizer %d bytes, want %d", p.Optim, p.Optimizer, fp.AdafactorState*4)
	}
	// FSDP with Adafactor runs on PJRT plugins (the factored moments follow their parameter's
	// layout); the plan counts the factored state whole on each device, an upper bound.
	for _, args := range []TrainingArguments{ada, func() TrainingArguments {
		old := planArgs(1, true)
		old.Adafactor = true // the deprecated spelling
		return old
	}()} {
		p, err := PlanFSDP(PlanRequest{Model: gpt2, Args: args, FSDP: true, Devices: 8})
		if err != nil || p.Optim != "adafactor" || p.Optimizer != fp.AdafactorState*4 {
			t.Errorf("adafactor with fsdp on 8: %+v, %v; want optimizer %d bytes", p.PlanBytes, err, fp.AdafactorState*4)
		}
	}

	acc := planArgs(1, true)
	acc.GradientAccumulationSteps = 4
	p1 := mustPlan(t, PlanRequest{Model: gpt2, Args: planArgs(1, true), FSDP: true})
	p4 := mustPlan(t, PlanRequest{Model: gpt2, Args: acc, FSDP: true})
	// FSDP accumulates the reduced gradients' shards.
	if p4.Gradients != p1.Gradients+p1.Parameters || p4.Persistent != p1.Persistent || p4.Activations != p1.Activations {
		t.Errorf("fsdp accumulation: %+v against %+v", p4.PlanBytes, p1.PlanBytes)
	}
	d1 := mustPlan(t, PlanRequest{Model: gpt2, Args: planArgs(1, true)})
	d4 := mustPlan(t, PlanRequest{Model: gpt2, Args: acc})
	// Data parallel: the whole float32 accumulators; no gradient is held beyond them.
	if d1.Gradients != 0 || d4.Gradients != d1.Parameters || d4.Gathered != 0 {
		t.Errorf("data-parallel accumulation: %+v against %+v", d4.PlanBytes, d1.PlanBytes)
	}

	bad := func(name string, req PlanRequest, field string) {
		t.Helper()
		_, err := PlanFSDP(req)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != field || !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: %v (want a FieldError for %s)", name, err, field)
		}
	}
	bad("batch 0", PlanRequest{Model: gpt2, Args: planArgs(0, true)}, "per_device_train_batch_size")
	zeroAcc := planArgs(1, true)
	zeroAcc.GradientAccumulationSteps = 0
	bad("accumulation 0", PlanRequest{Model: gpt2, Args: zeroAcc}, "gradient_accumulation_steps")
	bad("block beyond positions", PlanRequest{Model: gpt2, Args: planArgs(1, true), BlockSize: 1025}, "block_size")
	bad("negative block", PlanRequest{Model: gpt2, Args: planArgs(1, true), BlockSize: -1}, "block_size")
	bad("negative min_num_params", PlanRequest{Model: gpt2, Args: planArgs(1, true), MinNumParams: -1}, "min_num_params")
	bad("negative devices", PlanRequest{Model: gpt2, Args: planArgs(1, true), Devices: -8}, "devices")
	sgd := planArgs(1, true)
	sgd.Optim = "sgd"
	bad("sgd", PlanRequest{Model: gpt2, Args: sgd}, "optim")
	bad("empty target", PlanRequest{Model: gpt2, Args: planArgs(1, true), Targets: []PlanTarget{{Name: "x"}}}, "targets")

	if _, err := PlanFSDP(PlanRequest{Args: planArgs(1, true)}); err == nil {
		t.Error("nil model accepted")
	}
	// A batch whose activations overflow int64 is refused, not wrapped around.
	if _, err := PlanFSDP(PlanRequest{Model: gpt2, Args: planArgs(1<<40, true)}); err == nil ||
		!strings.Contains(err.Error(), "overflows") {
		t.Errorf("batch 2^40: %v", err)
	}
	// Absurd dimensions are refused by name.
	huge := gpt2cfg.DefaultConfig()
	huge.NEmbd = models.MaxWidth + 1
	if _, err := PlanFSDP(PlanRequest{Model: huge, Args: planArgs(1, true)}); !errors.Is(err, models.ErrTooLarge) ||
		!strings.Contains(err.Error(), "n_embd") {
		t.Errorf("n_embd beyond the limit: %v", err)
	}
}

// TestPlanLoRADTypeCheckpointing: the adapter's size from first principles (r × (in + out) per
// targeted linear layer), "auto" reading the config's torch_dtype, checkpointing lowering the
// 8B's figure, and the refusals naming the field.
func TestPlanLoRADTypeCheckpointing(t *testing.T) {
	cfg := planConfig(t, "hf-configs", "llama3.1-8b-instruct_config.json")
	lora := func(targets ...string) *peft.LoraConfig {
		lc := peft.DefaultLoraConfig()
		lc.R = 16
		lc.TargetModules, lc.TargetModulesRegex = peft.CommandLineTargets(targets)
		return &lc
	}
	// Llama-3.1-8B: hidden 4096, 8 KV heads of 128, intermediate 14336, 32 layers.
	q, kv, o, mlp := 4096+4096, 4096+1024, 4096+4096, 4096+14336
	allLinear := int64(32 * 16 * (q + 2*kv + o + 3*mlp))
	qv := int64(32 * 16 * (q + kv))
	for _, c := range []struct {
		lc   *peft.LoraConfig
		want int64
	}{{lora("all-linear"), allLinear}, {lora(), qv}, {lora("q_proj", "v_proj"), qv}} {
		p := mustPlan(t, PlanRequest{Model: cfg, Args: planArgs(1, true), BlockSize: 1024, FSDP: true, Devices: 8,
			ParamDType: "bfloat16", Lora: c.lc})
		if p.AdapterParams != c.want || p.Optimizer != c.want/8*8 || p.Updated != c.want/8*12 {
			t.Errorf("targets %v: adapter %d, optimizer %d, updated %d; want %d adapter parameters", c.lc.TargetModules,
				p.AdapterParams, p.Optimizer, p.Updated, c.want)
		}
	}
	if allLinear != 41_943_040 {
		t.Errorf("all-linear adapter %d", allLinear)
	}
	auto := mustPlan(t, PlanRequest{Model: cfg, Args: planArgs(1, true), BlockSize: 1024, ParamDType: "auto"})
	if auto.ParamDType != "bfloat16" {
		t.Errorf("auto: %q, want the config's bfloat16", auto.ParamDType)
	}
	ck := planArgs(1, true)
	ck.GradientCheckpointing = true
	for _, lc := range []*peft.LoraConfig{nil, lora("all-linear")} {
		off := mustPlan(t, PlanRequest{Model: cfg, Args: planArgs(1, true), BlockSize: 1024, FSDP: true, Devices: 8, ParamDType: "bfloat16", Lora: lc})
		on := mustPlan(t, PlanRequest{Model: cfg, Args: ck, BlockSize: 1024, FSDP: true, Devices: 8, ParamDType: "bfloat16", Lora: lc})
		if !on.GradientCheckpointing || on.Total >= off.Total || on.Persistent != off.Persistent {
			t.Errorf("lora %v: checkpointing %d bytes, without %d", lc != nil, on.Total, off.Total)
		}
	}
	for _, c := range []struct {
		req   PlanRequest
		field string
	}{
		{PlanRequest{Model: cfg, Args: planArgs(1, true), BlockSize: 1024, Lora: lora("c_attn")}, "lora_target_modules"},
		{PlanRequest{Model: cfg, Args: planArgs(1, true), BlockSize: 1024, ParamDType: "int8"}, "torch_dtype"},
	} {
		_, err := PlanFSDP(c.req)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%+v: %v, want a FieldError for %s", c.req.Lora, err, c.field)
		}
	}
}
