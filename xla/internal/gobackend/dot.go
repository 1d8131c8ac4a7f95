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

// dotPlan is how one DotGeneral runs on the GEMM: as batches of products of an M×K by a K×N
// matrix, each operand either read in place — as a matrix or a transposed one, whose rows may be
// further apart than its row length and whose batch items may be interleaved (the heads of a
// [batch, seq, heads, dim] activation) — or first transposed into a packed [batch, rows, cols]
// scratch buffer when its axes cannot be read that way.
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
	// levels are the batch axes, coalesced where the operands' and the output's strides allow
	// (outermost first): every level but the last is a loop around GEMM calls, the last is the
	// GEMM's own batch. Empty when there is no batch.
	levels []batchLevel
	// vec, if set, runs the product instead of the GEMM (dot_vec.go); lhs and rhs are then
	// unused.
	vec *vecPlan
	// ldc is the distance between the output's rows (elements); 0: n, the row-major output.
	// A transpose folded into the product (placeOutput) makes it longer.
	ldc int
}

// batchLevel is one coalesced batch axis: count items, and the strides (in elements) from one
// item to the next in the lhs, the rhs and the output.
type batchLevel struct {
	count, a, b, c int
}

// operandLayout says how the GEMM reads one operand.
type operandLayout struct {
	// perm, if not nil, transposes the operand into a packed buffer first (dst axis i = src
	// axis perm[i]); the packed operand is then read untransposed.
	perm []int
	// trans: the operand (as stored, or packed) is [batch, K, M] for lhs or [batch, N, K] for rhs.
	trans bool
	// ld is the distance between stored rows (elements).
	ld int
	// bstr are the strides of the batch axes, in batch order (those of the packed buffer when
	// perm is set).
	bstr []int
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
	want := naturalDims(lhs, rhs, ax)
	nb := len(ax.lhsBatch)
	for _, d := range want[nb : nb+len(lhsFree)] {
		p.m *= d
	}
	for _, d := range want[nb+len(lhsFree):] {
		p.n *= d
	}
	if !slices.Equal(want, out.Dimensions) {
		return nil, fmt.Errorf("axes %+v of %s x %s give dimensions %v, the output is %s", ax, lhs, rhs, want, out)
	}

	// The K index must be flattened the same way on both sides. The contracting pairs may be
	// taken in any order, so try the order as listed and the memory order of each operand, and
	// keep the one that copies the fewest elements.
	var bdims []int
	for _, a := range ax.lhsBatch {
		bdims = append(bdims, lhs.Dimensions[a])
	}
	best := -1
	for _, order := range contractingOrders(ax) {
		lc, rc := pick(ax.lhsContracting, order), pick(ax.rhsContracting, order)
		cost := 0
		l, ok := layoutOf(lhs, ax.lhsBatch, lhsFree, lc)
		if !ok {
			l = packedLayout(concat(ax.lhsBatch, lhsFree, lc), bdims, p.m, p.k)
			cost += lhs.Size()
		}
		r, ok := layoutOf(rhs, ax.rhsBatch, rc, rhsFree)
		if !ok {
			r = packedLayout(concat(ax.rhsBatch, rc, rhsFree), bdims, p.k, p.n)
			cost += rhs.Size()
		}
		if best < 0 || cost < best {
			best, p.lhs, p.rhs = cost, l, r
		}
	}
	p.levels = batchLevels(bdims, p.lhs.bstr, p.rhs.bstr, itemStrides(bdims, p.m*p.n))
	if p.vec = planVec(lhs, rhs, ax); p.vec != nil {
		p.lhs, p.rhs = operandLayout{}, operandLayout{} // nothing is packed
	}
	return p, nil
}

// naturalDims are the dimensions of a product's output in DotGeneral's order: [batch...,
// lhsFree..., rhsFree...].
func naturalDims(lhs, rhs shapes.Shape, ax dotAxes) []int {
	var dims []int
	for _, a := range ax.lhsBatch {
		dims = append(dims, lhs.Dimensions[a])
	}
	for _, a := range freeAxes(lhs.Rank(), ax.lhsContracting, ax.lhsBatch) {
		dims = append(dims, lhs.Dimensions[a])
	}
	for _, a := range freeAxes(rhs.Rank(), ax.rhsContracting, ax.rhsBatch) {
		dims = append(dims, rhs.Dimensions[a])
	}
	return dims
}

