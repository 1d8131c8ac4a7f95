// Package trainer holds the model-independent parts of gotpu's training loop, with Hugging
// Face's names, defaults and numbers: the arguments (TrainingArguments), the learning-rate
// schedules (Schedule), the checkpointed trainer state (TrainerState), and the step arithmetic
// HF's Trainer derives from them. The Trainer that runs data-parallel updates over an
// xla.Runtime builds on these.
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
// writes it (fsdp: [], debug: [], the default fsdp_config and accelerator_config dicts,
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
// # Concurrency
//
// TrainingArguments, ModelDataArguments, TrainerState and LogEntry are values with no hidden
// state: copy them freely, but do not mutate one from several goroutines. Schedule, Flow and
// JSONValue are immutable and safe for concurrent use. The package has no global mutable
// state.
package trainer
