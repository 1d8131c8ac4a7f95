package gobackend

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
)

// runFlat is how runNative (exec.go) runs every native operation but a product: on the flat
// data of its operands, whatever their types — float32, bfloat16, bool or int32 (comparisons) —
// into the flat data of its output.

// runFlat runs a fusion, reduction or transpose, of float32 or bfloat16, or a comparison, on
// its operands' flat data (in, in the order of nat.reads, as BufferData returns them) into out,
// and a fusion's extra outputs into extra.
func (nat *nativeOp) runFlat(w *worker, in []any, out any, extra [][]float32) error {
	switch {
	case nat.cmp != nil:
		// An operation comparing a value with itself reads it once.
		return nat.cmp.run(w, out.([]bool), in[0], in[len(in)-1])
	case nat.fus != nil:
		return nat.fus.runFlat(w, nat.reads, in, out, extra)
	case nat.red != nil && nat.red.src != nil:
		return nat.red.runFused(w, nat.reads, in, out.([]float32))
	case nat.red != nil && nat.red.bf16:
		return nat.red.runBF16(bf16Bits(out.([]bfloat16.BFloat16)), bf16Bits(in[0].([]bfloat16.BFloat16)), w)
	case nat.red != nil:
		return nat.red.run(out.([]float32), in[0].([]float32), w)
	case nat.trans != nil && nat.trans.bf16:
		return nat.trans.run(w, transposeData{d16: bf16Bits(out.([]bfloat16.BFloat16)), s16: bf16Bits(in[0].([]bfloat16.BFloat16))})
	case nat.trans != nil:
		return nat.trans.run(w, transposeData{d32: out.([]float32), s32: in[0].([]float32)})
	case nat.cp != nil:
		return nat.cp.run(in[0], out)
	}
	return fmt.Errorf("%s is not a fusion, reduction, transpose, comparison or copy (bug)", nat.name)
}

// runFlat runs the fusion on the flat data in of the values reads into out ([]float32 or
// []bfloat16.BFloat16, the root's type) and its extra outputs into extra.
func (f *fusion) runFlat(w *worker, reads []int, in []any, out any, extra [][]float32) error {
	io, err := f.bind(w, reads, in)
	defer w.unbind(&io)
	if err != nil {
		return err
	}
	if len(extra) != len(f.extra) {
		return fmt.Errorf("fusion has %d extra outputs, given %d (bug)", len(f.extra), len(extra))
	}
	for i, x := range extra {
		if len(x) != len(out.([]float32)) {
			return fmt.Errorf("fusion extra output %d has %d elements, the output %d (bug)", i, len(x), len(out.([]float32)))
		}
	}
	io.extra = extra
	if f.outBF16 {
		io.out16 = bf16Bits(out.([]bfloat16.BFloat16))
	} else {
		io.out = out.([]float32)
	}
	return f.runIO(io, w)
}

// bind returns the fusion's leaf tables over the flat data in of the values reads, in the
// worker's reused tables; the caller sets the output and, when done, calls unbind.
func (f *fusion) bind(w *worker, reads []int, in []any) (fuseIO, error) {
	io := fuseIO{srcs: w.srcs[:0], hsrcs: w.hsrcs[:0], bsrcs: w.bsrcs[:0]}
	for _, l := range f.leaves {
		var src []float32
		var hsrc []uint16
		var bsrc []bool
		if l.value >= 0 {
			k := -1
			for i, v := range reads {
				if v == l.value {
					k = i
					break
				}
			}
			switch {
			case k < 0:
				return io, fmt.Errorf("fusion leaf reads value #%d, not an operand (bug)", l.value)
			case l.kind == leafBool:
				bsrc = in[k].([]bool)
			case l.bf16:
				hsrc = bf16Bits(in[k].([]bfloat16.BFloat16))
			default:
				src = in[k].([]float32)
			}
		}
		io.srcs, io.hsrcs, io.bsrcs = append(io.srcs, src), append(io.hsrcs, hsrc), append(io.bsrcs, bsrc)
	}
	return io, nil
}

// unbind drops io's references to the operands (none are kept past the operation) and gives
// its tables back to the worker for the next fusion.
func (w *worker) unbind(io *fuseIO) {
	clear(io.srcs)
	clear(io.hsrcs)
	clear(io.bsrcs)
	w.srcs, w.hsrcs, w.bsrcs = io.srcs[:0], io.hsrcs[:0], io.bsrcs[:0]
}

// transposeData is a transpose's destination and source, float32 or bfloat16 (one pair set).
type transposeData struct {
	d32, s32 []float32
	d16, s16 []uint16
}

// transposeJob is a transpose split into parts along the destination's outermost axis; the
// worker keeps one, so splitting allocates nothing.
type transposeJob struct {
	p     *transposePlan
	data  transposeData
	parts int
}

func (j *transposeJob) part(p int) {
	n := j.p.dims[j.p.perm[0]]
	lo, hi := p*n/j.parts, (p+1)*n/j.parts
	if j.data.d16 != nil {
		transposeOuter(j.data.d16, j.data.s16, j.p.dims, j.p.perm, lo, hi)
	} else {
		transposeOuter(j.data.d32, j.data.s32, j.p.dims, j.p.perm, lo, hi)
	}
}

// run copies the transpose, split across the worker's team when it is large and its outermost
// destination axis has an index for each part (attention's [2, 12, 512, 64] heads moved back to
// [2, 512, 12, 64]: a copy limited by memory, which both cores' loads run faster).
func (p *transposePlan) run(w *worker, data transposeData) error {
	size := len(data.d32) + len(data.d16)
	parts := 1
	if len(p.dims) > 0 && size >= minParallel {
		parts = min(w.threads, p.dims[p.perm[0]])
	}
	w.transposeJob = transposeJob{p: p, data: data, parts: max(parts, 1)}
	defer func() { w.transposeJob = transposeJob{} }()
	if parts <= 1 {
		return catch(func() { w.transposeJob.part(0) })
	}
	return w.team.run(parts, &w.transposeJob)
}
