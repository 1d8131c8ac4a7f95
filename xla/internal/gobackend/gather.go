package gobackend

import (
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// An all-gather written as an all-reduce. GoMLX v0.26.0's graph API has no all-gather, so gotpu's
// FSDP step gathers a shard x over a replica group as
//
//	AllReduce(sum, Mul(BroadcastInDim(Reshape(x) [1, x…]) [n, x…], Reshape(mask) [n, 1, …]))
//
// where mask [n] is a float32 ConvertDType of a boolean (each replica's one-hot row). Written out,
// every replica materialises an [n, x…] product — the whole tensor, once per replica — only for
// the all-reduce to add zeros. The builder recognises the operand at AllReduce and records a row
// gather instead (rowsOperand), which reads x and mask and computes each output row k as
//
//	Σ over the group, in group order, of mask_j[k] · x_j
//
// exactly the all-reduce's arithmetic (the same products added in the same order, NaN and signed
// zeros included), without the products: the whole tensor exists once per group, as the result.

// rowsAttr marks an AllReduce node that is a row gather (attrs[2]).
const rowsAttr = "rows"

// rowsOperand reports whether v is the product above, returning the shard x and the mask.
func rowsOperand(v *value) (x, mask *value, ok bool) {
	n := v.node
	if n.op != backends.OpTypeMul || len(n.inputs) != 2 || v.shape.DType != dtypes.Float32 || v.shape.Rank() < 1 {
		return nil, nil, false
	}
	for k := range 2 {
		bcast, mk := n.inputs[k], n.inputs[1-k]
		if x, ok := broadcastRow(bcast, v); ok {
			if m, ok := rowMask(mk, v); ok {
				return x, m, true
			}
		}
	}
	return nil, nil, false
}

// broadcastRow matches BroadcastInDim(Reshape(x) [1, x…]) to out's [n, x…] with identity axes.
func broadcastRow(b *value, out *value) (*value, bool) {
	if b.node.op != backends.OpTypeBroadcastInDim || !b.shape.Equal(out.shape) {
		return nil, false
	}
	axes, ok := b.node.attrs[1].([]int)
	r := b.node.inputs[0]
	if !ok || r.node.op != backends.OpTypeReshape || r.shape.Rank() != out.shape.Rank() || r.shape.Dimensions[0] != 1 {
		return nil, false
	}
	for i, a := range axes {
		if a != i {
			return nil, false
		}
	}
	if len(axes) != r.shape.Rank() {
		return nil, false
	}
	x := r.node.inputs[0]
	if x.shape.DType != dtypes.Float32 || !slices.Equal(x.shape.Dimensions, out.shape.Dimensions[1:]) {
		return nil, false
	}
	return x, true
}

// rowMask matches Reshape(ConvertDType(boolean) [n]) to [n, 1, …] of out's rank.
func rowMask(mk *value, out *value) (*value, bool) {
	if mk.node.op != backends.OpTypeReshape || mk.shape.Rank() != out.shape.Rank() || mk.shape.DType != dtypes.Float32 {
		return nil, false
	}
	rows := out.shape.Dimensions[0]
	if mk.shape.Dimensions[0] != rows {
		return nil, false
	}
	for _, d := range mk.shape.Dimensions[1:] {
		if d != 1 {
			return nil, false
		}
	}
	m := mk.node.inputs[0]
	if m.node.op != backends.OpTypeConvertDType || !slices.Equal(m.shape.Dimensions, []int{rows}) ||
		m.node.inputs[0].shape.DType != dtypes.Bool {
		return nil, false
	}
	return m, true
}

// gatherRows runs replica r's part of a row gather: it posts its shard and mask (the group's first
// member also the result, which alloc makes), waits for its group, computes its share of the rows
// from every member's shard and mask in group order, and waits until the group is done. It
// returns the result the group shares (read-only, like an all-reduce's).
func (c *collectives) gatherRows(p *allReducePlan, r int, x, mask []float32, alloc func() ([]float32, backends.Buffer, error)) (backends.Buffer, error) {
	bar := c.barriers(p)[p.groupOf[r]]
	slot := collectiveSlot{ins: []any{x, mask}}
	if p.rank[r] == 0 {
		out, buf, err := alloc()
		if err != nil {
			c.fail()
			return nil, err
		}
		slot.outs, slot.bufs = []any{out}, []backends.Buffer{buf}
		c.hold(slot.bufs, len(p.groups[p.groupOf[r]]))
	}
	c.slots[r] = slot
	if err := bar.wait(); err != nil {
		return nil, err
	}
	members := p.groups[p.groupOf[r]]
	lead := c.slots[members[0]]
	out := lead.outs[0].([]float32)
	rows, width := len(mask), len(x)
	for _, j := range members {
		if len(c.slots[j].ins[0].([]float32)) != width || len(c.slots[j].ins[1].([]float32)) != rows {
			c.fail()
			return nil, fmt.Errorf("row gather: replica %d's shard or mask has another size", j)
		}
	}
	if len(out) != rows*width {
		c.fail()
		return nil, fmt.Errorf("row gather: %d results for %d rows of %d (bug)", len(out), rows, width)
	}
	m := len(members)
	for k := p.rank[r] * rows / m; k < (p.rank[r]+1)*rows/m; k++ {
		row := out[k*width : (k+1)*width]
		first := c.slots[members[0]]
		s, xs := first.ins[1].([]float32)[k], first.ins[0].([]float32)
		for e := range row {
			row[e] = xs[e] * s
		}
		for _, j := range members[1:] {
			s, xs := c.slots[j].ins[1].([]float32)[k], c.slots[j].ins[0].([]float32)
			for e := range row {
				row[e] += xs[e] * s
			}
		}
	}
	buf := lead.bufs[0]
	if err := bar.wait(); err != nil {
		return nil, err
	}
	return buf, nil
}
