package gobackend

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/backends"
)

// fuseRegs is one goroutine's registers for running fusions: fuseBlock floats each, grown to
// the largest program seen, so steady-state execution allocates nothing.
type fuseRegs struct {
	bufs  [][]float32
	views [][]float32
}

func (r *fuseRegs) ensure(n int) {
	for len(r.bufs) < n {
		r.bufs = append(r.bufs, make([]float32, fuseBlock))
	}
	if len(r.views) < n {
		r.views = make([][]float32, n)
	}
}

// minParallel is the output size from which a native elementwise or reduction operation is
// split across goroutines: below it the start and join cost more than the work.
const minParallel = 1 << 15

// run computes the fusion into out; srcs[i] is the flat data of leaf i (nil for a folded
// constant), bsrcs[i] that of a leafBool. It splits the output across the worker's team (one
// part per fusion register set).
func (f *fusion) run(out []float32, srcs [][]float32, bsrcs [][]bool, w *worker) error {
	size := len(out)
	parts := len(w.regs)
	if size < minParallel {
		parts = 1
	}
	if parts == 1 {
		// Most fusions are small: no helper, and no closure that escapes (per-step garbage).
		return catch(func() { f.runRange(out, srcs, bsrcs, &w.regs[0], 0, size) })
	}
	// Chunks are whole blocks, so each part's blocks are the same as a serial run's.
	blocks := (size + fuseBlock - 1) / fuseBlock
	w.fuseJob = fuseJob{f: f, out: out, srcs: srcs, bsrcs: bsrcs, regs: w.regs, per: (blocks + parts - 1) / parts}
	err := w.team.run(parts, &w.fuseJob)
	w.fuseJob = fuseJob{}
	return err
}

// fuseJob is a fusion split into parts; the worker keeps one, so splitting allocates nothing.
type fuseJob struct {
	f     *fusion
	out   []float32
	srcs  [][]float32
	bsrcs [][]bool
	regs  []fuseRegs
	per   int // blocks per part
}

func (j *fuseJob) part(p int) {
	size := len(j.out)
	lo, hi := min(p*j.per*fuseBlock, size), min((p+1)*j.per*fuseBlock, size)
	j.f.runRange(j.out, j.srcs, j.bsrcs, &j.regs[p], lo, hi)
}

// catch turns a panic of fn (a kernel bug) into an error, so it reaches the caller of Execute
// instead of killing the process from a worker goroutine.
func catch(fn func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("native kernel panic: %v", r)
		}
	}()
	fn()
	return nil
}

func (f *fusion) runRange(out []float32, srcs [][]float32, bsrcs [][]bool, r *fuseRegs, lo, hi int) {
	r.ensure(f.nregs)
	last := len(f.instrs) - 1
	for b := lo; b < hi; b += fuseBlock {
		e := min(b+fuseBlock, hi)
		n := e - b
		for i := range f.leaves {
			l := &f.leaves[i]
			switch l.kind {
			case leafDirect:
				r.views[l.reg] = srcs[i][b:e]
			case leafScalar:
				v := l.scalar
				if l.value >= 0 {
					v = srcs[i][0]
				}
				dst := r.bufs[l.reg][:n]
				for j := range dst {
					dst[j] = v
				}
				r.views[l.reg] = dst
			case leafStrided:
				dst := r.bufs[l.reg][:n]
				gatherStrided(dst, srcs[i], l.dims, l.strides, b)
				r.views[l.reg] = dst
			case leafBool:
				dst := r.bufs[l.reg][:n]
				src := bsrcs[i][b:e]
				for j, t := range src {
					dst[j] = 0
					if t {
						dst[j] = 1
					}
				}
				r.views[l.reg] = dst
			}
		}
		for k := range f.instrs {
			in := &f.instrs[k]
			var dst []float32
			if k == last {
				dst = out[b:e]
			} else {
				dst = r.bufs[in.dst][:n]
			}
			a := r.views[in.a]
			if in.b >= 0 {
				binaryF32(in.op, dst, a, r.views[in.b])
			} else {
				unaryF32(in.op, dst, a)
			}
			r.views[in.dst] = dst
		}
	}
}