// outputLayout returns the row distance of an output whose natural axes — [batch..., lhsFree...,
// rhsFree...], nb and nl of the first two, of dimensions dims — lie st elements apart in its
// buffer, if the GEMM can write it there: the lhs's free axes walk one strided run (the rows) and
// the rhs's one contiguous run (a row), as in a row-major output but with rows ldc apart, and the
// batch axes anywhere.
func outputLayout(dims, st []int, nb, nl int) (ldc int, ok bool) {
	// run returns the stride of axes as one strided run, or 0 if all have size 1.
	run := func(axes []int) (int, bool) {
		stride, span := 0, 0
		for i := len(axes) - 1; i >= 0; i-- {
			a := axes[i]
			if dims[a] == 1 {
				continue
			}
			if stride == 0 {
				stride = st[a]
			} else if st[a] != span {
				return 0, false
			}
			span = st[a] * dims[a]
		}
		return stride, true
	}
	axes := make([]int, len(dims))
	for i := range axes {
		axes[i] = i
	}
	rows, ok := run(axes[nb : nb+nl])
	if !ok {
		return 0, false
	}
	cols, ok := run(axes[nb+nl:])
	if !ok || cols > 1 {
		return 0, false
	}
	n := 1
	for _, d := range dims[nb+nl:] {
		n *= d
	}
	if rows == 0 {
		return max(n, 1), true // a single row
	}
	return rows, rows >= n
}

// placeOutput makes p write its output, of shape out, through the strides st of the natural
// output axes (dims, nb batch and nl lhs-free axes; outputLayout must accept them): a transpose
// folded into the product (fold.go).
func (p *dotPlan) placeOutput(dims, st []int, nb, nl int, out shapes.Shape) error {
	ldc, ok := outputLayout(dims, st, nb, nl)
	if !ok || p.vec != nil {
		return fmt.Errorf("output strides %v of %v cannot be written by the GEMM", st, dims)
	}
	p.ldc, p.out = ldc, out
	p.levels = batchLevels(dims[:nb], p.lhs.bstr, p.rhs.bstr, st[:nb])
	return nil
}

// layoutOf returns how the GEMM reads, in place, an operand of shape s as [batch, rows, cols]
// (the axes of each group flattened in the order given): rows and columns must each be one
// strided run of memory, one of them contiguous. It reports false when the operand must be
// packed instead.
func layoutOf(s shapes.Shape, batch, rows, cols []int) (operandLayout, bool) {
	st := rowMajorStrides(s.Dimensions)
	nr, sr, okR := mergeAxes(s.Dimensions, st, rows)
	nc, sc, okC := mergeAxes(s.Dimensions, st, cols)
	if !okR || !okC {
		return operandLayout{}, false
	}
	l := operandLayout{bstr: make([]int, len(batch))}
	for i, a := range batch {
		l.bstr[i] = st[a]
	}
	switch {
	case nc == 1 || sc == 1: // stored rows × cols
		l.ld = nc
		if nr > 1 {
			l.ld = sr
		}
		return l, l.ld >= nc
	case nr == 1 || sr == 1: // stored cols × rows: the transposed matrix
		l.trans, l.ld = true, nr
		if nc > 1 {
			l.ld = sc
		}
		return l, l.ld >= nr
	}
	return operandLayout{}, false
}

// mergeAxes returns the size and stride of axes (outermost first) of an array with dimensions
// dims and strides st read as one index, and false when their strides do not allow that. Axes
// of size 1 are ignored; with none left the size is 1.
func mergeAxes(dims, st, axes []int) (n, stride int, ok bool) {
	n = 1
	for _, a := range axes {
		d := dims[a]
		switch {
		case d == 1:
		case n == 1:
			n, stride = d, st[a]
		case stride != st[a]*d:
			return 0, 0, false
		default:
			n, stride = n*d, st[a]
		}
	}
	return n, stride, true
}

// packedLayout is the layout of an operand packed by perm into a row-major [batch, rows, cols]
// buffer.
func packedLayout(perm, bdims []int, rows, cols int) operandLayout {
	l := operandLayout{perm: perm, ld: max(cols, 1), bstr: make([]int, len(bdims))}
	s := rows * cols
	for i := len(bdims) - 1; i >= 0; i-- {
		l.bstr[i] = s
		s *= bdims[i]
	}
	return l
}

// itemStrides returns the strides of batch axes bdims over row-major items of mn elements.
func itemStrides(bdims []int, mn int) []int {
	st := rowMajorStrides(bdims)
	for i := range st {
		st[i] *= mn
	}
	return st
}

