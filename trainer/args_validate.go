package trainer

import (
	"math"
	"slices"
	"strconv"
	"strings"
)

// Read-only tables of the values Validate accepts.
var (
	intervalStrategies = []string{"no", "steps", "epoch"}
	saveStrategies     = []string{"no", "steps", "epoch", "best"}
	logLevels          = []string{"passive", "debug", "info", "warning", "error", "critical"}
	// supportedOptimizers are the optim values gotpu runs. adamw_torch_fused, adamw_hf and
	// adamw_torch_xla are implementations of the same AdamW update as adamw_torch (adamw_hf,
	// HF's own pre-5.0 class, applies the decoupled weight decay after the Adam step instead of
	// before it: a difference of order lr²·wd per step).
	supportedOptimizers = []string{"adamw_torch", "adamw_torch_fused", "adamw_hf", "adamw_torch_xla", "adafactor"}
	// hfOptimizers are HF's other OptimizerNames, refused as unsupported rather than unknown.
	hfOptimizers = []string{
		"adamw_torch_npu_fused", "adamw_apex_fused", "adamw_anyprecision", "adamw_torch_4bit",
		"adamw_torch_8bit", "ademamix", "sgd", "adagrad", "adamw_bnb_8bit", "adamw_8bit", "ademamix_8bit",
		"lion_8bit", "lion_32bit", "paged_adamw_32bit", "paged_adamw_8bit", "paged_ademamix_32bit",
		"paged_ademamix_8bit", "paged_lion_32bit", "paged_lion_8bit", "rmsprop", "rmsprop_bnb",
		"rmsprop_bnb_8bit", "rmsprop_bnb_32bit", "galore_adamw", "galore_adamw_8bit", "galore_adafactor",
		"galore_adamw_layerwise", "galore_adamw_8bit_layerwise", "galore_adafactor_layerwise", "lomo",
		"adalomo", "grokadamw", "schedule_free_radam", "schedule_free_adamw", "schedule_free_sgd",
		"apollo_adamw", "apollo_adamw_layerwise", "stable_adamw",
	}
	// supportedReportTo are the integrations gotpu has; "all" expands to them (Finalize).
	supportedReportTo = []string{"tensorboard"}
	// hfIntegrations are HF's other report_to values, refused as unsupported.
	hfIntegrations = []string{"azure_ml", "clearml", "codecarbon", "comet_ml", "dagshub", "dvclive",
		"flyte", "mlflow", "neptune", "swanlab", "trackio", "wandb"}
	tokensSeenModes = []string{"no", "all", "non_padding"}
	// deviceKinds mirrors xla.Config.Device (compared case-insensitively).
	deviceKinds = []string{"auto", "tpu", "cuda", "gpu", "cpu", "go"}
)