// gatherStrided fills dst with the elements lo, lo+1, ... of a view over src with dimensions
// dims and per-axis strides (0 repeats). The innermost axis is copied, filled or strided in a
// tight loop.
func gatherStrided(dst, src []float32, dims, strides []int, lo int) {
	k := len(dims)
	var idxA [16]int
	var idx []int
	if k <= len(idxA) {
		idx = idxA[:k]
	} else {
		idx = make([]int, k)
	}
	off, rem := 0, lo
	for a := k - 1; a >= 0; a-- {
		idx[a] = rem % dims[a]
		rem /= dims[a]
		off += idx[a] * strides[a]
	}
	inner, is := dims[k-1], strides[k-1]
	for p := 0; p < len(dst); {
		cnt := min(inner-idx[k-1], len(dst)-p)
		row := dst[p : p+cnt]
		switch is {
		case 0:
			v := src[off]
			for j := range row {
				row[j] = v
			}
		case 1:
			copy(row, src[off:off+cnt])
		default:
			for j := range row {
				row[j] = src[off+j*is]
			}
		}
		p += cnt
		off += cnt * is
		idx[k-1] += cnt
		if idx[k-1] < inner {
			continue
		}
		off -= inner * is
		idx[k-1] = 0
		for a := k - 2; a >= 0; a-- {
			idx[a]++
			off += strides[a]
			if idx[a] < dims[a] {
				break
			}
			off -= strides[a] * dims[a]
			idx[a] = 0
		}
	}
}

// binaryF32 computes dst = a op b elementwise (all the same length). The arithmetic is
// float32, as simplego's.
func binaryF32(op backends.OpType, dst, a, b []float32) {
	if binaryF32Vec(vecKind(op), dst, a, b) {
		return
	}
	a, b = a[:len(dst)], b[:len(dst)]
	switch op {
	case backends.OpTypeAdd:
		for i := range dst {
			dst[i] = a[i] + b[i]
		}
	case backends.OpTypeSub:
		for i := range dst {
			dst[i] = a[i] - b[i]
		}
	case backends.OpTypeMul:
		for i := range dst {
			dst[i] = a[i] * b[i]
		}
	case backends.OpTypeDiv:
		for i := range dst {
			dst[i] = a[i] / b[i]
		}
	case backends.OpTypeMax:
		for i := range dst {
			dst[i] = max(a[i], b[i])
		}
	case backends.OpTypeMin:
		for i := range dst {
			dst[i] = min(a[i], b[i])
		}
	default:
		panic(fmt.Sprintf("binaryF32: %s is not a fused operation", op))
	}
}

// unaryF32 computes dst = op(a) elementwise. Exp and Tanh use the vector kernels where the CPU
// has them (within 2 ulps of the float64 result rounded once); the other transcendental
// functions, and Exp and Tanh without the kernels, are evaluated in float64 and rounded once, as
// simplego does.
func unaryF32(op backends.OpType, dst, a []float32) {
	a = a[:len(dst)]
	switch op {
	case opCopy:
		copy(dst, a)
	case backends.OpTypeNeg:
		for i := range dst {
			dst[i] = -a[i]
		}
	case backends.OpTypeAbs:
		for i := range dst {
			dst[i] = math.Float32frombits(math.Float32bits(a[i]) &^ (1 << 31))
		}
	case backends.OpTypeExp:
		if expF32Vec(dst, a) {
			return
		}
		for i := range dst {
			dst[i] = float32(math.Exp(float64(a[i])))
		}
	case backends.OpTypeLog:
		for i := range dst {
			dst[i] = float32(math.Log(float64(a[i])))
		}
	case backends.OpTypeTanh:
		if tanhF32Vec(dst, a) {
			return
		}
		for i := range dst {
			dst[i] = float32(math.Tanh(float64(a[i])))
		}
	case backends.OpTypeSqrt:
		for i := range dst {
			dst[i] = float32(math.Sqrt(float64(a[i])))
		}
	case backends.OpTypeRsqrt:
		for i := range dst {
			dst[i] = float32(1 / math.Sqrt(float64(a[i])))
		}
	case backends.OpTypeLogistic:
		for i, x := range a {
			// exp of a non-positive argument only, so it never overflows.
			if x >= 0 {
				dst[i] = float32(1 / (1 + math.Exp(-float64(x))))
			} else {
				e := math.Exp(float64(x))
				dst[i] = float32(e / (1 + e))
			}
		}
	default:
		panic(fmt.Sprintf("unaryF32: %s is not a fused operation", op))
	}
}