// batchLevels coalesces the batch axes of dimensions bdims, with strides a, b and c in the
// operands and the output: neighbouring axes become one level where all three strides walk them
// as one; axes of size 1 are dropped.
func batchLevels(bdims, a, b, c []int) []batchLevel {
	var lv []batchLevel
	for i, d := range bdims {
		if d == 1 {
			continue
		}
		if k := len(lv) - 1; k >= 0 && lv[k].a == a[i]*d && lv[k].b == b[i]*d && lv[k].c == c[i]*d {
			lv[k] = batchLevel{count: lv[k].count * d, a: a[i], b: b[i], c: c[i]}
			continue
		}
		lv = append(lv, batchLevel{count: d, a: a[i], b: b[i], c: c[i]})
	}
	return lv
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

// gemmOp is the GEMM description of the plan: the product and its innermost batch level.
func (p *dotPlan) gemmOp() (gemm.Op, gemm.Batch) {
	op := gemm.Op{M: p.m, N: p.n, K: p.k, TransA: p.lhs.trans, TransB: p.rhs.trans, LDA: p.lhs.ld, LDB: p.rhs.ld, LDC: p.ldc}
	if len(p.levels) == 0 {
		return op, gemm.Batch{Count: 1}
	}
	in := p.levels[len(p.levels)-1]
	return op, gemm.Batch{Count: in.count, StrideA: in.a, StrideB: in.b, StrideC: in.c}
}

// outerItems is the number of GEMM calls: the items of the outer batch levels (all but the
// innermost, which the GEMM batches itself).
func (p *dotPlan) outerItems() int {
	n := 1
	for _, l := range p.levels[:max(len(p.levels)-1, 0)] {
		n *= l.count
	}
	return n
}

// outerOffsets returns the offsets into lhs, rhs and the output of outer item it (row-major over
// the outer levels).
func (p *dotPlan) outerOffsets(it int) (a, b, c int) {
	for i := len(p.levels) - 2; i >= 0; i-- {
		l := p.levels[i]
		x := it % l.count
		it /= l.count
		a, b, c = a+x*l.a, b+x*l.b, c+x*l.c
	}
	return a, b, c
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
		for it := range p.outerItems() {
			i, j, k := p.outerOffsets(it)
			if err := pool.Float32Batched(ctx, op, batch, a[i:], b[j:], c[k:]); err != nil {
				return err
			}
		}
		return nil
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
		for it := range p.outerItems() {
			i, j, k := p.outerOffsets(it)
			if err := pool.BFloat16OutBatched(ctx, op, batch, a[i:], b[j:], c[k:]); err != nil {
				return err
			}
		}
		return nil
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
	if len(dims) == 0 {
		copy(dst, src)
		return
	}
	transposeOuter(dst, src, dims, perm, 0, dims[perm[0]])
}

// transposeOuter is transpose restricted to indices [lo, hi) of the destination's outermost axis:
// the part of the destination a worker computes when a transpose is split (transposeJob), every
// element copied exactly as the whole transpose copies it.
func transposeOuter[T any](dst, src []T, dims, perm []int, lo, hi int) {
	rank := len(dims)
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
	dstOuter := 1
	for _, d := range outDims[1:] {
		dstOuter *= d
	}
	// The part: the outermost axis cut to [lo, hi), every stride unchanged.
	dst, src = dst[lo*dstOuter:hi*dstOuter], src[lo*stride[0]:]
	outDims[0] = hi - lo
	inner, innerStride := outDims[rank-1], stride[rank-1]
	if inner == 0 || len(dst) == 0 {
		return
	}
	if innerStride != 1 {
		// The source's contiguous axis is not the last one of the destination (attention's
		// [b, h, 64, 512] product transposed to [b, 512, h, 64]): copy tiles, each read and
		// written along whole cache lines, instead of gathering every destination row with
		// a stride.
		for q := rank - 2; q >= 0; q-- {
			if stride[q] == 1 && outDims[q] >= transposeTile && inner >= transposeTile {
				transposeTiles(dst, src, outDims, stride, q)
				return
			}
		}
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

// transposeTile is the side of the square tiles transposeTiles copies: 16×16 float32 values are
// 16 cache lines on each side, in L1 together.
const transposeTile = 16

// transposeTiles is transpose where the source's contiguous axis is destination axis q (not the
// last): for every index of the other axes, the outDims[q] × inner matrix whose rows are
// contiguous in the source and whose columns are contiguous in the destination is copied a tile
// at a time. stride holds the source stride of each destination axis (stride[q] is 1).
func transposeTiles[T any](dst, src []T, outDims, stride []int, q int) {
	rank := len(outDims)
	dstStride := rowMajorStrides(outDims)
	inner, is, nq, dq := outDims[rank-1], stride[rank-1], outDims[q], dstStride[q]
	// The other axes, walked as an odometer.
	var axes []int
	for a := range rank - 1 {
		if a != q {
			axes = append(axes, a)
		}
	}
	idx := make([]int, len(axes))
	sOff, dOff := 0, 0
	for {
		for i0 := 0; i0 < nq; i0 += transposeTile {
			i1 := min(i0+transposeTile, nq)
			for j0 := 0; j0 < inner; j0 += transposeTile {
				j1 := min(j0+transposeTile, inner)
				for j := j0; j < j1; j++ {
					s := src[sOff+j*is+i0 : sOff+j*is+i1]
					d := dOff + j
					for i, v := range s {
						dst[d+(i0+i)*dq] = v
					}
				}
			}
		}
		k := len(axes) - 1
		for ; k >= 0; k-- {
			a := axes[k]
			idx[k]++
			sOff += stride[a]
			dOff += dstStride[a]
			if idx[k] < outDims[a] {
				break
			}
			sOff -= stride[a] * outDims[a]
			dOff -= dstStride[a] * outDims[a]
			idx[k] = 0
		}
		if k < 0 {
			return
		}
	}
}
