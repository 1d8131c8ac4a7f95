package gobackend

import (
	"math"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// reducePlan is a float32 or bfloat16 ReduceSum or ReduceMax whose reduced axes are adjacent
// once axes of dimension 1 are dropped, i.e. the operand viewed as [outer, reduced, inner] (the
// softmax and layer-norm rows, the bias gradients, the loss means). Other reductions stay on
// simplego.
//
// Each output element accumulates its inputs in increasing order, the order simplego uses, and
// a bfloat16 one accumulates as simplego does, in bfloat16: every partial sum is truncated
// (bf16.go). A maximum starts from -Inf, simplego's lowest value of both types (a row of -Inf
// gives -Inf). So the results are bitwise simplego's.
type reducePlan struct {
	op                backends.OpType // ReduceSum or ReduceMax
	outer, red, inner int
	in, out           int  // value ids
	bf16              bool // bfloat16 operand and result
	// src, when set, is the fusion whose output is the operand, computed inside the reduction
	// instead of read from a buffer (reduce_fused.go); the step then reads the fusion's operands.
	src *fusion
}

// planReduce returns the plan of n, or nil if n is not a native reduction.
func planReduce(n *node) *reducePlan {
	if n.op != backends.OpTypeReduceSum && n.op != backends.OpTypeReduceMax {
		return nil
	}
	dt := n.inputs[0].shape.DType
	if !fusedDType(n, dt) || n.outputs[0].shape.DType != dt {
		return nil
	}
	axes, ok := n.attrs[0].([]int)
	if !ok {
		return nil
	}
	dims := n.inputs[0].shape.Dimensions
	reduced := make([]bool, len(dims))
	if len(axes) == 0 {
		// No axes means all of them (simplego's, and XLA's, convention for these operations).
		for a := range reduced {
			reduced[a] = true
		}
	}
	for _, a := range axes {
		if a < 0 || a >= len(dims) {
			return nil
		}
		reduced[a] = true
	}
	// Walk the axes: outer (not reduced) until the first reduced one of dimension > 1, then the
	// reduced run, then inner; a kept axis of dimension > 1 inside the run ends it, and a later
	// reduced axis of dimension > 1 makes the reduction non-adjacent.
	p := &reducePlan{op: n.op, outer: 1, red: 1, inner: 1, in: n.inputs[0].id, out: n.outputs[0].id, bf16: dt == dtypes.BFloat16}
	phase := 0 // 0 outer, 1 reduced, 2 inner
	for a, d := range dims {
		if d == 1 {
			continue
		}
		switch {
		case reduced[a] && phase == 2:
			return nil
		case reduced[a]:
			phase = 1
			p.red *= d
		case phase == 0:
			p.outer *= d
		default:
			phase = 2
			p.inner *= d
		}
	}
	if p.outer*p.inner != n.outputs[0].shape.Size() {
		return nil // not the reduction this plan describes: leave it to simplego
	}
	return p
}

// run reduces float32 in into out, splitting the outer rows (or, for a single row, the inner
// columns) across the worker's team.
func (p *reducePlan) run(out, in []float32, w *worker) error {
	return p.runJob(reduceJob{p: p, out: out, in: in}, w)
}

// runBF16 reduces bfloat16 in into out (their bits), split as run splits.
func (p *reducePlan) runBF16(out, in []uint16, w *worker) error {
	return p.runJob(reduceJob{p: p, out16: out, in16: in, regs: w.regs}, w)
}

func (p *reducePlan) runJob(job reduceJob, w *worker) error {
	threads := len(w.regs)
	if p.outer*p.red*p.inner < minParallel || threads <= 1 {
		// No helper, and no closure that escapes (per-step garbage).
		return catch(func() { job.rows(0, 0, p.outer, 0, p.inner) })
	}
	j := &w.reduceJob
	*j = job
	j.byOuter = p.outer >= threads
	if j.byOuter {
		j.per = (p.outer + threads - 1) / threads
	} else {
		j.per = (p.inner + threads - 1) / threads
	}
	err := w.team.run(threads, j)
	*j = reduceJob{}
	return err
}

// reduceJob is a reduction (float32 out and in, or bfloat16 out16 and in16) split over its outer
// (or, if they are fewer than the parts, inner) positions; the worker keeps one, so splitting
// allocates nothing. A bfloat16 part accumulates in its fusion registers regs[part], and a part
// computing the plan's source fusion runs it in them.
type reduceJob struct {
	p           *reducePlan
	out, in     []float32
	out16, in16 []uint16
	src         fuseIO // the operands of p.src, when the plan computes its operand (reduce_fused.go)
	regs        []fuseRegs
	byOuter     bool
	per         int
}

func (j *reduceJob) part(t int) {
	p := j.p
	if j.byOuter {
		lo, hi := min(t*j.per, p.outer), min((t+1)*j.per, p.outer)
		j.rows(t, lo, hi, 0, p.inner)
		return
	}
	lo, hi := min(t*j.per, p.inner), min((t+1)*j.per, p.inner)
	j.rows(t, 0, p.outer, lo, hi)
}

// rows computes part t's outputs [o, i] for o in [olo, ohi) and i in [ilo, ihi).
func (j *reduceJob) rows(t, olo, ohi, ilo, ihi int) {
	if j.p.src != nil {
		j.p.rowsFused(j.out, j.src, &j.regs[t], olo, ohi, ilo, ihi)
		return
	}
	if j.p.bf16 {
		j.p.rowsBF16(j.out16, j.in16, &j.regs[t], olo, ohi, ilo, ihi)
		return
	}
	j.p.rows(j.out, j.in, olo, ohi, ilo, ihi)
}

// rows computes outputs [o, i] for o in [olo, ohi) and i in [ilo, ihi).
func (p *reducePlan) rows(out, in []float32, olo, ohi, ilo, ihi int) {
	if olo >= ohi || ilo >= ihi {
		return // an empty share of a split
	}
	init := float32(0)
	if p.op == backends.OpTypeReduceMax {
		init = float32(math.Inf(-1)) // simplego's initial value (dtypes.Float32.LowestValue)
	}
	o := olo
	if p.inner == 1 && p.op == backends.OpTypeReduceSum {
		// Eight rows at a time: eight independent running sums, each still in increasing order.
		for ; o+8 <= ohi; o += 8 {
			sumRows8((*[8]float32)(out[o:o+8]), in[o*p.red:(o+8)*p.red], p.red)
		}
	}
	for ; o < ohi; o++ {
		dst := out[o*p.inner+ilo : o*p.inner+ihi]
		base := o * p.red * p.inner
		if p.inner == 1 {
			row := in[base : base+p.red]
			acc := init
			if p.op == backends.OpTypeReduceSum {
				for _, v := range row {
					acc += v
				}
			} else {
				acc = maxRow(acc, row)
			}
			dst[0] = acc
			continue
		}
		for j := range dst {
			dst[j] = init
		}
		for r := range p.red {
			src := in[base+r*p.inner+ilo : base+r*p.inner+ihi]
			src = src[:len(dst)]
			if p.op == backends.OpTypeReduceSum {
				binaryF32(backends.OpTypeAdd, dst, dst, src) // each dst[j] += src[j], as one float32 addition
			} else {
				for j, v := range src {
					dst[j] = max(dst[j], v)
				}
			}
		}
	}
}

// sumRows8 sets dst[r] to the sum, from 0 in increasing order, of row r of the 8 rows of n values
// in in: the result of summing each row alone, with the latency of each addition hidden behind
// the other rows' (a lone row's sum waits for every addition before the next).
func sumRows8(dst *[8]float32, in []float32, n int) {
	*dst = [8]float32{}
	addRows8(dst, in, n, n)
}

// addRows8 adds to acc[r], in increasing order, the n values of row r of 8 rows stride apart in
// in: a row's sum continued over its next n values, as one running sum would.
func addRows8(acc *[8]float32, in []float32, n, stride int) {
	r0, r1, r2, r3 := in[:n], in[stride:stride+n], in[2*stride:2*stride+n], in[3*stride:3*stride+n]
	r4, r5, r6, r7 := in[4*stride:4*stride+n], in[5*stride:5*stride+n], in[6*stride:6*stride+n], in[7*stride:7*stride+n]
	a0, a1, a2, a3, a4, a5, a6, a7 := acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7]
	for j := range r0 {
		a0 += r0[j]
		a1 += r1[j]
		a2 += r2[j]
		a3 += r3[j]
		a4 += r4[j]
		a5 += r5[j]
		a6 += r6[j]
		a7 += r7[j]
	}
	*acc = [8]float32{a0, a1, a2, a3, a4, a5, a6, a7}
}

