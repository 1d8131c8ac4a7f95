package gobackend

import (
	"context"
	"fmt"
	"slices"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/gotpu/gotpu/xla/internal/gemm"
)

// dotAxes are a DotGeneral's axes: contracting axes pair up in order, and so do batch axes.
type dotAxes struct {
	lhsContracting, lhsBatch, rhsContracting, rhsBatch []int
}

// dotPlan is how one DotGeneral runs on the GEMM: as Batch products of an M×K by a K×N matrix,
// each operand either read in place (possibly as a transposed matrix) or first transposed into
// a packed [batch, rows, cols] scratch buffer when its axes are not laid out that way.
//
// The output of a DotGeneral is [batch..., lhsFree..., rhsFree...], which is exactly the
// row-major [Batch, M, N] the GEMM writes, so the output never needs a copy.
type dotPlan struct {
	dtype      dtypes.DType // Float32 or BFloat16 (inputs and output)
	batch      int
	m, n, k    int
	lhs, rhs   operandLayout
	out        shapes.Shape
	lhsS, rhsS shapes.Shape
	// vec, if set, runs the product instead of the GEMM (dot_vec.go); lhs and rhs are then
	// unused.
	vec *vecPlan
}

// operandLayout says how the GEMM reads one operand.
type operandLayout struct {
	// perm, if not nil, transposes the operand into a packed buffer first (dst axis i = src
	// axis perm[i]); the packed operand is then read untransposed.
	perm []int
	// trans: the operand (as stored, or packed) is [batch, K, M] for lhs or [batch, N, K] for rhs.
	trans bool
}

// nativeDotDTypes are the dtypes the GEMM multiplies.
func nativeDotDType(dt dtypes.DType) bool { return dt == dtypes.Float32 || dt == dtypes.BFloat16 }

// dotAxesOf returns the axes of a recorded DotGeneral or Dot node.
func dotAxesOf(n *node) (dotAxes, bool) {
	if n.axes != nil {
		return *n.axes, true
	}
	switch n.op {
	case backends.OpTypeDotGeneral:
		return dotAxes{
			lhsContracting: n.attrs[0].([]int), lhsBatch: n.attrs[1].([]int),
			rhsContracting: n.attrs[2].([]int), rhsBatch: n.attrs[3].([]int),
		}, true
	case backends.OpTypeDot:
		// Dot is a DotGeneral contracting lhs's last axis with rhs's first (ranks 1 or 2).
		lr, rr := n.inputs[0].shape.Rank(), n.inputs[1].shape.Rank()
		if lr < 1 || lr > 2 || rr < 1 || rr > 2 || (lr == 1 && rr == 2) {
			return dotAxes{}, false
		}
		return dotAxes{lhsContracting: []int{lr - 1}, lhsBatch: []int{}, rhsContracting: []int{0}, rhsBatch: []int{}}, true
	}
	return dotAxes{}, false
}

