package trainer

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/internal/membudget"
	"github.com/gotpu/gotpu/internal/shard"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
)

// PlanTarget is a machine a plan is checked against: how many devices (chips) it has and the
// high-bandwidth memory of each.
type PlanTarget struct {
	// Name is the Cloud TPU accelerator type ("v5e-8") or the GPU ("h100").
	Name string
	// Devices is the number of chips: the fsdp size with FSDP, the data-parallel replicas without.
	Devices int
	// HBM is each device's memory in bytes.
	HBM int64
}

// planTargets are the machines `gotpu plan` knows. HBM per chip, as the vendors publish it (read
// 2025):
//   - v4-8: 4 chips (v4 type names count TensorCores, two per chip), "HBM2 capacity 32 GiB"
//     (https://cloud.google.com/tpu/docs/v4);
//   - v5e-8: 8 chips, "HBM2 capacity 16 GB" (https://cloud.google.com/tpu/docs/v5e);
//   - v5p-8: 4 chips (topology 2x2x1: 8 TensorCores, 4 chips), "HBM2e capacity 95 GB"
//     (https://cloud.google.com/tpu/docs/v5p);
//   - v6e-8: 8 chips, "HBM capacity per chip 32 GB" (https://cloud.google.com/tpu/docs/v6e);
//   - h100: one NVIDIA H100 SXM, 80 GB HBM3; h200: one NVIDIA H200 SXM, 141 GB HBM3e
//     (NVIDIA's product pages and its MLPerf system descriptions, e.g.
//     mlcommons/inference_results_v4.1 closed/NVIDIA/systems/H200-SXM-141GBx8_TRT_MaxQ.json:
//     "accelerator_memory_capacity": "141 GB").
//
// The vendors write "GB" for all but v4 ("GiB"); the planner reads every figure as GiB (2^30
// bytes). Read as decimal gigabytes they would be 7% smaller (16 GB = 14.9 GiB). Either way what a
// program can use is less (the runtime, XLA's scratch space and fragmentation take a share), so a
// plan that fits is necessary, not sufficient; one within a few percent of the HBM is a guess.
var planTargets = []PlanTarget{
	{"v4-8", 4, 32 << 30},
	{"v5e-8", 8, 16 << 30},
	{"v5p-8", 4, 95 << 30},
	{"v6e-8", 8, 32 << 30},
	{"h100", 1, 80 << 30},
	{"h200", 1, 141 << 30},
}

// PlanTargets returns the machines `gotpu plan` checks a run against, in the order it prints
// them.
func PlanTargets() []PlanTarget { return slices.Clone(planTargets) }

// LookupPlanTarget returns the target named name ("v5e-8", "h100"…).
func LookupPlanTarget(name string) (PlanTarget, bool) {
	for _, t := range planTargets {
		if t.Name == name {
			return t, true
		}
	}
	return PlanTarget{}, false
}

// PlanTargetNames lists the targets' names, for usage messages.
func PlanTargetNames() []string {
	names := make([]string, len(planTargets))
	for i, t := range planTargets {
		names[i] = t.Name
	}
	return names
}

// DefaultPlanBlockSize is the sequence length a plan uses when none is given: Hugging Face's
// run_clm.py takes min(1024, the model's maximum positions) when block_size is unset and the
// tokenizer's model_max_length is larger (as it is for the hub's GPT-2 and Llama tokenizers).
const DefaultPlanBlockSize = 1024

