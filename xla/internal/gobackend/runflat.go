package gobackend

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
)

// runFlat is how runNative (exec.go) runs every native operation but a product: on the flat
// data of its operands, whatever their types — float32, bfloat16, bool or int32 (comparisons) —
// into the flat data of its output.

// runFlat runs a fusion, reduction or transpose, of float32 or bfloat16, or a comparison, on
// its operands' flat data (in, in the order of nat.reads, as BufferData returns them) into out.
func (nat *nativeOp) runFlat(w *worker, in []any, out any) error {
	switch {
	case nat.cmp != nil:
		// An operation comparing a value with itself reads it once.
		return nat.cmp.run(w, out.([]bool), in[0], in[len(in)-1])
	case nat.fus != nil:
		return nat.fus.runFlat(w, nat.reads, in, out)
	case nat.red != nil && nat.red.src != nil:
		return nat.red.runFused(w, nat.reads, in, out.([]float32))
	case nat.red != nil && nat.red.bf16:
		return nat.red.runBF16(bf16Bits(out.([]bfloat16.BFloat16)), bf16Bits(in[0].([]bfloat16.BFloat16)), w)
	case nat.red != nil:
		return nat.red.run(out.([]float32), in[0].([]float32), w)
	case nat.trans != nil && nat.trans.bf16:
		transpose(bf16Bits(out.([]bfloat16.BFloat16)), bf16Bits(in[0].([]bfloat16.BFloat16)), nat.trans.dims, nat.trans.perm)
		return nil
	case nat.trans != nil:
		transpose(out.([]float32), in[0].([]float32), nat.trans.dims, nat.trans.perm)
		return nil
	case nat.cp != nil:
		return nat.cp.run(in[0], out)
	}
	return fmt.Errorf("%s is not a fusion, reduction, transpose, comparison or copy (bug)", nat.name)
}

// runFlat runs the fusion on the flat data in of the values reads into out ([]float32 or
// []bfloat16.BFloat16, the root's type).
func (f *fusion) runFlat(w *worker, reads []int, in []any, out any) error {
	io, err := f.bind(w, reads, in)
	defer w.unbind(&io)
	if err != nil {
		return err
	}
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
