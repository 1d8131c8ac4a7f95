// Package trainer is gotpu's Hugging Face Trainer: Trainer (New, Train, Evaluate, Predict,
// SaveModel, SaveState) with HF's names, defaults and numbers, over any xla.Runtime, with its
// arguments (TrainingArguments), learning-rate schedules (Schedule), state (TrainerState),
// callbacks and metrics.
//
// # Training
//
// Each optimizer update takes gradient_accumulation_steps global micro-batches from a
// data.Loader (prefetching on its own goroutines); each micro-batch is split into one shard per
// replica, and trainer/step runs the step as one SPMD program over the runtime's devices (on a
// PJRT plugin, the AutoSharding program XLA partitions into it) — every replica's gradients, an
// in-graph all-reduce, clipping, and torch's AdamW or HF's Adafactor (HF's decay groups) at the
// schedule's rate. With fsdp full_shard or hybrid_shard (FSDPPlan) parameters, gradients and
// optimizer state are sharded over a data × fsdp mesh and checkpoints are staged tensor by tensor
// (docs/fsdp.md). The loss of
// a step is the mean over all its non-ignored tokens, so replica and accumulation layouts give
// the same updates. Logging, evaluation and saving follow HF's DefaultFlowCallback (Flow); each
// log entry has HF's keys (loss rounded to 4 decimals, grad_norm, learning_rate, epoch, step)
// plus gotpu's throughput metrics (tokens_per_second, step_seconds, input_wait_seconds,
// compile_count, mfu; see Meter). Entries go to TrainerState.LogHistory, output_dir/
// log_history.jsonl, slog, the progress bar and, with report_to tensorboard, TensorBoard event
// files. Callbacks (Callback, with HF's control flags; EarlyStopping) run after the built-in ones.
// Evaluations report eval_loss plus what Options.ComputeMetrics (HF's compute_metrics; Accuracy
// for classifiers) returns from the logits and labels, eval_-prefixed; as in HF, only the
// evaluations Train runs compete for best_metric, and load_best_model_at_end makes the best
// checkpoint's weights the ones Model, Evaluate and Predict use afterwards.
// Cancelling the context stops Train after the current step (the update in progress always
// completes) and, unless save_strategy is "no", saves a checkpoint there: `gotpu train` maps
// SIGTERM/SIGINT to that and exits 0. Non-finite gradients skip the update (weights and
// optimizer state unchanged); max_consecutive_nonfinite in a row abort with ErrNonFinite.
// Options.NonFiniteAt injects such steps in tests.
//
// # LoRA
//
// A model with a LoRA adapter (models/peft: attached beforehand, or by Options.PeftConfig, TRL's
// peft_config; ModelDataArguments.PeftConfig reads TRL's --use_peft/--lora_* flags) trains the
// adapter only: it is the model's Params, the base weights its models.Frozen parameters, which
// get no gradients and no optimizer state and stay out of checkpoints. checkpoint-N then holds
// adapter_model.safetensors + adapter_config.json (PEFT's files) in place of model.safetensors +
// config.json, and resume, load_best_model_at_end (the best adapter is loaded in place), the
// budget check (gradients and moments of the adapter only) and ParamCounts /
// OptimizerStateBytes (logged at New) account for it.
//
// # Checkpoints and resume
//
// Saves go through one checkpoint.Writer per run (package checkpoint: atomic commit, manifest
// with checksums, leftovers of crashed saves cleaned at start, save_total_limit that never
// deletes best_model_checkpoint). A save stages everything in host memory (Stepper.ExportState
// copies the device buffers), then training continues while the writer's goroutine writes it
// (Options.SyncCheckpoints waits instead); Train waits for the last save before it returns.
// checkpoint-N holds model.safetensors + config.json (HF layout), optimizer.safetensors (keyed
// "adamw_m/<HF name>"…), rng_state.safetensors (the dropout RNG), trainer_state.json,
// training_args.json, scheduler.json and gotpu_state.json (loader position, optimizer step,
// accumulated loss). resume_from_checkpoint (a directory, or "true" for the latest committed one
// in output_dir) verifies the checkpoint, then restores all of it: the continued run is bitwise
// the uninterrupted one on the same device count, and within float32 rounding on another device
// count with the same global batch (a different global batch is refused). New seeds the RNG
// from args.seed (HF's set_seed), so runs repeat exactly.
//
// A resumed checkpoint is untrusted input (its checksums only show the manifest was rewritten
// with the files), checked before anything is imported or written: global_step must equal the
// manifest's step, the optimizer's update count (gotpu_state.json and optimizer.safetensors'
// metadata) lie in [0, global_step], scheduler.json be at global_step; best_model_checkpoint is
// followed only to a checkpoint-N of output_dir (committed, when load_best_model_at_end will load
// it) — anything else is an error naming trainer_state.json and the field, where HF trusts the
// path; trial_name, trial_params and is_hyper_param_search are dropped with a warning (gotpu runs
// no search, and trial_name would become a TensorBoard path). Errors wrap checkpoint.ErrCorrupt.
//
// # Arguments
//
// TrainingArguments is a plain struct whose JSON names are HF's (learning_rate,
// per_device_train_batch_size…). DefaultTrainingArguments returns HF's defaults (transformers
// 5.x, and 4.57 for the fields 5.0 removed; see TrainingArguments). Arguments come from:
//   - an argument file: LoadTrainingArguments / ParseTrainingArgumentsJSON read what
//     TrainingArguments.to_json_string() or to_dict() wrote (any version from 4.28 to 5.x) or
//     what a user passes to an HfArgumentParser script; model/data keys of HF's example scripts
//     (model_name_or_path, block_size…) go to ModelDataArguments;
//   - command-line flags: RegisterFlags (HF's flag names), merged over a file with MergeFlags;
//   - Go code.
//
// Then Finalize computes HF's derived values (its __post_init__) and Validate checks
// everything. ToJSON writes the arguments in to_json_string's layout.
//
// HF fields gotpu does not implement are accepted when they hold HF's default in any form HF
// writes it (debug: [], the default accelerator_config dict,
// "<HUB_TOKEN>", null for an unset bool…) and refused otherwise, with what to do instead
// ("fp16: true — TPUs have no fp16 autocast; use bf16"). A few fields that only configure
// machinery gotpu lacks (torch.distributed, the Hub, SageMaker) are accepted with any value.
// Keys of other config classes (TRL's GRPOConfig, Seq2SeqTrainingArguments…) are refused by
// name. The table of every HF field is in args_hf_fields.go.
//
// # Schedules
//
// NewSchedule builds one of transformers/optimization.py's schedules (linear, cosine,
// cosine_with_restarts, polynomial, constant, constant_with_warmup, inverse_sqrt,
// cosine_with_min_lr, cosine_warmup_with_min_lr, warmup_stable_decay) with that file's
// defaults; NewScheduleFromKwargs and TrainingArguments.Schedule pass lr_scheduler_kwargs as
// HF's get_scheduler does. Schedule.LR(k) is the rate of the update with 0-based index k
// (LambdaLR semantics); Schedule.LoggedLR(s) is what HF ≥ 4.46 logs as learning_rate at global
// step s, LR(s-1). reduce_lr_on_plateau is refused: its rate depends on evaluation results.
//
// # Trainer state
//
// TrainerState reads every trainer_state.json schema from transformers 4.x to 5.x and writes
// HF's layout byte for byte (json.dumps(indent=2, sort_keys=True) + "\n", Python's float
// repr, ensure_ascii), keeping unknown log keys and top-level fields. The Python-compatible JSON
// reader and writer behind it (JSONValue) keep the int/float distinction and accept NaN and
// Infinity, which encoding/json cannot. PyFloatRepr and PyRound reproduce Python's repr(float)
// and round(x, n).
//
// # Errors
//
// Argument problems are reported all at once as an *ArgumentsError holding one *FieldError
// per field, each naming the field as trainer.TrainingArguments.<hf_name> and, with a file,
// the file; errors.Is matches ErrInvalidArgument, ErrUnsupportedArgument and
// ErrUnknownArgument. Malformed JSON wraps ErrJSONSyntax with a line and column; schedule
// problems wrap ErrSchedule. Other errors are wrapped with %w and name the file and field.
//
// # Resource budget
//
// New checks the run against the machine before it allocates optimizer state or reads a batch
// (CheckBudget, budget.go): a global batch larger than the training set is refused, and the
// estimated bytes of parameters, gradients, optimizer state (AdamW's two moments, Adafactor's
// factored ones), activations (per layer and token, × batch × sequence length) and input
// batches are compared with the host's available memory on the pure-Go backend. The error says
// what was asked, what is available and which argument to change; EstimateMemory documents the
// estimate and its known error. Services call CheckBudget themselves before accepting a job.
//
// # Pipeline
//
// Host and device never take turns (loop.go, docs/pipeline.md): the loader's goroutines read,
// collate and transfer batch n+1 while step n runs; Train dispatches each step and goes on; the
// losses, norms and skip flags are read only at logging, evaluation and save points and at the
// end (one blocking read each), and each training log entry carries host_syncs and
// device_idle_fraction for its interval. Options.Lockstep turns the pipeline off.
//
// # Concurrency
//
// TrainingArguments, ModelDataArguments, TrainerState and LogEntry are values with no hidden
// state: copy them freely, but do not mutate one from several goroutines. Schedule, Flow and
// JSONValue are immutable and safe for concurrent use. The package has no global mutable
// state. A Trainer is used from one goroutine; Train's data.Loader prepares training batches on
// its own goroutines, and Evaluate and Predict read and collate the next evaluation batch on one
// producer goroutine (dataloader_prefetch_factor batches ahead) while the device evaluates the
// current one; each is stopped and waited for before the call that started it returns.
package trainer
