package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/trainer"
)

// runPlan implements `gotpu plan`: a memory planner (what `accelerate estimate-memory` does for
// GPUs, with TPUs and FSDP sharding). It reads a config.json (a model directory's, or the file
// itself; never a download, never the weights), builds nothing, and prints per-device bytes for
// every target machine (trainer.PlanTargets, or the one --device names) and whether the run fits.
//
// Output (stdout), a contract pinned by testdata/plan:
//
//	model      <model_type> (<architecture>), <N> parameters (<tensors> tensors)
//	optimizer  <optim> (...)
//	dtype      <compute dtype>; <parameters' dtype, the adapter's and the optimizer state's>
//	lora       r R, alpha A, targets T: N adapter parameters (P% of the base)     (with --use_peft)
//	ckpt       gradient_checkpointing: ...                                        (with --gradient_checkpointing)
//	batch      per_device_train_batch_size B, block_size L, gradient_accumulation_steps G
//	fsdp       full_shard over each target's devices (min_num_params M) | no: data parallel ...
//
//	per device, GiB
//	target  devices  params  grads  optimizer  updated  gathered  activations  total  HBM  fits
//	<one row per target: GiB with 2 decimals ("-" where a part does not apply), fits yes/no/refused>
//
// followed by notes saying what each column counts (trainer.PlanFSDP documents the rules), a
// "does not fit TARGET: ..." line per target over its HBM naming the largest part and what shrinks
// it, and, for a refused layout, why. With --compile, --device names a PJRT runtime instead and the plan is
// checked against the XLA compiler's own figures (runPlanCompile, plan_compile.go).
func runPlan(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("plan")
	model := fs.String("model", "", "model directory (with config.json) or a config.json file; local only")
	bf16 := fs.Bool("bf16", false, "bf16 mixed precision (float32 parameters and optimizer state, bf16 activations)")
	batch := fs.Int("per_device_train_batch_size", 8, "examples per device per micro-batch")
	block := fs.Int("block_size", 0, "tokens per example; 0: min(1024, the model's maximum positions), as HF's run_clm")
	accum := fs.Int("gradient_accumulation_steps", 1, "micro-batches per optimizer step")
	optim := fs.String("optim", "adamw_torch", "optimizer: adamw_torch (or another AdamW spelling) or adafactor")
	fsdp := fs.String("fsdp", "", `"full_shard": shard parameters and optimizer state over each target's devices; empty: data parallel`)
	minParams := fs.Int64("fsdp_min_num_params", 0, "with --fsdp, tensors with fewer elements stay replicated (fsdp_config min_num_params)")
	device := fs.String("device", "", "one target ("+strings.Join(trainer.PlanTargetNames(), ", ")+
		"); empty: all of them. With --compile: the runtime to compile on (cpu, tpu, cuda or auto)")
	compile := fs.Bool("compile", false, "build the model (random weights) on --device's PJRT plugin, run one train step over "+
		"--num_devices devices and print the XLA compiler's memory figures next to the planner's")
	numDevices := fs.Int("num_devices", 0, "with --compile: devices to use (0: all of the plugin's)")
	pluginPath := fs.String("plugin_path", "", "with --compile: PJRT plugin file or directory to use instead of searching")
	shapesOnly := fs.Bool("shapes_only", false, "with --compile: trace the train step from the variables' shapes and compile it "+
		"without running it or allocating the model (for models the host cannot hold, such as an 8B); needs 2+ devices or --fsdp")
	var run planRunFlags
	run.register(fs)
	if err := parse(fs, args, stderr, "--model DIR|config.json [--bf16] [--per_device_train_batch_size N] [--block_size L] "+
		"[--gradient_accumulation_steps G] [--optim adamw_torch|adafactor] [--fsdp full_shard] [--torch_dtype float32|bfloat16|auto] "+
		"[--use_peft [--lora_r N] [--lora_target_modules all-linear|NAMES]] [--gradient_checkpointing] [--device "+
		strings.Join(trainer.PlanTargetNames(), "|")+"] | [--compile [--shapes_only] --device cpu|tpu|cuda|auto [--num_devices N]]"); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return cli.UsageError("unexpected arguments %q", fs.Args())
	case *model == "":
		return cli.UsageError("--model is required")
	case *batch < 1:
		return cli.UsageError("--per_device_train_batch_size %d: must be at least 1", *batch)
	case *block < 0:
		return cli.UsageError("--block_size %d: must not be negative (0: the default)", *block)
	case *accum < 1:
		return cli.UsageError("--gradient_accumulation_steps %d: must be at least 1", *accum)
	case *minParams < 0:
		return cli.UsageError("--fsdp_min_num_params %d: must not be negative", *minParams)
	case *fsdp != "" && *fsdp != "full_shard":
		return cli.UsageError("--fsdp %q: gotpu plans full_shard only (or no --fsdp: data parallel)", *fsdp)
	case !*compile && (*numDevices != 0 || *pluginPath != "" || *shapesOnly):
		return cli.UsageError("--num_devices, --plugin_path and --shapes_only are --compile's: add --compile, or remove them")
	case *compile && *numDevices < 0:
		return cli.UsageError("--num_devices %d: must not be negative (0: all)", *numDevices)
	}
	req := trainer.PlanRequest{FSDP: *fsdp == "full_shard", MinNumParams: *minParams, BlockSize: *block}
	if *compile {
		return runPlanCompile(ctx, stdout, req, planCompileFlags{model: *model, bf16: *bf16, batch: *batch, accum: *accum,
			optim: *optim, device: *device, numDevices: *numDevices, pluginPath: *pluginPath, shapesOnly: *shapesOnly,
			fs: fs, run: &run})
	}
	if *device != "" {
		t, ok := trainer.LookupPlanTarget(*device)
		if !ok {
			return cli.UsageError("--device %q: not one of %s", *device, strings.Join(trainer.PlanTargetNames(), ", "))
		}
		req.Targets = []trainer.PlanTarget{t}
	}
	path, err := planModel(&req, *model, *bf16, *batch, *accum, *optim)
	if err != nil {
		return err
	}
	if err := run.apply(fs, &req); err != nil {
		return err
	}
	p, err := trainer.PlanFSDP(req)
	if errors.Is(err, trainer.ErrInvalidArgument) || errors.Is(err, trainer.ErrUnsupportedArgument) {
		return cli.UsageError("%s: %v", path, err)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writePlan(stdout, p)
}

