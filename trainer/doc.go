// Package trainer will hold Trainer and TrainingArguments with Hugging Face's field names,
// defaults and numbers, and data-parallel training over the devices of an xla.Runtime
// (per-replica gradients, all-reduce, one update: torch_xla's xm.optimizer_step).
//
// It is specified by the trainer issue and is not implemented yet; the package exists so the
// layout of the module is the designed one.
package trainer
