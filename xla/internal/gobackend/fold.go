package gobackend

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
)

// foldTransposes makes every native product that reads a transposed value read the transpose's
// operand instead, with its axes mapped through the permutation, when that leaves the output's
// axis order as it was: the GEMM reads any operand layout while packing its panels (a transposed
// matrix is a stride, not a copy), so the transpose — a full pass over its operand — need not
// run at all once no other operation reads it (Compile's liveness then drops it). GoMLX's
// gradients transpose every weight of a linear layer this way ([3072, 768] and [768, 3072] for
// each GPT-2 MLP), and attention transposes its heads before the batched products.
//
// Only native products are rewritten (they are never replayed on simplego, whose replay still
// has the recorded axes), and a chain of transposes folds one at a time.
func (b *Builder) foldTransposes() {
	readers := make([]int, len(b.values))
	for _, n := range b.nodes {
		for _, in := range n.inputs {
			readers[in.id]++
		}
	}
	for _, n := range b.nodes {
		b.swapTransposedProduct(n, readers)
		b.placeOuterAxis(n, readers)
		b.placeTransposedOutput(n, readers)
		ax, ok := dotAxesOf(n)
		if !ok || !nativeDotDType(n.outputs[0].shape.DType) {
			continue
		}
		changed := false
		for side := range 2 {
			contracting, batch := &ax.lhsContracting, &ax.lhsBatch
			if side == 1 {
				contracting, batch = &ax.rhsContracting, &ax.rhsBatch
			}
			for {
				t := n.inputs[side].node
				if t.op != backends.OpTypeTranspose || len(t.inputs) != 1 {
					break
				}
				perm := t.attrs[0].([]int)
				// Operand axis a is axis perm[a] of the transpose's operand. The free axes keep
				// their order in the output only if perm keeps them in increasing order.
				prev, keeps := -1, true
				for _, a := range freeAxes(len(perm), *contracting, *batch) {
					if perm[a] <= prev {
						keeps = false
						break
					}
					prev = perm[a]
				}
				if !keeps {
					break
				}
				*contracting, *batch = mapAxes(perm, *contracting), mapAxes(perm, *batch)
				n.inputs[side] = t.inputs[0]
				changed = true
			}
		}
		if changed {
			n.axes = &ax
		}
	}
}

// mapAxes returns perm[a] for each a of axes, in a new slice.
func mapAxes(perm, axes []int) []int {
	out := make([]int, len(axes))
	for i, a := range axes {
		out[i] = perm[a]
	}
	return out
}

// swapTransposedProduct turns n, a Transpose of a native product's result that nothing else
// reads, into the product itself with its operands swapped, when the permutation exchanges the
// lhs's free axes with the rhs's (the batch axes first, each group in order): (A·B)ᵀ = Bᵀ·Aᵀ,
// every element the same sum in the same order. GoMLX's gradient of x·W for W [in, out] is a
// product giving [out, in] transposed back to W's layout: with this the GEMM writes it there.
// The product it replaces is then read by nothing and dropped.
func (b *Builder) swapTransposedProduct(n *node, readers []int) {
	if n.op != backends.OpTypeTranspose || len(n.inputs) != 1 {
		return
	}
	d := n.inputs[0].node
	ax, ok := dotAxesOf(d)
	if !ok || !nativeDotDType(d.outputs[0].shape.DType) || readers[n.inputs[0].id] != 1 {
		return
	}
	perm := n.attrs[0].([]int)
	nb := len(ax.lhsBatch)
	nl := d.inputs[0].shape.Rank() - nb - len(ax.lhsContracting)
	nr := d.inputs[1].shape.Rank() - nb - len(ax.rhsContracting)
	if len(perm) != nb+nl+nr {
		return
	}
	want := make([]int, 0, len(perm))
	for a := range nb {
		want = append(want, a)
	}
	for a := range nr {
		want = append(want, nb+nl+a)
	}
	for a := range nl {
		want = append(want, nb+a)
	}
	if !slices.Equal(perm, want) {
		return
	}
	n.op = backends.OpTypeDotGeneral
	n.inputs = []*value{d.inputs[1], d.inputs[0]}
	n.axes = &dotAxes{lhsContracting: ax.rhsContracting, lhsBatch: ax.rhsBatch, rhsContracting: ax.lhsContracting, rhsBatch: ax.lhsBatch}
	n.attrs = nil
	readers[d.outputs[0].id]--
	for _, in := range n.inputs {
		readers[in.id]++
	}
}

