package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/trainer"
)

// planRunFlags are the flags of `gotpu plan` that describe the run, with `gotpu train`'s names:
// the model's dtype (torch_dtype), LoRA (TRL's use_peft, lora_r, lora_target_modules) and
// gradient checkpointing.
type planRunFlags struct {
	torchDType            string
	usePeft               bool
	loraR                 int
	loraTargets           string
	gradientCheckpointing bool
}

// register adds the flags to fs.
func (f *planRunFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.torchDType, "torch_dtype", "", `dtype the parameters are loaded and kept in: float32 (default), bfloat16, `+
		`float16 or "auto" (the config's torch_dtype); AdamW's state takes the parameter's dtype, as torch's AdamW`)
	fs.Var(fs.Lookup("torch_dtype").Value, "dtype", "alias of --torch_dtype")
	fs.BoolVar(&f.usePeft, "use_peft", false, "train a LoRA adapter on the frozen base (TRL's --use_peft)")
	fs.IntVar(&f.loraR, "lora_r", 16, "with --use_peft: the adapter's rank (TRL's default 16)")
	fs.StringVar(&f.loraTargets, "lora_target_modules", "", `with --use_peft: "all-linear" or module names, comma-separated `+
		"(q_proj,v_proj); empty: PEFT's default for the architecture")
	fs.BoolVar(&f.gradientCheckpointing, "gradient_checkpointing", false,
		"recompute each decoder layer's activations in the backward pass instead of keeping them")
}

// apply validates the flags and sets them on req (whose Args are set): the LoRA config comes
// from trainer.ModelDataArguments.PeftConfig, the same rules and errors as `gotpu train`.
func (f *planRunFlags) apply(fs *flag.FlagSet, req *trainer.PlanRequest) error {
	switch f.torchDType {
	case "", "float32", "bfloat16", "float16", "auto":
	default:
		return cli.UsageError("--torch_dtype %q: not float32, bfloat16, float16 or auto", f.torchDType)
	}
	req.ParamDType = f.torchDType
	req.Args.GradientCheckpointing = f.gradientCheckpointing
	var md trainer.ModelDataArguments
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["use_peft"] {
		md.UsePeft = &f.usePeft
	}
	if set["lora_r"] {
		md.LoraR = &f.loraR
	}
	if set["lora_target_modules"] {
		md.LoraTargetModules = []string{f.loraTargets}
	}
	lc, use, err := md.PeftConfig()
	if err != nil {
		return cli.UsageError("%v", err)
	}
	if use {
		req.Lora = &lc
	}
	return nil
}

// loraTargetsFlag is a LoRA config's targets as --lora_target_modules spells them, or "PEFT's
// default for <model_type>" when none were named.
func loraTargetsFlag(p trainer.Plan) string {
	switch {
	case p.Lora.TargetModulesRegex != "":
		return p.Lora.TargetModulesRegex
	case len(p.Lora.TargetModules) > 0:
		return strings.Join(p.Lora.TargetModules, ",")
	}
	return "PEFT's default for " + p.ModelType
}

// planDTypeLine is the plan's dtype header line.
func planDTypeLine(p trainer.Plan) string {
	param := p.ParamDType
	if param == "" {
		param = "float32"
	}
	var state string
	switch {
	case p.Lora != nil:
		state = fmt.Sprintf("%s frozen base; float32 adapter, gradients and AdamW state", param)
	case param == "float32":
		state = "float32 parameters, gradients and optimizer state"
	default:
		state = fmt.Sprintf("%s parameters, gradients and optimizer state (torch's AdamW keeps its state in the parameter's dtype)", param)
	}
	if p.Optim == "adafactor" && p.Lora == nil {
		state = param + " parameters and gradients, float32 factored optimizer state"
	}
	if p.BF16 {
		return "bf16 compute; " + state
	}
	return "float32 compute; " + state
}

// planLoRALine is the plan's lora header line.
func planLoRALine(p trainer.Plan) string {
	if p.Lora == nil {
		return "no: every parameter is trained"
	}
	return fmt.Sprintf("r %d, alpha %s, targets %s: %s adapter parameters (%.2f%% of the base)", p.Lora.R,
		strconv.FormatFloat(p.Lora.LoraAlpha, 'g', -1, 64), loraTargetsFlag(p), thousands(p.AdapterParams),
		100*float64(p.AdapterParams)/float64(p.Params))
}
