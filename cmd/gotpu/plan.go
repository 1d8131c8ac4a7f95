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
//	dtype      bf16 compute, float32 parameters, gradients and optimizer state | float32
//	batch      per_device_train_batch_size B, block_size L, gradient_accumulation_steps G
//	fsdp       full_shard over each target's devices (min_num_params M) | no: data parallel ...
//
//	per device, GiB
//	target  devices  params  grads  optimizer  gathered  activations  total  HBM  fits
//	<one row per target: GiB with 2 decimals ("-" where a part does not apply), fits yes/no/refused>
//
// followed by notes saying what each column counts (trainer.PlanFSDP documents the rules) and,
// for a refused layout, why. With --compile, --device names a PJRT runtime instead and the plan is
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
	if err := parse(fs, args, stderr, "--model DIR|config.json [--bf16] [--per_device_train_batch_size N] [--block_size L] "+
		"[--gradient_accumulation_steps G] [--optim adamw_torch|adafactor] [--fsdp full_shard] [--device "+
		strings.Join(trainer.PlanTargetNames(), "|")+"] | [--compile --device cpu|tpu|cuda|auto [--num_devices N]]"); err != nil {
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
	case !*compile && (*numDevices != 0 || *pluginPath != ""):
		return cli.UsageError("--num_devices and --plugin_path choose the runtime of --compile: add --compile, or remove them")
	case *compile && *numDevices < 0:
		return cli.UsageError("--num_devices %d: must not be negative (0: all)", *numDevices)
	}
	req := trainer.PlanRequest{FSDP: *fsdp == "full_shard", MinNumParams: *minParams, BlockSize: *block}
	if *compile {
		return runPlanCompile(ctx, stdout, req, planCompileFlags{model: *model, bf16: *bf16, batch: *batch, accum: *accum,
			optim: *optim, device: *device, numDevices: *numDevices, pluginPath: *pluginPath})
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
		fmt.Fprintf(&b, "%-7s %7s %8s %8s %9s %8s %11s %8s %7s  %s\n", cols[0], cols[1], cols[2], cols[3], cols[4], cols[5],
			cols[6], cols[7], cols[8], cols[9])
	}
	row("target", "devices", "params", "grads", "optimizer", "gathered", "activations", "total", "HBM", "fits")
	var refused []string
	for _, r := range p.Rows {
		devices := strconv.Itoa(r.Target.Devices)
		if r.Err != nil {
			row(r.Target.Name, devices, "-", "-", "-", "-", "-", "-", gibs(r.Target.HBM), "refused")
			refused = append(refused, fmt.Sprintf("%s: %v", r.Target.Name, r.Err))
			continue
		}
		fits := "no"
		if r.Fits {
			fits = "yes"
		}
		gathered := "-"
		if p.FSDP {
			gathered = gibs(r.Gathered)
		}
		row(r.Target.Name, devices, gibs(r.Parameters), gibs(r.Gradients), gibs(r.Optimizer), gathered, gibs(r.Activations),
			gibs(r.Total), gibs(r.Target.HBM), fits)
	}
	b.WriteString("\n")
	if p.FSDP {
		b.WriteString("params, optimizer: the float32 shards each device keeps between steps (FSDP's persistent state).\n")
		b.WriteString("grads: every parameter's whole float32 gradient, held in the backward pass before it is reduced\n" +
			"  to the shards: transient, not persistent state.\n")
		b.WriteString("gathered: the whole float32 copy of the sharded parameters, gathered for the forward and backward\n" +
			"  passes: transient.\n")
		if p.GradientAccumulationSteps > 1 {
			b.WriteString("grads include the sharded accumulators of gradient accumulation.\n")
		}
	} else {
		b.WriteString("params, grads, optimizer: float32, whole on every device.\n")
		if p.GradientAccumulationSteps > 1 {
			b.WriteString("grads count two sets with gradient accumulation: the accumulators and the micro-batch's.\n")
		}
	}
	b.WriteString("activations: the trainer's estimate for one micro-batch (high under XLA, which fuses and rematerialises).\n")
	b.WriteString("total: the sum, an estimated peak; fits: total <= HBM, the vendor's figure (usable memory is less).\n")
	for _, s := range refused {
		fmt.Fprintf(&b, "refused %s\n", s)
	}
	if len(refused) > 0 {
		b.WriteString("(gotpu plan takes min_num_params as --fsdp_min_num_params.)\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writePlanHeader prints the plan's first lines: model, optimizer, dtype, batch and fsdp.
func writePlanHeader(b *strings.Builder, p trainer.Plan) {
	fmt.Fprintf(b, "model      %s (%s), %s parameters (%d tensors)\n", p.ModelType, p.Architecture, thousands(p.Params), p.Tensors)
	if p.Optim == "adafactor" {
		fmt.Fprintf(b, "optimizer  adafactor (factored float32 second moments)\n")
	} else {
		fmt.Fprintf(b, "optimizer  %s (AdamW: two float32 moments per parameter)\n", p.Optim)
	}
	if p.BF16 {
		fmt.Fprintf(b, "dtype      bf16 compute; float32 parameters, gradients and optimizer state\n")
	} else {
		fmt.Fprintf(b, "dtype      float32\n")
	}
	fmt.Fprintf(b, "batch      per_device_train_batch_size %d, block_size %d, gradient_accumulation_steps %d\n",
		p.Batch, p.BlockSize, p.GradientAccumulationSteps)
	if p.FSDP {
		fmt.Fprintf(b, "fsdp       full_shard over each target's devices (min_num_params %d)\n", p.MinNumParams)
	} else {
		fmt.Fprintf(b, "fsdp       no: data parallel, every device holds all parameters, gradients and optimizer state\n")
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