// Validate checks every field gotpu implements and reports each problem, naming the field
// (trainer.TrainingArguments.learning_rate: -1 is negative), plus every unsupported HF setting
// recorded in Unsupported. It returns nil or an *ArgumentsError. It does not modify a.
//
// HF's cross-field rules that derive values (eval_steps from logging_steps, load_best_model_at_end
// needing matching strategies…) are checked by Finalize, which HF runs as __post_init__.
func (a *TrainingArguments) Validate() error {
	var l errorList
	oneOf := func(field, v string, allowed []string) {
		if !slices.Contains(allowed, v) {
			l.invalid(field, "%q is not one of %s", v, strings.Join(allowed, ", "))
		}
	}
	nonNegative := func(field string, x float64) {
		switch {
		case math.IsNaN(x) || math.IsInf(x, 0):
			l.invalid(field, "%s is not a finite number", fmtFloat(x))
		case x < 0:
			l.invalid(field, "%s is negative", fmtFloat(x))
		}
	}
	atLeastOne := func(field string, n int) {
		if n < 1 {
			l.invalid(field, "%d is less than 1", n)
		}
	}

	oneOf("eval_strategy", string(a.EvalStrategy), intervalStrategies)
	atLeastOne("per_device_train_batch_size", a.PerDeviceTrainBatchSize)
	atLeastOne("per_device_eval_batch_size", a.PerDeviceEvalBatchSize)
	atLeastOne("gradient_accumulation_steps", a.GradientAccumulationSteps)
	if a.EvalAccumulationSteps != nil {
		atLeastOne("eval_accumulation_steps", *a.EvalAccumulationSteps)
	}
	nonNegative("eval_delay", a.EvalDelay)
	nonNegative("learning_rate", a.LearningRate)
	nonNegative("weight_decay", a.WeightDecay)
	for _, b := range []struct {
		name string
		v    float64
	}{{"adam_beta1", a.AdamBeta1}, {"adam_beta2", a.AdamBeta2}} {
		if !(b.v >= 0 && b.v < 1) { // torch.optim.AdamW: "Invalid beta parameter"
			l.invalid(b.name, "%s is not in [0, 1)", fmtFloat(b.v))
		}
	}
	nonNegative("adam_epsilon", a.AdamEpsilon)
	if x := a.MaxGradNorm; x < 0 && !math.IsInf(x, 0) {
		l.invalid("max_grad_norm", "%s is negative; use 0 to disable clipping", fmtFloat(x))
	} else if math.IsNaN(x) {
		l.invalid("max_grad_norm", "NaN is not a number")
	}
	nonNegative("num_train_epochs", a.NumTrainEpochs)
	if a.MaxSteps == 0 {
		l.invalid("max_steps", "0 trains nothing; use -1 to train num_train_epochs, or a positive number of steps")
	}
	a.validateScheduler(&l)
	if !(a.WarmupRatio >= 0 && a.WarmupRatio <= 1) { // HF: "warmup_ratio must lie in range [0,1]"
		l.invalid("warmup_ratio", "%s is not in [0, 1]", fmtFloat(a.WarmupRatio))
	}
	nonNegative("warmup_steps", a.WarmupSteps)
	oneOf("log_level", a.LogLevel, logLevels)
	oneOf("logging_strategy", string(a.LoggingStrategy), intervalStrategies)
	nonNegative("logging_steps", a.LoggingSteps)
	oneOf("save_strategy", string(a.SaveStrategy), saveStrategies)
	nonNegative("save_steps", a.SaveSteps)
	if !a.SaveSafetensors {
		l.add("TrainingArguments", "save_safetensors", ErrUnsupportedArgument,
			"false — gotpu writes model.safetensors only (no pytorch_model.bin pickles); remove it")
	}
	validSeed := func(field string, s int) {
		if s < 0 || s > math.MaxUint32 { // HF's set_seed seeds numpy, which takes [0, 2**32)
			l.invalid(field, "%d is not in [0, 2**32)", s)
		}
	}
	validSeed("seed", a.Seed)
	if a.DataSeed != nil {
		validSeed("data_seed", *a.DataSeed)
	}
	if a.EvalSteps != nil {
		nonNegative("eval_steps", *a.EvalSteps)
	}
	if a.DataloaderNumWorkers < 0 {
		l.invalid("dataloader_num_workers", "%d is negative", a.DataloaderNumWorkers)
	}
	if a.DataloaderPrefetchFactor != nil {
		atLeastOne("dataloader_prefetch_factor", *a.DataloaderPrefetchFactor)
	}
	a.validateFSDP(&l)
	if x := a.LabelSmoothingFactor; !(x >= 0 && x < 1) {
		l.invalid("label_smoothing_factor", "%s is not in [0, 1)", fmtFloat(x))
	}
	switch {
	case slices.Contains(supportedOptimizers, string(a.Optim)):
	case slices.Contains(hfOptimizers, string(a.Optim)):
		l.add("TrainingArguments", "optim", ErrUnsupportedArgument,
			"%q — not implemented by gotpu (its kernels are CUDA or third-party); use adamw_torch or adafactor", a.Optim)
	default:
		l.invalid("optim", "%q is not one of %s", a.Optim, strings.Join(supportedOptimizers, ", "))
	}
	if a.OptimArgs != "" {
		l.add("TrainingArguments", "optim_args", ErrUnsupportedArgument,
			"%q — HF passes optim_args only to optimizers gotpu does not have, and ignores it for %s; remove it",
			a.OptimArgs, a.Optim)
	}
	for _, r := range a.ReportTo {
		switch {
		case (r == "none" || r == "all") && len(a.ReportTo) > 1: // HF only expands them alone
			l.invalid("report_to", "%q must be the only entry (%s)", r, strings.Join(a.ReportTo, ", "))
		case r == "none" || r == "all" || slices.Contains(supportedReportTo, r):
		case slices.Contains(hfIntegrations, r):
			l.add("TrainingArguments", "report_to", ErrUnsupportedArgument,
				"%q — gotpu reports to %s only; use one of those or none", r, strings.Join(supportedReportTo, ", "))
		default:
			l.invalid("report_to", "%q is not an integration (%s, all or none)", r, strings.Join(supportedReportTo, ", "))
		}
	}
	if len(a.LabelNames) > 0 && !slices.Equal(a.LabelNames, []string{"labels"}) {
		l.add("TrainingArguments", "label_names", ErrUnsupportedArgument,
			"%s — gotpu's models read their labels from \"labels\" only; remove it (or give labels)", strings.Join(a.LabelNames, ","))
	}
	oneOf("include_num_input_tokens_seen", a.IncludeNumInputTokensSeen, tokensSeenModes)
	if a.NeftuneNoiseAlpha != nil {
		nonNegative("neftune_noise_alpha", *a.NeftuneNoiseAlpha)
	}
	if a.DevicePrefetchSize < 1 {
		l.invalid("device_prefetch_size", "%d is not at least 1", a.DevicePrefetchSize)
	}
	if a.MaxConsecutiveNonfinite < 0 {
		l.invalid("max_consecutive_nonfinite", "%d is negative", a.MaxConsecutiveNonfinite)
	}
	if a.NumDevices < 0 {
		l.invalid("num_devices", "%d is negative; use 0 for all devices", a.NumDevices)
	}
	if !slices.Contains(deviceKinds, strings.ToLower(a.Device)) {
		l.invalid("device", "%q is not one of %s", a.Device, strings.Join(deviceKinds, ", "))
	}
	nonNegative("peak_flops", a.PeakFlops)
	for _, u := range a.Unsupported {
		l.add("TrainingArguments", u.Name, ErrUnsupportedArgument, "%s — %s", u.Value, u.Advice)
	}
	return l.err("", "")
}

