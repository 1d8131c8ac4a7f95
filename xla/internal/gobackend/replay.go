package gobackend

import "github.com/gomlx/gomlx/backends"

// replayableOps are the fallback operations cheap enough to recompute in every segment that
// reads them when their operands are constants: what builds a full-size constant.
var replayableOps = map[backends.OpType]bool{
	backends.OpTypeBroadcastInDim: true, backends.OpTypeBroadcast: true, backends.OpTypeReshape: true,
	backends.OpTypeConvertDType: true, backends.OpTypeIota: true,
}

// replayables marks, by node id, the operations replayed into each segment that reads them
// instead of passed between steps as buffers: constants (as always), and replayableOps whose
// operands are all replayable — the attention layers' [batch, heads, T, S] fill of the masked
// scores, which would otherwise be computed once and held from the forward pass to the
// backward one, 24 MiB a layer for GPT-2 124M. A value a native operation reads, or an output,
// still becomes a buffer (it is exported, and computed in its own slot's segment).
func (b *Builder) replayables(needed []bool, isNative func(int) bool, isOutput []bool) []bool {
	r := make([]bool, len(b.nodes))
	for _, n := range b.nodes {
		if !needed[n.id] || isNative(n.id) || len(n.outputs) != 1 {
			continue
		}
		switch {
		case n.op == backends.OpTypeConstant:
			r[n.id] = true
		case replayableOps[n.op] && !isOutput[n.outputs[0].id]:
			ok := true
			for _, in := range n.inputs {
				ok = ok && r[in.node.id]
			}
			r[n.id] = ok
		}
	}
	return r
}