// configPath is --model's config.json: the file itself, or DIR/config.json.
func configPath(model string) (string, error) {
	st, err := os.Stat(model)
	if err != nil {
		return "", fmt.Errorf("--model: %w", err)
	}
	if !st.IsDir() {
		return model, nil
	}
	path := filepath.Join(model, "config.json")
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("--model %s: a model directory needs a config.json: %w", model, err)
	}
	return path, nil
}

// writePlan prints p in runPlan's format.
func writePlan(w io.Writer, p trainer.Plan) error {
	var b strings.Builder
	writePlanHeader(&b, p)
	b.WriteString("\nper device, GiB\n")
	row := func(cols ...string) {
		fmt.Fprintf(&b, "%-7s %7s %8s %7s %9s %8s %8s %11s %8s %7s  %s\n", cols[0], cols[1], cols[2], cols[3], cols[4], cols[5],
			cols[6], cols[7], cols[8], cols[9], cols[10])
	}
	row("target", "devices", "params", "grads", "optimizer", "updated", "gathered", "activations", "total", "HBM", "fits")
	var refused []string
	for _, r := range p.Rows {
		devices := strconv.Itoa(r.Target.Devices)
		if r.Err != nil {
			row(r.Target.Name, devices, "-", "-", "-", "-", "-", "-", "-", gibs(r.Target.HBM), "refused")
			refused = append(refused, fmt.Sprintf("%s: %v", r.Target.Name, r.Err))
			continue
		}
		fits := "no"
		if r.Fits {
			fits = "yes"
		}
		gathered := "-"
		if p.FSDP || r.Gathered > 0 {
			gathered = gibs(r.Gathered)
		}
		row(r.Target.Name, devices, gibs(r.Parameters), gibs(r.Gradients), gibs(r.Optimizer), gibs(r.Updated), gathered,
			gibs(r.Activations), gibs(r.Total), gibs(r.Target.HBM), fits)
	}
	b.WriteString("\n")
	trained := "every parameter"
	if p.Lora != nil {
		trained = "the adapter"
	}
	if p.FSDP {
		fmt.Fprintf(&b, "params: what a device keeps between steps: its FSDP shards of the parameters%s.\n", loraParamsNote(p))
		fmt.Fprintf(&b, "optimizer: the optimizer state of %s, sharded like it.\n", trained)
	} else {
		fmt.Fprintf(&b, "params, optimizer: the parameters%s and the optimizer state of %s, whole on every device.\n",
			loraParamsNote(p), trained)
	}
	b.WriteString("updated: the new trained parameters and optimizer state the step writes: gotpu's programs alias no\n" +
		"  input to an output yet, so XLA holds them beside the old ones (a second copy).\n")
	b.WriteString("grads: the sharded gradient accumulators (gradient_accumulation_steps > 1); the step's own gradients\n" +
		"  are reduce-scattered layer by layer as they are produced, inside activations.\n")
	b.WriteString("gathered: the all-gathered decoder-layer weights live at the peak (every layer's but one without\n" +
		"  gradient checkpointing) and, for a frozen or low-precision base, the head's.\n")
	b.WriteString("activations: the other transients: each layer's activations (one layer's and every layer's input with\n" +
		"  gradient checkpointing), the gradients in flight, the float32 logits.\n")
	b.WriteString("grads, gathered, activations: the compiled program's temp buffers, from a model fitted to XLA's compiled\n" +
		"  memory figures of this train step for Llama-3.1-8B's widths cut to 1, 2 and 4 layers (8 XLA CPU devices;\n" +
		"  docs/memory-plan.md): deeper models and other architectures are that model's extrapolation.\n")
	b.WriteString("total: the sum, the compiled program's peak; fits: total <= HBM, the vendor's figure (usable memory is less).\n")
	for _, r := range p.Rows {
		if r.Err == nil && !r.Fits {
			fmt.Fprintf(&b, "does not fit %s: %s\n", r.Target.Name, planWhy(p, r))
		}
	}
	for _, s := range refused {
		fmt.Fprintf(&b, "refused %s\n", s)
	}
	if len(refused) > 0 {
		b.WriteString("(gotpu plan takes min_num_params as --fsdp_min_num_params.)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// loraParamsNote is what params hold beyond the parameters, with LoRA.
func loraParamsNote(p trainer.Plan) string {
	if p.Lora == nil {
		return ""
	}
	return " (the frozen base and the adapter)"
}

// writePlanHeader prints the plan's first lines: model, optimizer, dtype, lora, checkpointing,
// batch and fsdp.
func writePlanHeader(b *strings.Builder, p trainer.Plan) {
	fmt.Fprintf(b, "model      %s (%s), %s parameters (%d tensors)\n", p.ModelType, p.Architecture, thousands(p.Params), p.Tensors)
	if p.Optim == "adafactor" {
		fmt.Fprintf(b, "optimizer  adafactor (factored float32 second moments)\n")
	} else {
		fmt.Fprintf(b, "optimizer  %s (AdamW: two moments per trained parameter)\n", p.Optim)
	}
	fmt.Fprintf(b, "dtype      %s\n", planDTypeLine(p))
	fmt.Fprintf(b, "lora       %s\n", planLoRALine(p))
	if p.GradientCheckpointing {
		fmt.Fprintf(b, "ckpt       gradient_checkpointing: each decoder layer's activations are recomputed in the backward pass\n")
	} else {
		fmt.Fprintf(b, "ckpt       no gradient_checkpointing: every layer's activations are kept for the backward pass\n")
	}
	fmt.Fprintf(b, "batch      per_device_train_batch_size %d, block_size %d, gradient_accumulation_steps %d\n",
		p.Batch, p.BlockSize, p.GradientAccumulationSteps)
	if p.FSDP {
		fmt.Fprintf(b, "fsdp       full_shard over each target's devices (min_num_params %d)\n", p.MinNumParams)
	} else {
		fmt.Fprintf(b, "fsdp       no: data parallel, every device holds all parameters and optimizer state\n")
	}
}

// gibs formats bytes as GiB with two decimals.
func gibs(b int64) string { return strconv.FormatFloat(float64(b)/(1<<30), 'f', 2, 64) }

// thousands formats n with comma separators (6,738,415,616).
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	var parts []string
	for len(s) > 3 {
		parts = append(parts, s[len(s)-3:])
		s = s[:len(s)-3]
	}
	parts = append(parts, s)
	slices.Reverse(parts)
	return strings.Join(parts, ",")
}

// planModel reads the model's config.json into req and sets the training arguments the plan
// takes; it returns the config's path (named in errors).
func planModel(req *trainer.PlanRequest, model string, bf16 bool, batch, accum int, optim string) (string, error) {
	path, err := configPath(model)
	if err != nil {
		return "", err
	}
	cfg, err := models.ParseConfig(path)
	if err != nil {
		return "", err
	}
	req.Model = cfg
	req.Args = trainer.DefaultTrainingArguments()
	req.Args.BF16, req.Args.PerDeviceTrainBatchSize, req.Args.GradientAccumulationSteps, req.Args.Optim = bf16, batch, accum, trainer.OptimizerName(optim)
	return path, nil
}

// planWhy says what makes row r over its target's HBM — the largest of the state (params,
// optimizer state, its updated copy, gradient accumulators), the gathered layer weights and the
// activations — and the settings that shrink it.
func planWhy(p trainer.Plan, r trainer.PlanRow) string {
	parts := []struct {
		name  string
		bytes int64
	}{{"the state (params, optimizer, updated, grads)", r.Parameters + r.Optimizer + r.Updated + r.Gradients},
		{"gathered", r.Gathered}, {"activations", r.Activations}}
	big := parts[0]
	for _, x := range parts[1:] {
		if x.bytes > big.bytes {
			big = x
		}
	}
	var fix []string
	switch big.name {
	case "activations":
		if p.Batch > 1 {
			fix = append(fix, "a lower --per_device_train_batch_size (with --gradient_accumulation_steps for the same global batch)")
		}
		if !p.GradientCheckpointing {
			fix = append(fix, "--gradient_checkpointing")
		}
		fix = append(fix, "a shorter --block_size")
	case "gathered":
		if p.Lora == nil {
			fix = append(fix, "--use_peft (a frozen base: no layer's gathered weights kept for its gradient)")
		}
		fix = append(fix, "a target with more HBM")
	default:
		if !p.FSDP {
			fix = append(fix, "--fsdp full_shard")
		}
		if p.Lora == nil {
			fix = append(fix, "--use_peft (LoRA: a frozen base without gradients or optimizer state)")
			if p.ParamDType != "bfloat16" && p.ParamDType != "float16" {
				fix = append(fix, "--torch_dtype bfloat16 (half the weights and AdamW state)")
			}
		}
		fix = append(fix, "a target with more devices or HBM")
	}
	return fmt.Sprintf("%s GiB of %s GiB HBM; the largest part is %s, %s GiB: try %s", gibs(r.Total), gibs(r.Target.HBM),
		big.name, gibs(big.bytes), strings.Join(fix, ", or "))
}
