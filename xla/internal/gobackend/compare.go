package gobackend

import (
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
)

// comparePlan is a native comparison (Equal, NotEqual, LessThan, LessOrEqual, GreaterThan,
// GreaterOrEqual) of two int32, float32 or bfloat16 operands into bools, with simplego's
// implicit broadcasting (a single value, or axes of dimension 1). The loss's one-hot labels are
// one: every position's label compared with an iota over the vocabulary, 8·128·8192 bools in
// the benchmark GPT-2, which simplego computes through a per-element broadcast iterator. Here
// the output is cut into blocks of fuseBlock elements and each operand's block is read as a
// fusion reads a leaf: in place (same layout), filled (a single value) or gathered (a
// broadcast). The comparisons are Go's on the operands' type (bfloat16 widened exactly to
// float32, as simplego does), so the results are simplego's.
type comparePlan struct {
	op    backends.OpType
	dtype dtypes.DType
	// a and b say how each operand is read over the output (kind, dims, strides; value is the
	// operand's value id).
	a, b fusedLeaf
}

var compareOps = map[backends.OpType]bool{
	backends.OpTypeEqual: true, backends.OpTypeNotEqual: true, backends.OpTypeLessThan: true,
	backends.OpTypeLessOrEqual: true, backends.OpTypeGreaterThan: true, backends.OpTypeGreaterOrEqual: true,
}

// planCompare returns the plan of n, or nil if n is not a native comparison.
func planCompare(n *node) *comparePlan {
	if !compareOps[n.op] || len(n.inputs) != 2 || len(n.outputs) != 1 {
		return nil
	}
	dt, out := n.inputs[0].shape.DType, n.outputs[0].shape
	if n.outputs[0].b.backend.cfg.FallbackBF16 || n.inputs[1].shape.DType != dt || (dt != dtypes.Int32 && !fusedDType(n, dt)) || out.DType != dtypes.Bool {
		return nil
	}
	p := &comparePlan{op: n.op, dtype: dt}
	for i, in := range n.inputs {
		if !broadcastable(in.shape, out) {
			return nil
		}
		l := fusedLeaf{kind: leafDirect, value: in.id}
		if in.shape.Size() == 1 {
			l.kind = leafScalar
		} else if st := implicitStrides(in.shape, out.Dimensions); st != nil {
			if dims, st := coalesce(out.Dimensions, st); len(dims) > 1 || st[0] != 1 {
				l.kind, l.dims, l.strides = leafStrided, dims, st
			}
		}
		if i == 0 {
			p.a = l
		} else {
			p.b = l
		}
	}
	return p
}

// run compares the flat data a and b (of the plan's type) into out, splitting the output across
// the worker's team as a fusion does.
func (p *comparePlan) run(w *worker, out []bool, a, b any) error {
	j := compareJob{p: p, out: out}
	switch p.dtype {
	case dtypes.Int32:
		j.ai, j.bi = a.([]int32), b.([]int32)
	case dtypes.Float32:
		j.af, j.bf = a.([]float32), b.([]float32)
	default:
		j.ah, j.bh = bf16Bits(a.([]bfloat16.BFloat16)), bf16Bits(b.([]bfloat16.BFloat16))
	}
	j.regs = w.regs
	parts := len(w.regs)
	if len(out) < minParallel {
		parts = 1
	}
	if parts == 1 {
		return catch(func() { j.blocks(&w.regs[0], 0, len(out)) })
	}
	blocks := (len(out) + fuseBlock - 1) / fuseBlock
	j.per = (blocks + parts - 1) / parts
	w.compareJob = j
	err := w.team.run(parts, &w.compareJob)
	w.compareJob = compareJob{}
	return err
}

// compareJob is a comparison split into parts of whole blocks; the worker keeps one, so
// splitting allocates nothing. Its operands are ai and bi (int32), af and bf (float32) or ah and
// bh (bfloat16).
type compareJob struct {
	p      *comparePlan
	out    []bool
	ai, bi []int32
	af, bf []float32
	ah, bh []uint16
	regs   []fuseRegs
	per    int // blocks per part
}

func (j *compareJob) part(t int) {
	size := len(j.out)
	j.blocks(&j.regs[t], min(t*j.per*fuseBlock, size), min((t+1)*j.per*fuseBlock, size))
}

// blocks computes the outputs [lo, hi) block by block, with r's registers as scratch.
func (j *compareJob) blocks(r *fuseRegs, lo, hi int) {
	r.ensure(2)
	p := j.p
	for b := lo; b < hi; b += fuseBlock {
		e := min(b+fuseBlock, hi)
		out := j.out[b:e]
		switch p.dtype {
		case dtypes.Int32:
			compareInto(p.op, out, leafView(&p.a, j.ai, asInt32(r.bufs[0]), b, e), leafView(&p.b, j.bi, asInt32(r.bufs[1]), b, e))
		case dtypes.Float32:
			compareInto(p.op, out, leafView(&p.a, j.af, r.bufs[0], b, e), leafView(&p.b, j.bf, r.bufs[1], b, e))
		default:
			a, bb := r.bufs[0][:e-b], r.bufs[1][:e-b]
			widenBF16(a, leafView(&p.a, j.ah, r.half, b, e))
			widenBF16(bb, leafView(&p.b, j.bh, r.half, b, e))
			compareInto(p.op, out, a, bb)
		}
	}
}

// leafView returns the elements [lo, hi) of the output as operand l reads them from src: src
// itself (same layout), or scratch filled with its single value or gathered through its strides.
func leafView[T float32 | uint16 | int32](l *fusedLeaf, src, scratch []T, lo, hi int) []T {
	switch l.kind {
	case leafDirect:
		return src[lo:hi]
	case leafScalar:
		s := scratch[:hi-lo]
		fill(s, src[0])
		return s
	}
	s := scratch[:hi-lo]
	gatherStrided(s, src, l.dims, l.strides, lo)
	return s
}

// asInt32 views a float32 register as int32 scratch (same size).
func asInt32(x []float32) []int32 {
	return unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
}

// compareInto sets out[i] = a[i] op b[i].
func compareInto[T int32 | float32](op backends.OpType, out []bool, a, b []T) {
	a, b = a[:len(out)], b[:len(out)]
	switch op {
	case backends.OpTypeEqual:
		done := equalVec(out, a, b, false)
		for i := done; i < len(out); i++ {
			out[i] = a[i] == b[i]
		}
	case backends.OpTypeNotEqual:
		done := equalVec(out, a, b, true)
		for i := done; i < len(out); i++ {
			out[i] = a[i] != b[i]
		}
	case backends.OpTypeLessThan:
		for i := range out {
			out[i] = a[i] < b[i]
		}
	case backends.OpTypeLessOrEqual:
		for i := range out {
			out[i] = a[i] <= b[i]
		}
	case backends.OpTypeGreaterThan:
		for i := range out {
			out[i] = a[i] > b[i]
		}
	case backends.OpTypeGreaterOrEqual:
		for i := range out {
			out[i] = a[i] >= b[i]
		}
	default:
		panic("compareInto: " + op.String() + " is not a comparison")
	}
}