// validateScheduler checks lr_scheduler_type and that lr_scheduler_kwargs fit it.
func (a *TrainingArguments) validateScheduler(l *errorList) {
	switch {
	case a.LRSchedulerType == "reduce_lr_on_plateau":
		l.add("TrainingArguments", "lr_scheduler_type", ErrUnsupportedArgument,
			`"reduce_lr_on_plateau" — its learning rate depends on evaluation results, which gotpu's step-indexed schedules do not model; use cosine or linear`)
		return
	case !slices.Contains(scheduleTypes, string(a.LRSchedulerType)):
		l.invalid("lr_scheduler_type", "%q is not one of %s", a.LRSchedulerType, strings.Join(scheduleTypes, ", "))
		return
	}
	// The kwargs are checked by building the schedule with placeholder step counts (nothing
	// that depends on the run length can fail). A bad learning rate is reported on its own
	// field, so the schedule is then built with a placeholder rate.
	lr := a.LearningRate
	if math.IsNaN(lr) || math.IsInf(lr, 0) || lr < 0 {
		lr = 1
	}
	if _, err := NewScheduleFromKwargs(a.LRSchedulerType, lr, 0, 1, a.LRSchedulerKwargs); err != nil {
		l.invalid("lr_scheduler_kwargs", "%s", err.Error())
	}
}

// fmtFloat formats a number for messages (shortest form: -1, 5e-05).
func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