// PlanRequest describes a training run to PlanFSDP.
type PlanRequest struct {
	// Model is the config of the model to train (required): only its dimensions are read.
	Model models.Config
	// Args are the run's arguments: per_device_train_batch_size, gradient_accumulation_steps,
	// bf16 and optim (or adafactor) are read.
	Args TrainingArguments
	// BlockSize is the sequence length of a training example; 0 means DefaultPlanBlockSize or the
	// model's maximum positions if smaller. It may not exceed the maximum.
	BlockSize int
	// FSDP shards the parameters and the optimizer state over each target's devices (HF's fsdp
	// "full_shard", torch_xla's SPMD FSDP); false is data parallel: every device holds all of it.
	FSDP bool
	// MinNumParams is fsdp_config's min_num_params: tensors with fewer elements stay replicated
	// (0, HF's default, shards every tensor that is not a scalar).
	MinNumParams int64
	// Devices is the device count of Plan's own figures (Plan.Devices); 0 means 1. The rows use
	// each target's count.
	Devices int
	// Targets are the machines of Plan.Rows; nil means PlanTargets().
	Targets []PlanTarget
	// ParamDType is the dtype the parameters are loaded and kept in (torch_dtype): "" or
	// "float32", "bfloat16" or "float16". AdamW's state takes the parameter's dtype (torch's
	// AdamW), the gradients too; bf16 (Args.BF16) is the compute dtype either way.
	ParamDType string
	// Lora, when set, trains a LoRA adapter of this config (PEFT's semantics, models/peft) on a
	// frozen base: only the adapter gets gradients and optimizer state; the base is sharded like
	// the parameters under FSDP.
	Lora *peft.LoraConfig
}

// PlanBytes are one device's bytes, by part. Every figure is float32 (4 bytes an element) but
// the activations: gotpu keeps float32 parameters, gradients and optimizer state even when it
// computes in bf16.
type PlanBytes struct {
	// Parameters are the weights the device keeps between steps, in their dtype: with FSDP its
	// shards (shard.Choose's ShardElements; a replicated tensor counts whole) of the parameters —
	// with LoRA of the frozen base and of the float32 adapter — without FSDP all of them.
	Parameters int64
	// Gradients are the sharded gradient accumulators of gradient_accumulation_steps > 1 (the
	// trained parameters' shards in float32), else zero: the step's own gradients are reduced
	// as the backward pass produces them and are inside the fitted transients (plan_xla.go).
	Gradients int64
	// Optimizer is the optimizer state of the trained parameters: AdamW's two moments per element
	// the device keeps, in the parameter's dtype (float32 for an adapter or float32 weights,
	// bfloat16 for bfloat16 weights, as torch's AdamW); Adafactor's factored second moments
	// (EstimateMemory's rule), counted whole with or without FSDP.
	Optimizer int64
	// Gathered is the per-layer weight term of the fitted transients: the all-gathered
	// decoder-layer weights live at the compiled program's peak (plan_xla.go).
	Gathered int64
	// Activations are the rest of the fitted transients: activations, logits, gradients in
	// flight (plan_xla.go).
	Activations int64
	// Updated are the new trainable parameters and optimizer state the step writes: gotpu's
	// programs alias no input to an output, so XLA holds them beside the old ones.
	Updated int64
	// Persistent is Parameters + Optimizer: what the device keeps between steps (the figure a run
	// on gotpu's CPU backend can be measured against).
	Persistent int64
	// Total is Persistent + Updated + Gradients + Gathered + Activations: the compiled program's
	// arguments + outputs + temp, its peak.
	Total int64
}

// PlanRow is one target's plan.
type PlanRow struct {
	Target PlanTarget
	PlanBytes
	// Fits reports Total <= Target.HBM.
	Fits bool
	// Err is set when the run cannot be laid out on the target (a tensor no dimension of which
	// divides by its device count: shard.ErrUneven); the bytes are then zero.
	Err error
}

// Plan is PlanFSDP's answer.
type Plan struct {
	// ModelType and Architecture name the model (config.json's model_type, the HF class).
	ModelType, Architecture string
	// Params is the model's parameter count (tied weights once); Tensors the number of tensors.
	Params  int64
	Tensors int
	// Optim is the optimizer ("adamw_torch", "adafactor"…); BF16 the mixed-precision setting.
	Optim string
	BF16  bool
	// Batch is per_device_train_batch_size, BlockSize the sequence length used,
	// GradientAccumulationSteps as given.
	Batch, BlockSize, GradientAccumulationSteps int
	// FSDP and MinNumParams are the request's.
	FSDP         bool
	MinNumParams int64
	// Devices is the device count of the embedded PlanBytes.
	Devices int
	// ParamDType is the request's (torch_dtype; "" float32); Lora its adapter config and
	// AdapterParams the adapter's element count; GradientCheckpointing Args'.
	ParamDType            string
	Lora                  *peft.LoraConfig
	AdapterParams         int64
	GradientCheckpointing bool
	PlanBytes
	// Rows are the request's targets, in order.
	Rows []PlanRow
}

