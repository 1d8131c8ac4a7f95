package trainer

// Typed values of TrainingArguments' enumerated fields, HF's enums under Go names
// (transformers.trainer_utils.IntervalStrategy, SaveStrategy, SchedulerType and
// training_args.OptimizerNames). They are strings underneath: an untyped literal still assigns
// (args.EvalStrategy = "steps"), JSON and flags carry the same words as HF's, and a value
// outside the constants is refused naming the field (by Validate, and when JSON is read).

// IntervalStrategy is HF's IntervalStrategy: when eval_strategy and logging_strategy act.
type IntervalStrategy string

const (
	IntervalNo    IntervalStrategy = "no"    // never
	IntervalSteps IntervalStrategy = "steps" // every eval_steps / logging_steps updates
	IntervalEpoch IntervalStrategy = "epoch" // at the end of every epoch
)

// SaveStrategy is HF's SaveStrategy: when save_strategy writes a checkpoint.
type SaveStrategy string

const (
	SaveNo    SaveStrategy = "no"    // never
	SaveSteps SaveStrategy = "steps" // every save_steps updates (and at max_steps)
	SaveEpoch SaveStrategy = "epoch" // at the end of every epoch
	SaveBest  SaveStrategy = "best"  // whenever an evaluation sets a new best metric_for_best_model
)

// SchedulerType is HF's SchedulerType (lr_scheduler_type). Every value below is implemented
// except SchedulerReduceLROnPlateau, which Validate refuses (its learning rate follows
// evaluation results, not the step).
type SchedulerType string

const (
	SchedulerLinear                SchedulerType = "linear"
	SchedulerCosine                SchedulerType = "cosine"
	SchedulerCosineWithRestarts    SchedulerType = "cosine_with_restarts"
	SchedulerPolynomial            SchedulerType = "polynomial"
	SchedulerConstant              SchedulerType = "constant"
	SchedulerConstantWithWarmup    SchedulerType = "constant_with_warmup"
	SchedulerInverseSqrt           SchedulerType = "inverse_sqrt"
	SchedulerReduceLROnPlateau     SchedulerType = "reduce_lr_on_plateau"
	SchedulerCosineWithMinLR       SchedulerType = "cosine_with_min_lr"
	SchedulerCosineWarmupWithMinLR SchedulerType = "cosine_warmup_with_min_lr"
	SchedulerWarmupStableDecay     SchedulerType = "warmup_stable_decay"
)

// OptimizerName is HF's OptimizerNames (optim). The constants are the values gotpu runs; HF's
// other names are refused by Validate as unsupported.
type OptimizerName string

const (
	OptimAdamWTorch      OptimizerName = "adamw_torch"
	OptimAdamWTorchFused OptimizerName = "adamw_torch_fused" // the same AdamW update
	OptimAdamWHF         OptimizerName = "adamw_hf"          // HF's pre-5.0 AdamW class
	OptimAdamWTorchXLA   OptimizerName = "adamw_torch_xla"   // the same AdamW update
	OptimAdafactor       OptimizerName = "adafactor"
)
