package gobackend

import (
	"math"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// reducePlan is a float32 ReduceSum or ReduceMax whose reduced axes are adjacent once axes of
// dimension 1 are dropped, i.e. the operand viewed as [outer, reduced, inner] (the softmax and
// layer-norm rows, the bias gradients, the loss means). Other reductions stay on simplego.
//
// Each output element accumulates its inputs in increasing order, the order simplego uses,
// so the results are bitwise simplego's.
type reducePlan struct {
	op                backends.OpType // ReduceSum or ReduceMax
	outer, red, inner int
	in, out           int // value ids
}

// planReduce returns the plan of n, or nil if n is not a native reduction.
func planReduce(n *node) *reducePlan {
	if (n.op != backends.OpTypeReduceSum && n.op != backends.OpTypeReduceMax) ||
		n.inputs[0].shape.DType != dtypes.Float32 || n.outputs[0].shape.DType != dtypes.Float32 {
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
	p := &reducePlan{op: n.op, outer: 1, red: 1, inner: 1, in: n.inputs[0].id, out: n.outputs[0].id}
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

// run reduces in into out, splitting the outer rows (or, for a single row, the inner columns)
// across threads goroutines (started and joined here).
func (p *reducePlan) run(out, in []float32, w *worker) error {
	threads := len(w.regs)
	if p.outer*p.red*p.inner < minParallel || threads <= 1 {
		// No helper, and no closure that escapes (per-step garbage).
		return catch(func() { p.rows(out, in, 0, p.outer, 0, p.inner) })
	}
	j := &w.reduceJob
	*j = reduceJob{p: p, out: out, in: in, byOuter: p.outer >= threads}
	if j.byOuter {
		j.per = (p.outer + threads - 1) / threads
	} else {
		j.per = (p.inner + threads - 1) / threads
	}
	err := w.team.run(threads, j)
	*j = reduceJob{}
	return err
}

// reduceJob is a reduction split over its outer (or, if they are fewer than the parts, inner)
// positions; the worker keeps one, so splitting allocates nothing.
type reduceJob struct {
	p       *reducePlan
	out, in []float32
	byOuter bool
	per     int
}

func (j *reduceJob) part(t int) {
	p := j.p
	if j.byOuter {
		lo, hi := min(t*j.per, p.outer), min((t+1)*j.per, p.outer)
		p.rows(j.out, j.in, lo, hi, 0, p.inner)
		return
	}
	lo, hi := min(t*j.per, p.inner), min((t+1)*j.per, p.inner)
	p.rows(j.out, j.in, 0, p.outer, lo, hi)
}

// rows computes outputs [o, i] for o in [olo, ohi) and i in [ilo, ihi).
func (p *reducePlan) rows(out, in []float32, olo, ohi, ilo, ihi int) {
	if olo >= ohi || ilo >= ihi {
		return // an empty share of a split
	}
	init := float32(0)
	if p.op == backends.OpTypeReduceMax {
		init = -math.MaxFloat32 // simplego's initial value (the lowest finite float32)
	}
	for o := olo; o < ohi; o++ {
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
				for _, v := range row {
					acc = max(acc, v)
				}
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
				for j, v := range src {
					dst[j] += v
				}
			} else {
				for j, v := range src {
					dst[j] = max(dst[j], v)
				}
			}
		}
	}
}
