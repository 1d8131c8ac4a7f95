package gobackend

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
)

// Reshapes, identities and slices run natively on any element type without pointers. A reshape
// or identity keeps the flat data as it is, so where both its operand and its result live in
// the arena the plan gives them the same place and nothing runs (planLocal); elsewhere it is one
// copy. A slice is a strided copy whose innermost contiguous runs are moved whole. Run as
// fallback segments they cost an executable call each and a copy, and made every value they read
// a simplego buffer, outside the arena.

// copyPlan is a native Reshape or Identity (alias) or Slice.
type copyPlan struct {
	alias bool
	// A slice: the operand's dimensions, the first index and the stride along each axis, and
	// the result's dimensions.
	inDims, starts, strides, outDims []int
	elem                             int // bytes per element
}

// planCopy returns the plan of n if it is a reshape, identity or slice of a type the arena
// holds, else nil.
func planCopy(n *node) *copyPlan {
	if len(n.inputs) != 1 || len(n.outputs) != 1 || !arenaType(n.outputs[0].shape.DType.GoType()) {
		return nil
	}
	elem := int(n.outputs[0].shape.DType.GoType().Size())
	switch n.op {
	case backends.OpTypeReshape, backends.OpTypeIdentity:
		return &copyPlan{alias: true, elem: elem}
	case backends.OpTypeSlice:
		in, out := n.inputs[0].shape, n.outputs[0].shape
		starts, _ := n.attrs[0].([]int)
		strides, _ := n.attrs[2].([]int)
		p := &copyPlan{inDims: in.Dimensions, outDims: out.Dimensions, starts: make([]int, in.Rank()), strides: make([]int, in.Rank()), elem: elem}
		for ax := range in.Rank() {
			p.strides[ax] = 1
			if ax < len(starts) {
				p.starts[ax] = starts[ax]
			}
			if ax < len(strides) && strides[ax] > 0 {
				p.strides[ax] = strides[ax]
			}
		}
		if len(p.outDims) != len(p.inDims) {
			return nil
		}
		return p
	}
	return nil
}

// run copies the operand's flat data in into out (both slices of the same element type).
func (p *copyPlan) run(in, out any) error {
	src, dst := rawBytes(in), rawBytes(out)
	if p.alias {
		if len(src) != len(dst) {
			return fmt.Errorf("copy of %d bytes into %d (bug)", len(src), len(dst))
		}
		copy(dst, src)
		return nil
	}
	// Row-major strides of the operand, in elements.
	rank := len(p.inDims)
	if rank == 0 {
		copy(dst, src)
		return nil
	}
	inStride := make([]int, rank)
	s := 1
	for ax := rank - 1; ax >= 0; ax-- {
		inStride[ax] = s
		s *= p.inDims[ax]
	}
	// The innermost axis is a contiguous run when its stride is 1.
	last := rank - 1
	run := p.outDims[last] * p.elem
	contiguous := p.strides[last] == 1
	idx := make([]int, rank) // index into the result, axes before last
	d := 0
	for {
		off := 0
		for ax := range last {
			off += (p.starts[ax] + idx[ax]*p.strides[ax]) * inStride[ax]
		}
		off += p.starts[last]
		if contiguous {
			copy(dst[d:d+run], src[off*p.elem:])
			d += run
		} else {
			for k := range p.outDims[last] {
				o := (off + k*p.strides[last]) * p.elem
				copy(dst[d:d+p.elem], src[o:o+p.elem])
				d += p.elem
			}
		}
		ax := last - 1
		for ; ax >= 0; ax-- {
			idx[ax]++
			if idx[ax] < p.outDims[ax] {
				break
			}
			idx[ax] = 0
		}
		if ax < 0 {
			return nil
		}
	}
}