// PlanFSDP plans req's run per device, before anything is built or allocated: the memory planner
// behind `gotpu plan`. It returns the figures for req.Devices devices and one row per target,
// with or without FSDP (req.FSDP).
//
// The rules (PlanBytes documents each part):
//   - the tensors are models.ParamShapes(req.Model), from the config alone; gotpu keeps float32
//     parameters, gradients and optimizer state even when it computes in bf16, so every element
//     is 4 bytes;
//   - with FSDP each tensor is laid out by internal/shard.Choose(name, shape, devices,
//     MinNumParams), the rule gotpu's FSDP step uses: a device keeps ShardElements × 4 bytes of
//     it and twice that of AdamW moments; replicated tensors (scalars, tensors under
//     MinNumParams, everything on one device) count whole on every device;
//   - the step's transients are counted as the step holds them: every parameter's whole
//     gradient (FSDP reduces gradients after the backward pass) and, with FSDP, the whole
//     gathered copy of every sharded tensor;
//   - activations and, without FSDP, parameters, gradients and optimizer state are
//     EstimateMemory's figures for one device of an accelerator (OnHost false, float32
//     parameters), so `gotpu plan` and trainer.New's budget cannot disagree;
//   - a row fits when Total is at most the target's HBM.
//
// Errors: a nil model, a config with absurd dimensions (naming the config.json field,
// models.ErrTooLarge), an unsupported architecture (models.ErrUnsupported), arguments out of range
// (*FieldError, ErrInvalidArgument: batch, accumulation, block size beyond the model's positions,
// negative min_num_params or devices, an unknown optimizer), a batch whose memory
// overflows int64, and a layout refused for req.Devices (shard.ErrUneven, naming the tensor).
// A target whose layout is refused gets a row with Err set rather than failing the plan.
//
// Known error: parameters, optimizer state, gradients and gathered weights are exact counts of
// the buffers the step's program holds; activations are the trainer's estimate (calibrated on
// the pure-Go backend, high under XLA, which fuses and rematerialises). Not counted: the
// collectives' own buffers while they run (the step builds its gather and its reduce-scatter
// from all-reduces, whose inputs are whole-sized), bf16 copies of the weights for the matmuls,
// and the host's input batches.
func PlanFSDP(req PlanRequest) (Plan, error) {
	if req.Model == nil {
		return Plan{}, errors.New("trainer.PlanRequest.Model: nil")
	}
	shapes, err := models.ParamShapes(req.Model)
	if err != nil {
		return Plan{}, fmt.Errorf("trainer: %w", err)
	}
	fp, err := models.EstimateFootprint(req.Model)
	if err != nil {
		return Plan{}, fmt.Errorf("trainer: %w", err)
	}
	a := req.Args
	invalid := func(field, format string, args ...any) error {
		return &FieldError{Struct: "PlanRequest", Field: field, Kind: ErrInvalidArgument, Msg: fmt.Sprintf(format, args...)}
	}
	optim := a.Optim
	if a.Adafactor {
		optim = "adafactor"
	}
	if optim == "" {
		optim = "adamw_torch"
	}
	switch {
	case a.PerDeviceTrainBatchSize < 1:
		return Plan{}, invalid("per_device_train_batch_size", "%d must be at least 1", a.PerDeviceTrainBatchSize)
	case a.GradientAccumulationSteps < 1:
		return Plan{}, invalid("gradient_accumulation_steps", "%d must be at least 1", a.GradientAccumulationSteps)
	case req.BlockSize < 0:
		return Plan{}, invalid("block_size", "%d is negative", req.BlockSize)
	case int64(req.BlockSize) > fp.MaxPositions:
		return Plan{}, invalid("block_size", "%d is beyond the model's %d positions (%s)", req.BlockSize, fp.MaxPositions,
			positionsField(req.Model))
	case req.MinNumParams < 0:
		return Plan{}, invalid("min_num_params", "%d is negative", req.MinNumParams)
	case req.Devices < 0:
		return Plan{}, invalid("devices", "%d is negative", req.Devices)
	case !slices.Contains(supportedOptimizers, string(optim)):
		return Plan{}, invalid("optim", "%q is not one of %v", optim, supportedOptimizers)
	}
	for _, t := range req.Targets {
		if t.Devices < 1 || t.HBM < 1 {
			return Plan{}, invalid("targets", "%q: %d devices of %d bytes", t.Name, t.Devices, t.HBM)
		}
	}
	block := req.BlockSize
	if block == 0 {
		block = int(min(DefaultPlanBlockSize, fp.MaxPositions))
	}

	if req.ParamDType == "auto" {
		// HF's torch_dtype "auto": the dtype the config records (float32 when it records none).
		req.ParamDType = models.ConfigDType(req.Model)
	}
	pb, err := paramDTypeBytes(req.ParamDType)
	if err != nil {
		return Plan{}, invalid("torch_dtype", "%v", err)
	}
	// One device's EstimateMemory at the parameters' dtype, on an accelerator (bf16 halves
	// activations): Adafactor's factored state is its figure.
	a.Optim, a.Adafactor = optim, false
	est, err := EstimateMemory(BudgetRequest{Model: req.Model, Args: a, Replicas: 1, SeqLen: block, ParamBytes: int(pb)})
	if err != nil {
		return Plan{}, err
	}

	p := Plan{ModelType: req.Model.ModelType(), Architecture: req.Model.Architecture(), Params: fp.Params,
		Tensors: len(shapes), Optim: string(optim), BF16: a.BF16, Batch: a.PerDeviceTrainBatchSize, BlockSize: block,
		GradientAccumulationSteps: a.GradientAccumulationSteps, FSDP: req.FSDP, MinNumParams: req.MinNumParams,
		Devices: max(req.Devices, 1)}
	p.ParamDType = req.ParamDType
	var adapter []models.Param
	if req.Lora != nil {
		if adapter, err = loraAdapterShapes(req.Model, *req.Lora); err != nil {
			return Plan{}, invalid("lora_target_modules", "%s", strings.TrimPrefix(err.Error(), "LoraConfig.target_modules: "))
		}
		p.Lora, p.AdapterParams = req.Lora, paramElements(adapter)
	}
	p.GradientCheckpointing = a.GradientCheckpointing
	layerElems := decoderLayerElements(shapes, fp.Layers)
	perDevice := func(n int) (PlanBytes, error) {
		var b PlanBytes
		var c membudget.Acc
		layoutN := n
		if !req.FSDP {
			layoutN = 1
		}
		kept, _, err := shardElements(shapes, layoutN, req.MinNumParams)
		if err != nil {
			return PlanBytes{}, err
		}
		stateBytes := int64(4)
		if pb < 4 {
			stateBytes = pb // torch's AdamW keeps its state in the parameter's dtype
		}
		trainKept, trainBytes := kept, pb
		b.Parameters = c.Mul(kept, pb)
		if req.Lora != nil {
			ak, _, err := shardElements(adapter, layoutN, req.MinNumParams)
			if err != nil {
				return PlanBytes{}, err
			}
			trainKept, trainBytes, stateBytes = ak, 4, 4 // the adapter is float32
			b.Parameters = c.Add(b.Parameters, c.Mul(ak, 4))
		}
		b.Optimizer = c.Mul(trainKept, stateBytes, 2)
		if optim == "adafactor" {
			b.Optimizer = est.Optimizer
		}
		// The updated trainable parameters and state are written beside the old ones.
		b.Updated = c.Add(c.Mul(trainKept, trainBytes), b.Optimizer)
		if a.GradientAccumulationSteps > 1 {
			b.Gradients = c.Mul(trainKept, 4) // the sharded accumulators
		}
		t, ok := planXLATransients(fp, layerElems, a.PerDeviceTrainBatchSize, block, pb < 4, req.Lora != nil,
			a.GradientCheckpointing, req.FSDP && n > 1, b.Updated)
		if !ok {
			return PlanBytes{}, overflowError(a)
		}
		b.Gathered, b.Activations = t.Gathered, t.Activations
		b.Persistent = c.Add(b.Parameters, b.Optimizer)
		b.Total = c.Add(b.Persistent, b.Updated, b.Gradients, b.Gathered, b.Activations)
		if c.Overflowed() {
			return PlanBytes{}, overflowError(a)
		}
		return b, nil
	}
	if p.PlanBytes, err = perDevice(p.Devices); err != nil {
		return Plan{}, err
	}
	targets := req.Targets
	if targets == nil {
		targets = planTargets
	}
	cache := map[int]PlanRow{}
	for _, t := range targets {
		r, ok := cache[t.Devices]
		if !ok {
			r.PlanBytes, r.Err = perDevice(t.Devices)
			cache[t.Devices] = r
		}
		r.Target = t
		r.Fits = r.Err == nil && r.Total <= t.HBM
		p.Rows = append(p.Rows, r)
	}
	return p, nil
}

