// Package step is the device side of one training step: per-replica gradients, their all-reduce,
// global-norm clipping and the optimizer update, as graphs on an xla.Runtime. It is the GoMLX half
// of the trainer: trainer/ decides what to run (Hugging Face semantics: schedule, accumulation,
// logging); this package runs it.
//
// A step over N replicas and A accumulation micro-batches is one SPMD program over N devices: on
// gotpu's CPU backend N virtual devices run it concurrently on the host's cores. On a PJRT plugin
// (TPU, GPU) it is the equivalent AutoSharding program — the one-device program over the global
// batch, its rows split over a data mesh and every variable replicated, which XLA's partitioner
// turns into that SPMD program — because GoMLX v0.26.0's XLA backend cannot build SPMD programs
// that read context variables (fsdp_auto.go). For each micro-batch but the
// last, a gradient program adds every replica's gradients into that replica's accumulator on its
// device (no collective, nothing updated); the last micro-batch runs the train program
// (ProgramReplicatedStep): it adds its gradients to the accumulators, one in-graph all-reduce
// (sum over replica_groups {0..N-1}) combines gradients, loss sum and loss-term count, and every
// replica divides by the number of loss terms of the whole global batch, clips by global norm and
// applies AdamW or Adafactor to its copy of every parameter — torch_xla's xm.optimizer_step.
//
// Asynchronous: TransferBatch puts a batch on its devices (the trainer's loader calls it on its
// own goroutines, ahead of the step); Dispatch queues a step on the runtime's executor and returns
// before it runs, transferring and reading nothing; its loss sum, count, grad norm and applied
// flag stay on the device until Collect (or ExportState, which reads them with the state) reads
// every pending step in one blocking read. The per-step optimizer scalars come from a window
// table uploaded at each read and indexed on the device by its own counters (window.go), bitwise
// the values torch computes per step on the host. Step is the synchronous form (transfer,
// dispatch, read) for tests and benchmarks. Gradients are of the summed (not averaged) per-token loss, so N
// replicas × batch b, 1 replica × batch N·b and accumulation all compute the same update: the loss
// of a step is the mean over all its non-ignored tokens (Hugging Face's num_items_in_batch /
// average_tokens_across_devices). Config.LabelSmoothing keeps that rule for HF's label-smoothed loss
// (the sum of per-token smoothed terms over the step's token count, transformers' LabelSmoother with
// num_items_in_batch); Config.NEFTuneAlpha adds NEFTune's noise to the token embeddings in the
// training programs only, from the same RNG as dropout (lossopts.go, models.Batch).
//
// Non-finite gradients skip the update inside the graph: parameters, moments and the step count
// are kept (the trainer logs it and aborts after a limit). The optimizer state lives in the
// model's GoMLX context under the scope "/optimizer". ExportState copies parameters (by HF name),
// optimizer state ("<kind>/<HF name>") and every other context variable (the RNG state) to host
// memory, whole rather than per device; ImportState restores them onto any replica count.
// PoisonNextStep is a fault-injection hook for tests of the skip path. The variables of a
// models.Frozen model's frozen parameters (a LoRA adapter's base) are read by the programs but
// have no gradients or optimizer state and are left out of ExportState and StateSource.
//
// The model's variables are replicated: after a step each holds one copy per device (GoMLX
// distributed values), bitwise identical because every replica applies the same update; reading a
// variable (ExportState, evaluation) takes device 0's copy. Evaluation runs on device 0 (on a
// PJRT plugin, as an AutoSharding program over all the devices, the weights left in place).
//
// FSDP (Config.FSDP, fsdp.go; docs/fsdp.md): over a data × fsdp mesh, every parameter and its
// AdamW moments are split along one dimension over the fsdp axis (internal/shard's layout; small
// tensors replicated), so between steps each device holds only its shards. On a PJRT plugin the
// step is the AutoSharding program FSDPStableHLO prints — trainGraph over the global batch with
// every input, variable and output annotated — and XLA's partitioner inserts the collectives
// (fsdp_auto.go). gotpu's CPU backend has no partitioner: there the step is the partitioned form
// written out as an SPMD program (fsdpGradGraph, fsdpTrainGraph): all-gather of the weights and
// reduce-scatter of the gradients, both through AllReduce (GoMLX's only collective), and the
// optimizer on the shards. Without accumulation the step is element for element the
// data-parallel one (the norm is computed from the whole all-reduced sums in its order); with
// accumulation each micro-batch is reduce-scattered at once and the norm comes from the shards. ExportState merges shards; StateSource stages the state tensor by
// tensor for checkpoints (stage.go), gathering each tensor's shards straight into the caller's
// buffer. ImportState takes whole tensors, sharded for the stepper's mesh at its first step.
//
// Config.GradientCheckpointing (HF's gradient_checkpointing) builds the training programs with
// models.Checkpoints: every decoder layer keeps only its input through the forward pass and is
// rebuilt in the backward pass, which is then differentiated layer by layer; losses, gradients and
// parameters are bitwise those without it. On a plugin under FSDP the rebuilt layers also read
// their weights through the checkpoint's opaque identity, so XLA gathers each layer again instead
// of keeping every layer's gathered weights from the forward pass (docs/fsdp.md).
//
// Parameters of a half-precision dtype (a model loaded with torch_dtype bfloat16) keep AdamW's
// moments in their dtype and are updated with torch's roundings (lowprec.go); float32 parameters
// (mixed precision's masters included) keep float32 moments. Under FSDP a models.Frozen model's
// frozen base is sharded like the parameters (fsdp_frozen.go) and gathered with them, never
// reduced: it has no gradient on any path.
//
// A program's leading inputs are input_ids, attention_mask, an optional fourth — position_ids of a
// packed causal batch (data.PackBFD), token_type_ids of a classifier's; a causal LM's programs take
// no token types and a classifier refuses position ids — and labels (batchInputs, splitBatch). A
// packed batch is one more program shape, compiled once, on every path (replicated, FSDP,
// AutoSharding, evaluation, the loader's transfer).
//
// Stepper.ProgramGraph returns any program's graph function and input shapes, Stepper.StableHLO
// its StableHLO text without a device (xla.StableHLO). Golden tests pin the replicated step's text
// and structure (testdata/golden, regenerated by `make golden`).
//
// Errors: a step for more replicas than the runtime has devices fails naming
// Config.NumReplicas (the Stepper can still trace its programs); GoMLX panics are returned as
// errors (xla.Recover). A step that fails on the device is reported by the next read, naming it
// ("train step 17: ..."); steps queued after it are not run. Concurrency: a Stepper is not safe
// for concurrent use — the trainer owns it — except TransferBatch, which any goroutine may call
// while steps run; its programs run on the runtime's executor goroutine.
package step
