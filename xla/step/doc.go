// Package step is the device side of one training step: per-replica gradients, their all-reduce,
// global-norm clipping and the optimizer update, as graphs on an xla.Runtime. It is the GoMLX half
// of the trainer: trainer/ decides what to run (Hugging Face semantics: schedule, accumulation,
// logging); this package runs it.
//
// A step over N replicas and A accumulation micro-batches runs, for each micro-batch and replica,
// a gradient program that adds the replica's gradients into that replica's accumulator (without
// touching the parameters), then one update program that sums the N accumulators (the all-reduce),
// divides by the number of loss terms of the whole global batch, clips by global norm and applies
// AdamW or Adafactor to every parameter — torch_xla's xm.optimizer_step. Gradients are of the
// summed (not averaged) per-token loss, so N replicas × batch b, 1 replica × batch N·b and
// accumulation all compute the same update: the loss of a step is the mean over all its
// non-ignored tokens (Hugging Face's num_items_in_batch / average_tokens_across_devices).
//
// Non-finite gradients skip the update inside the graph: parameters, moments and the step count
// are kept (the trainer logs it and aborts after a limit). The optimizer state lives in the
// model's GoMLX context under the scope "/optimizer". ExportState copies parameters (by HF name),
// optimizer state ("<kind>/<HF name>") and every other context variable (the RNG state) to host
// memory, whole rather than per device; ImportState restores them onto any replica count.
// PoisonNextStep is a fault-injection hook for tests of the skip path.
//
// On the pure-Go backend the replicas are virtual devices run one after the other; on a PJRT
// plugin this version also runs them on the default device (the in-graph all-reduce across real
// devices is the performance issue's work).
//
// Errors: GoMLX panics are returned as errors (xla.Recover). Concurrency: a Stepper is not safe
// for concurrent use; the trainer owns it.
package step