// shardElements lays shapes out over n devices: kept is the number of parameter elements one
// device keeps (its shards, replicated tensors whole), whole the elements of the sharded tensors
// (what gathering them materialises).
func shardElements(shapes []models.Param, n int, minNumParams int64) (kept, whole int64, err error) {
	var c membudget.Acc
	for _, p := range shapes {
		l, err := shard.Choose(p.Name, p.Shape, n, minNumParams)
		if err != nil {
			return 0, 0, err
		}
		kept = c.Add(kept, l.ShardElements())
		if l.Sharded() {
			whole = c.Add(whole, l.Elements())
		}
	}
	if c.Overflowed() {
		return 0, 0, fmt.Errorf("trainer: %w: the parameter count overflows int64", models.ErrTooLarge)
	}
	return kept, whole, nil
}

// positionsField names the config.json field of a model's maximum positions.
func positionsField(cfg models.Config) string {
	if cfg.ModelType() == "gpt2" {
		return "n_positions"
	}
	return "max_position_embeddings"
}

// paramDTypeBytes is the element size of a torch_dtype as PlanRequest.ParamDType takes it.
func paramDTypeBytes(name string) (int64, error) {
	switch strings.ToLower(name) {
	case "", "float32", "float64": // float64 checkpoints load as float32
		return 4, nil
	case "bfloat16", "float16":
		return 2, nil
	}
	return 0, fmt.Errorf("%q is not float32, bfloat16, float16 or auto", name)
}