// rowsBF16 is rows for bfloat16: simplego's accumulator is a bfloat16, so every partial sum is
// truncated. Across the inner axis the accumulators are a block of float32 registers (r.bufs[0],
// the widened input row r.bufs[1]), so the vector kernels do the work.
func (p *reducePlan) rowsBF16(out, in []uint16, r *fuseRegs, olo, ohi, ilo, ihi int) {
	if olo >= ohi || ilo >= ihi {
		return
	}
	sum := p.op == backends.OpTypeReduceSum
	init := float32(0)
	if !sum {
		init = float32(math.Inf(-1)) // simplego's initial value (dtypes.BFloat16.LowestValue)
	}
	r.ensure(2)
	for o := olo; o < ohi; o++ {
		base := o * p.red * p.inner
		if p.inner == 1 {
			acc := init
			if sum {
				for _, h := range in[base : base+p.red] {
					acc = truncBF16(acc + widenBF16Scalar(h))
				}
			} else {
				row := r.bufs[0][:min(p.red, fuseBlock)]
				for k := 0; k < p.red; k += len(row) {
					part := row[:min(len(row), p.red-k)]
					widenBF16(part, in[base+k:base+k+len(part)])
					acc = maxRow(acc, part)
				}
			}
			out[o] = uint16(math.Float32bits(acc) >> 16)
			continue
		}
		for j0 := ilo; j0 < ihi; j0 += fuseBlock {
			j1 := min(j0+fuseBlock, ihi)
			acc, row := r.bufs[0][:j1-j0], r.bufs[1][:j1-j0]
			fill(acc, init)
			for k := range p.red {
				widenBF16(row, in[base+k*p.inner+j0:base+k*p.inner+j1])
				if sum {
					binaryBF16(backends.OpTypeAdd, acc, acc, row)
				} else {
					binaryF32(backends.OpTypeMax, acc, acc, row)
				}
			}
			narrowBF16(out[o*p.inner+j0:o*p.inner+j1], acc)
		}
	}
}

// maxRow returns the maximum of init and row as Go's max computes it pairwise. A maximum does not
// depend on the order it is taken in (Go's max returns NaN if any operand is NaN, and +0 for
// -0 and +0 either way), so four independent running maxima hide the latency of each.
func maxRow(init float32, row []float32) float32 {
	if m, ok := maxRowVec(init, row); ok {
		return m
	}
	return maxRowLoop(init, row)
}

// maxRowLoop is maxRow in Go: four running maxima, each Go's max, which propagates a NaN and
// prefers +0 to -0, so any grouping gives the same result.
func maxRowLoop(init float32, row []float32) float32 {
	m0, m1, m2, m3 := init, init, init, init
	i := 0
	for ; i+4 <= len(row); i += 4 {
		r := row[i : i+4 : i+4]
		m0, m1, m2, m3 = max(m0, r[0]), max(m1, r[1]), max(m2, r[2]), max(m3, r[3])
	}
	for ; i < len(row); i++ {
		m0 = max(m0, row[i])
	}
	return max(max(m0, m1), max(m2, m3))
}