// placeOuterAxis turns n, a Transpose of a native outer product with a short vector (dot_vec.go)
// that nothing else reads, into that product writing the vector's axis where the transpose puts
// it, when the transpose only moves that (last) axis: core.Select's gradient is such a product,
// [..., d, 3] transposed to [..., 3, d], which is then written as three contiguous rows.
func (b *Builder) placeOuterAxis(n *node, readers []int) {
	if n.op != backends.OpTypeTranspose || len(n.inputs) != 1 {
		return
	}
	d := n.inputs[0].node
	ax, ok := dotAxesOf(d)
	if !ok || d.outerAt != nil || !nativeDotDType(d.outputs[0].shape.DType) || readers[n.inputs[0].id] != 1 ||
		planVec(d.inputs[0].shape, d.inputs[1].shape, ax) == nil || len(ax.lhsContracting) != 0 {
		return
	}
	perm := n.attrs[0].([]int)
	last := len(perm) - 1
	at := slices.Index(perm, last)
	rest := slices.Delete(slices.Clone(perm), at, at+1)
	for i, a := range rest {
		if a != i {
			return
		}
	}
	n.op = backends.OpTypeDotGeneral
	n.inputs = slices.Clone(d.inputs)
	n.axes = &ax
	n.outerAt = &at
	n.attrs = nil
	readers[d.outputs[0].id]--
	for _, in := range n.inputs {
		readers[in.id]++
	}
}

// placeTransposedOutput turns n, a Transpose of a native product's result that nothing else
// reads, into the product writing its elements where the transpose puts them, when the GEMM can:
// the lhs's free axes must land as one strided run (the rows, ldc apart) and the rhs's as one
// contiguous run (see outputLayout); the batch axes may go anywhere. If the product's own axis
// order cannot, its swap (A·B)ᵀ = Bᵀ·Aᵀ, which exchanges the two runs, is tried. Attention
// writes its heads this way: [batch, heads, seq, dim] products transposed to
// [batch, seq, heads, dim] ([2, 12, 512, 64] to [2, 512, 12, 64], 24 a GPT-2 124M step, and
// the value gradient's [2, 12, 64, 512] the same way once swapped) — with this the
// GEMM writes rows 768 apart and the transposes, full passes over 3 MiB, are gone. Every
// element is the same sum in the same order; only where it is stored changes.
func (b *Builder) placeTransposedOutput(n *node, readers []int) {
	if n.op != backends.OpTypeTranspose || len(n.inputs) != 1 {
		return
	}
	d := n.inputs[0].node
	ax, ok := dotAxesOf(d)
	if !ok || d.outerAt != nil || d.outStrides != nil || !nativeDotDType(d.outputs[0].shape.DType) ||
		readers[n.inputs[0].id] != 1 || planVec(d.inputs[0].shape, d.inputs[1].shape, ax) != nil {
		return
	}
	perm := n.attrs[0].([]int)
	dims := d.outputs[0].shape.Dimensions
	nb := len(ax.lhsBatch)
	nl := d.inputs[0].shape.Rank() - nb - len(ax.lhsContracting)
	if len(perm) != len(dims) || nl < 0 || nb+nl > len(dims) {
		return
	}
	// st[i] is where natural axis i steps in the transpose's row-major output.
	outSt := rowMajorStrides(n.outputs[0].shape.Dimensions)
	st := make([]int, len(perm))
	for j, i := range perm {
		st[i] = outSt[j]
	}
	inputs := []*value{d.inputs[0], d.inputs[1]}
	if _, ok := outputLayout(dims, st, nb, nl); !ok {
		// Swapped: the rhs's free axes become the rows.
		nr := len(dims) - nb - nl
		swDims := concat(dims[:nb], dims[nb+nl:], dims[nb:nb+nl])
		swSt := concat(st[:nb], st[nb+nl:], st[nb:nb+nl])
		if _, ok := outputLayout(swDims, swSt, nb, nr); !ok {
			return
		}
		st = swSt
		inputs = []*value{d.inputs[1], d.inputs[0]}
		ax = dotAxes{lhsContracting: ax.rhsContracting, lhsBatch: ax.rhsBatch, rhsContracting: ax.lhsContracting, rhsBatch: ax.lhsBatch}
	}
	n.op = backends.OpTypeDotGeneral
	n.inputs = inputs
	n.axes = &ax
	n.outStrides = st
	n.attrs = nil
	readers[d.outputs[0].id]--
	for _, in := range n.inputs {
		readers[in.id]++
	}
}
