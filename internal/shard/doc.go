// Package shard decides how one tensor is laid out over the fsdp axis of a device mesh: the rule
// gotpu's FSDP step (trainer/step), its memory planner (`gotpu plan`) and its tests share, so the
// plan and the run cannot disagree.
//
// The rule (Choose): a tensor is sharded along dimension 0 when that dimension divides evenly by
// the fsdp size — the dimension torch_xla's SpmdFullyShardedDataParallel (HF's FSDPv2) shards by
// default, and for a row-major tensor the one whose shards are contiguous, so a checkpoint gathers
// a tensor by concatenating its shards. Otherwise it is sharded along the first dimension that
// divides evenly (GPT-2's wte is [50257, 768]: 50257 is prime to 8, 768 is not), so no shard
// carries padding and every device holds exactly 1/n of it. A tensor with no such dimension is
// refused (ErrUneven, naming it) rather than padded: padding would change the variable's shape,
// which checkpoints and the PyTorch reference see. Tensors with fewer elements than
// min_num_params (HF's fsdp_config key), and scalars, stay replicated: sharding them saves less
// than the collectives cost.
//
// The package is plumbing: it imports nothing of gotpu, knows no GoMLX, allocates nothing
// proportional to a tensor, and is safe for concurrent use (it has no state).
package shard