// planDot returns the plan of a DotGeneral of lhs and rhs to out, or an error if the axes are
// inconsistent with the shapes (or the dtype is not one the GEMM handles).
func planDot(lhs, rhs, out shapes.Shape, ax dotAxes) (*dotPlan, error) {
	if lhs.DType != rhs.DType || !nativeDotDType(lhs.DType) || out.DType != lhs.DType {
		return nil, fmt.Errorf("dtypes %s x %s -> %s are not native (float32 or bfloat16 only)", lhs.DType, rhs.DType, out.DType)
	}
	if len(ax.lhsContracting) != len(ax.rhsContracting) || len(ax.lhsBatch) != len(ax.rhsBatch) {
		return nil, fmt.Errorf("unpaired axes %+v", ax)
	}
	if !distinctAxes(lhs.Rank(), ax.lhsContracting, ax.lhsBatch) || !distinctAxes(rhs.Rank(), ax.rhsContracting, ax.rhsBatch) {
		return nil, fmt.Errorf("axes %+v out of range or repeated for %s x %s", ax, lhs, rhs)
	}
	p := &dotPlan{dtype: lhs.DType, batch: 1, m: 1, n: 1, k: 1, out: out, lhsS: lhs, rhsS: rhs}
	for i, a := range ax.lhsBatch {
		if lhs.Dimensions[a] != rhs.Dimensions[ax.rhsBatch[i]] {
			return nil, fmt.Errorf("batch axis pair %d has sizes %d and %d", i, lhs.Dimensions[a], rhs.Dimensions[ax.rhsBatch[i]])
		}
		p.batch *= lhs.Dimensions[a]
	}
	for i, a := range ax.lhsContracting {
		if lhs.Dimensions[a] != rhs.Dimensions[ax.rhsContracting[i]] {
			return nil, fmt.Errorf("contracting axis pair %d has sizes %d and %d", i, lhs.Dimensions[a], rhs.Dimensions[ax.rhsContracting[i]])
		}
		p.k *= lhs.Dimensions[a]
	}
	lhsFree := freeAxes(lhs.Rank(), ax.lhsContracting, ax.lhsBatch)
	rhsFree := freeAxes(rhs.Rank(), ax.rhsContracting, ax.rhsBatch)
	want := make([]int, 0, out.Rank())
	for _, a := range ax.lhsBatch {
		want = append(want, lhs.Dimensions[a])
	}
	for _, a := range lhsFree {
		want = append(want, lhs.Dimensions[a])
		p.m *= lhs.Dimensions[a]
	}
	for _, a := range rhsFree {
		want = append(want, rhs.Dimensions[a])
		p.n *= rhs.Dimensions[a]
	}
	if !slices.Equal(want, out.Dimensions) {
		return nil, fmt.Errorf("axes %+v of %s x %s give dimensions %v, the output is %s", ax, lhs, rhs, want, out)
	}

	// The K index must be flattened the same way on both sides. The contracting pairs may be
	// taken in any order, so try the order as listed and the memory order of each operand, and
	// keep the one that copies the fewest elements.
	best := -1
	for _, order := range contractingOrders(ax) {
		lc, rc := pick(ax.lhsContracting, order), pick(ax.rhsContracting, order)
		var l, r operandLayout
		cost := 0
		switch {
		case isIdentity(ax.lhsBatch, lhsFree, lc):
		case isIdentity(ax.lhsBatch, lc, lhsFree):
			l.trans = true
		default:
			l.perm = concat(ax.lhsBatch, lhsFree, lc)
			cost += lhs.Size()
		}
		switch {
		case isIdentity(ax.rhsBatch, rc, rhsFree):
		case isIdentity(ax.rhsBatch, rhsFree, rc):
			r.trans = true
		default:
			r.perm = concat(ax.rhsBatch, rc, rhsFree)
			cost += rhs.Size()
		}
		if best < 0 || cost < best {
			best, p.lhs, p.rhs = cost, l, r
		}
	}
	if p.vec = planVec(lhs, rhs, ax); p.vec != nil {
		p.lhs, p.rhs = operandLayout{}, operandLayout{} // nothing is packed
	}
	return p, nil
}

// contractingOrders lists candidate orders of the contracting pairs: as listed, by lhs axis, by
// rhs axis.
func contractingOrders(ax dotAxes) [][]int {
	n := len(ax.lhsContracting)
	listed := make([]int, n)
	for i := range listed {
		listed[i] = i
	}
	byL, byR := slices.Clone(listed), slices.Clone(listed)
	slices.SortFunc(byL, func(a, b int) int { return ax.lhsContracting[a] - ax.lhsContracting[b] })
	slices.SortFunc(byR, func(a, b int) int { return ax.rhsContracting[a] - ax.rhsContracting[b] })
	return [][]int{listed, byL, byR}
}

func pick(axes, order []int) []int {
	out := make([]int, len(order))
	for i, o := range order {
		out[i] = axes[o]
	}
	return out
}

