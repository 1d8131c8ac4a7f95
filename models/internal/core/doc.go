// Package core is the architecture-independent machinery of gotpu's HF models: config.json
// round-tripping (RawConfig), the parameter table type, checkpoint opening (single file, shards,
// refusal of pickles), loading tensors into device buffers with validation, saving with HF's
// sharding, HF's layer formulas (LayerNorm, RMSNorm, attention, activations, dropout) and losses,
// positions and block-diagonal causal masks of packed batches (packing.go),
// the KV cache, and Run, which executes one forward (and gradient) graph.
//
// Errors name the file and the tensor or field. Graph-building helpers panic on bad shapes, as
// GoMLX does; callers recover at their API edge. There is no package state.
package core