// loraAdapterShapes are the lora_A and lora_B tensors of an adapter of lc on cfg's model: the
// targets as PEFT resolves them (peft.Targets on the model's linear layers, from a shape-only
// model: nothing allocated), r × in and out × r each.
func loraAdapterShapes(cfg models.Config, lc peft.LoraConfig) ([]models.Param, error) {
	// Building a model records its dtype in cfg: keep the caller's config as it was (its
	// torch_dtype is what "auto" reads).
	defer cfg.SetDType(models.ConfigDType(cfg))
	m, err := models.NewShapeOnly(nil, cfg, models.NewOptions{})
	if err != nil {
		return nil, err
	}
	ad, ok := m.(models.Adaptable)
	if !ok {
		return nil, fmt.Errorf("%s has no LoRA-targetable layers", cfg.Architecture())
	}
	if err := lc.Validate(); err != nil {
		return nil, err
	}
	targets, err := peft.Targets(ad, lc)
	if err != nil {
		return nil, err
	}
	var out []models.Param
	for _, t := range targets {
		out = append(out, models.Param{Name: t.Module + ".lora_A.weight", Shape: []int{lc.R, t.In}},
			models.Param{Name: t.Module + ".lora_B.weight", Shape: []int{t.Out, lc.R}})
	}
	return out, nil
}

// paramElements sums the tensors' elements.
func paramElements(ps []models.Param) int64 {
	var n int64
	for _, p := range ps {
		e := int64(1)
		for _, d := range p.Shape {
			e *= int64(d)
		}
		n += e
	}
	return n
}

// decoderLayerElements is one decoder layer's parameter elements: those of the tensors named
// with a layer index (".<i>."), over the layer count.
func decoderLayerElements(shapes []models.Param, layers int64) int64 {
	if layers < 1 {
		return 0
	}
	var n int64
	for _, p := range shapes {
		if layerIndexed(p.Name) {
			n += paramElements([]models.Param{p})
		}
	}
	return n / layers
}

func layerIndexed(name string) bool {
	parts := strings.Split(name, ".")
	for _, s := range parts[:max(len(parts)-1, 0)] {
		if s != "" && strings.Trim(s, "0123456789") == "" {
			return true
		}
	}
	return false
}