func concat(lists ...[]int) []int {
	var out []int
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// isIdentity reports whether the concatenated lists are 0, 1, 2, ...
func isIdentity(lists ...[]int) bool {
	i := 0
	for _, l := range lists {
		for _, a := range l {
			if a != i {
				return false
			}
			i++
		}
	}
	return true
}

func distinctAxes(rank int, lists ...[]int) bool {
	seen := make([]bool, rank)
	for _, l := range lists {
		for _, a := range l {
			if a < 0 || a >= rank || seen[a] {
				return false
			}
			seen[a] = true
		}
	}
	return true
}

// freeAxes lists, in increasing order, the axes that are neither contracted nor batch: the order
// in which DotGeneral emits them.
func freeAxes(rank int, contracting, batch []int) []int {
	used := make([]bool, rank)
	for _, a := range contracting {
		used[a] = true
	}
	for _, a := range batch {
		used[a] = true
	}
	var free []int
	for a := range rank {
		if !used[a] {
			free = append(free, a)
		}
	}
	return free
}

// dotScratch holds one execution's packed-operand buffers; they grow to the largest size seen.
type dotScratch struct {
	a, b     []float32
	a16, b16 []uint16
	vec      []float32 // float32 sums of a bfloat16 product with a short vector (dot_vec.go)
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// gemmOp is the GEMM description of the plan.
func (p *dotPlan) gemmOp() (gemm.Op, gemm.Batch) {
	return gemm.Op{M: p.m, N: p.n, K: p.k, TransA: p.lhs.trans, TransB: p.rhs.trans},
		gemm.Batch{Count: p.batch, StrideA: p.m * p.k, StrideB: p.k * p.n, StrideC: p.m * p.n}
}

// run computes out = DotGeneral(lhs, rhs); the slices are the buffers' flat data.
func (p *dotPlan) run(ctx context.Context, pool *gemm.Pool, s *dotScratch, lhs, rhs, out any) error {
	if p.batch == 0 || p.m == 0 || p.n == 0 {
		return nil
	}
	if p.vec != nil {
		p.vec.run(p.dtype, lhs, rhs, out, &s.vec)
		return nil
	}
	op, batch := p.gemmOp()
	switch p.dtype {
	case dtypes.Float32:
		a, b, c := lhs.([]float32), rhs.([]float32), out.([]float32)
		if p.k == 0 {
			clear(c)
			return nil
		}
		if p.lhs.perm != nil {
			s.a = grow(s.a, len(a))
			transpose(s.a, a, p.lhsS.Dimensions, p.lhs.perm)
			a = s.a
		}
		if p.rhs.perm != nil {
			s.b = grow(s.b, len(b))
			transpose(s.b, b, p.rhsS.Dimensions, p.rhs.perm)
			b = s.b
		}
		return pool.Float32Batched(ctx, op, batch, a, b, c)
	case dtypes.BFloat16:
		a, b, c := bf16Bits(lhs.([]bfloat16.BFloat16)), bf16Bits(rhs.([]bfloat16.BFloat16)), bf16Bits(out.([]bfloat16.BFloat16))
		if p.k == 0 {
			clear(c)
			return nil
		}
		if p.lhs.perm != nil {
			s.a16 = grow(s.a16, len(a))
			transpose(s.a16, a, p.lhsS.Dimensions, p.lhs.perm)
			a = s.a16
		}
		if p.rhs.perm != nil {
			s.b16 = grow(s.b16, len(b))
			transpose(s.b16, b, p.rhsS.Dimensions, p.rhs.perm)
			b = s.b16
		}
		return pool.BFloat16OutBatched(ctx, op, batch, a, b, c)
	}
	return fmt.Errorf("dtype %s is not native", p.dtype)
}

// bf16Bits views bfloat16 values as their bit patterns, the GEMM's bfloat16 storage type (same
// size and layout: bfloat16.BFloat16 is a uint16).
func bf16Bits(x []bfloat16.BFloat16) []uint16 {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
}

// transpose writes src (row-major with dimensions dims) into dst with its axes permuted: dst
// axis i is src axis perm[i]. The innermost destination axis is copied in a tight loop.
func transpose[T any](dst, src []T, dims, perm []int) {
	rank := len(dims)
	if rank == 0 {
		copy(dst, src)
		return
	}
	srcStride := make([]int, rank)
	st := 1
	for a := rank - 1; a >= 0; a-- {
		srcStride[a] = st
		st *= dims[a]
	}
	outDims := make([]int, rank)
	stride := make([]int, rank)
	for i, a := range perm {
		outDims[i], stride[i] = dims[a], srcStride[a]
	}
	inner, innerStride := outDims[rank-1], stride[rank-1]
	if inner == 0 {
		return
	}
	idx := make([]int, rank)
	off := 0
	for d := 0; d < len(dst); d += inner {
		row := dst[d : d+inner]
		if innerStride == 1 {
			copy(row, src[off:off+inner])
		} else {
			s := off
			for j := range row {
				row[j] = src[s]
				s += innerStride
			}
		}
		for a := rank - 2; a >= 0; a-- {
			idx[a]++
			off += stride[a]
			if idx[a] < outDims[a] {
				break
			}
			off -= stride[a] * outDims[a]
			idx[a] = 0
		}
	}
}
