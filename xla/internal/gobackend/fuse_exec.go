package gobackend

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
)

// fuseRegs is one goroutine's registers for running fusions: fuseBlock floats each, grown to
// the largest program seen, so steady-state execution allocates nothing; half is the bfloat16
// staging block of a strided bfloat16 load.
type fuseRegs struct {
	bufs  [][]float32
	views [][]float32
	half  []uint16
	bools []bool
	// scratch receives the blocks of a fusion computed inside a reduction (reduce_fused.go), and
	// holds a short-vector product's repeated vector (dot_vec.go); see scratchBlock.
	scratch []float32
}

// scratchBlock returns the goroutine's scratch block of redScratch floats, made on first use
// and kept, so steady-state execution allocates nothing.
func (r *fuseRegs) scratchBlock() []float32 {
	if len(r.scratch) < redScratch {
		r.scratch = make([]float32, redScratch)
	}
	return r.scratch
}

func (r *fuseRegs) ensure(n int) {
	for len(r.bufs) < n {
		r.bufs = append(r.bufs, make([]float32, fuseBlock))
	}
	if len(r.views) < n {
		r.views = make([][]float32, n)
	}
	if r.half == nil {
		r.half = make([]uint16, fuseBlock)
		r.bools = make([]bool, fuseBlock)
	}
}

// fuseIO is the data of one run of a fusion: its output (out for float32, out16 for bfloat16)
// and, by leaf, the flat data it reads (srcs for float32, hsrcs for bfloat16, bsrcs for bool;
// nil for a folded constant). Output element i is stored at out[i-outOff]: a reduction computing
// the fusion a few rows at a time (reduce_fused.go) points out at its scratch, outOff at the
// first element it asks for.
type fuseIO struct {
	out    []float32
	out16  []uint16
	outOff int
	srcs   [][]float32
	hsrcs  [][]uint16
	bsrcs  [][]bool
	// extra are the float32 outputs of the fusion's extra values, in order (fuse_outputs.go).
	extra [][]float32
}

func (io *fuseIO) size() int {
	if io.out16 != nil {
		return len(io.out16)
	}
	return len(io.out)
}

// minParallel is the output size from which a native elementwise or reduction operation is
// split across goroutines: below it the start and join cost more than the work.
const minParallel = 1 << 15

// runIO computes the fusion, splitting the output across the worker's team (one part per fusion
// register set).
func (f *fusion) runIO(io fuseIO, w *worker) error {
	size := io.size()
	parts := len(w.regs)
	if size < minParallel {
		parts = 1
	}
	if parts == 1 {
		// Most fusions are small: no helper, and no closure that escapes (per-step garbage).
		return catch(func() { f.runRange(&io, &w.regs[0], 0, size) })
	}
	// Chunks are whole blocks, so each part's blocks are the same as a serial run's.
	blocks := (size + fuseBlock - 1) / fuseBlock
	w.fuseJob = fuseJob{f: f, io: io, regs: w.regs, per: (blocks + parts - 1) / parts}
	err := w.team.run(parts, &w.fuseJob)
	w.fuseJob = fuseJob{}
	return err
}

// fuseJob is a fusion split into parts; the worker keeps one, so splitting allocates nothing.
type fuseJob struct {
	f    *fusion
	io   fuseIO
	regs []fuseRegs
	per  int // blocks per part
}

func (j *fuseJob) part(p int) {
	size := j.io.size()
	lo, hi := min(p*j.per*fuseBlock, size), min((p+1)*j.per*fuseBlock, size)
	j.f.runRange(&j.io, &j.regs[p], lo, hi)
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

func (f *fusion) runRange(io *fuseIO, r *fuseRegs, lo, hi int) {
	r.ensure(f.nregs)
	last := len(f.instrs) - 1
	// A scalar's register is filled once: instructions only write their own registers, so it
	// holds the value for every block.
	for i := range f.leaves {
		l := &f.leaves[i]
		if l.kind != leafScalar || lo >= hi {
			continue
		}
		v := l.scalar
		switch {
		case l.value < 0:
		case l.bf16:
			v = widenBF16Scalar(io.hsrcs[i][0])
		default:
			v = io.srcs[i][0]
		}
		fill(r.bufs[l.reg][:min(fuseBlock, hi-lo)], v)
	}
	// direct: the last instruction writes straight into the float32 output. With extra outputs
	// every output is stored after the block's last instruction instead (storeBlock).
	direct := io.out16 == nil && len(f.extra) == 0
	for b := lo; b < hi; b += fuseBlock {
		e := min(b+fuseBlock, hi)
		n := e - b
		if f.readAhead {
			f.prefetch(io, b+readAheadBlocks*fuseBlock, hi)
		}
		for i := range f.leaves {
			l := &f.leaves[i]
			switch l.kind {
			case leafDirect:
				if !l.bf16 {
					r.views[l.reg] = io.srcs[i][b:e]
					break
				}
				dst := r.bufs[l.reg][:n]
				widenBF16(dst, io.hsrcs[i][b:e])
				r.views[l.reg] = dst
			case leafScalar:
				r.views[l.reg] = r.bufs[l.reg][:n]
			case leafStrided:
				dst := r.bufs[l.reg][:n]
				if l.bf16 {
					gatherStrided(r.half[:n], io.hsrcs[i], l.dims, l.strides, b)
					widenBF16(dst, r.half[:n])
				} else {
					gatherStrided(dst, io.srcs[i], l.dims, l.strides, b)
				}
				r.views[l.reg] = dst
			case leafBool:
				dst := r.bufs[l.reg][:n]
				if src := io.bsrcs[i]; len(src) == 1 && hi > 1 { // a single condition (Where)
					fill(dst, b2f(src[0]))
					r.views[l.reg] = dst
					break
				}
				var src []bool
				if l.dims != nil {
					src = r.bools[:n]
					gatherStrided(src, io.bsrcs[i], l.dims, l.strides, b)
				} else {
					src = io.bsrcs[i][b:e]
				}
				boolsToF32(dst, src)
				r.views[l.reg] = dst
			}
		}
		for k := range f.instrs {
			in := &f.instrs[k]
			var dst []float32
			if k == last && direct {
				dst = io.out[b-io.outOff : e-io.outOff]
			} else {
				dst = r.bufs[in.dst][:n]
			}
			a := r.views[in.a]
			switch {
			case in.op == backends.OpTypeWhere && in.uniform:
				// One condition for every element (the optimizer's keep-or-update): pass the
				// chosen register on, copying only into the output.
				src := r.views[in.b]
				if r.views[in.cond][0] != 0 {
					src = a
				}
				if k != last || !direct {
					r.views[in.dst] = src
					continue
				}
				copy(dst, src)
			case in.op == backends.OpTypeWhere:
				selectF32(dst, r.views[in.cond], a, r.views[in.b])
			case in.table != nil:
				lookupBF16(in.table, dst, a)
			case in.b >= 0 && in.round:
				binaryBF16(in.op, dst, a, r.views[in.b])
			case in.b >= 0:
				binaryF32(in.op, dst, a, r.views[in.b])
			case in.round: // float32 -> bfloat16
				roundBF16(dst, a)
			default:
				unaryF32(in.op, dst, a)
			}
			r.views[in.dst] = dst
		}
		switch {
		case len(f.extra) > 0:
			f.storeBlock(io, r, b, e)
		case io.out16 != nil:
			narrowBF16(io.out16[b-io.outOff:e-io.outOff], r.views[f.instrs[last].dst])
		}
	}
}

// readAheadBlocks is how far ahead (in blocks) a fusion asks for its operands' and outputs'
// lines; readAheadMin is the smallest fusion (elements) that does.
const (
	readAheadBlocks = 4
	readAheadMin    = 1 << 18
)

// readsAhead reports whether the fusion prefetches (prefetch): one with extra outputs, or a
// float32 one of at least readAheadMin elements reading two or more float32 operands in its
// output's layout. A block's instructions run one after the other over it, so each one that
// first reads an operand waits on memory with little else in flight, and the hardware
// prefetchers, following each stream a few lines ahead, do not cover that wait when a program
// reads several large buffers. Measured: the AdamW update with its extra outputs ([3072, 768]
// alone) 20–25% faster than as three separate fusions, and no faster than them without reading
// ahead; the GPT-2 124M step, with every such fusion reading ahead against only the
// multi-output ones, 2924 against 3041 ms mean over 12 alternating pairs, 10 of them faster.
func (f *fusion) readsAhead() bool {
	if len(f.extra) > 0 {
		return true
	}
	if f.outBF16 || f.shape.Size() < readAheadMin {
		return false
	}
	direct := 0
	for _, l := range f.leaves {
		if l.kind == leafDirect && !l.bf16 {
			direct++
		}
	}
	return direct >= 2
}

// prefetch asks for the lines of the block at b (if it is before hi) of the fusion's float32
// operands read in the output's layout and of its outputs (the output only where it is the
// fusion's own buffer, not a reduction's scratch holding a few rows: reduce_fused.go).
func (f *fusion) prefetch(io *fuseIO, b, hi int) {
	if b >= hi {
		return
	}
	n := 4 * min(fuseBlock, hi-b)
	for i := range f.leaves {
		if l := &f.leaves[i]; l.kind == leafDirect && !l.bf16 {
			prefetchLines(unsafe.Pointer(&io.srcs[i][b]), n)
		}
	}
	if o := b - io.outOff; o >= 0 && o < len(io.out) {
		prefetchLines(unsafe.Pointer(&io.out[o]), 4*min(fuseBlock, len(io.out)-o))
	}
	for _, x := range io.extra {
		prefetchLines(unsafe.Pointer(&x[b]), n)
	}
}

// storeBlock stores elements [b, e) of a fusion with extra outputs: the root's and each extra
// value's. An output may be written over one of the fusion's operands (exec.go's inPlace), and
// a register may be a view of an operand's block (a Where on a single condition), so every
// output's block is first made its register's own, then all are stored: no store can change
// what another output stores.
func (f *fusion) storeBlock(io *fuseIO, r *fuseRegs, b, e int) {
	n := e - b
	own := func(reg int) []float32 {
		v, buf := r.views[reg][:n], r.bufs[reg][:n]
		if &v[0] != &buf[0] {
			copy(buf, v)
			r.views[reg] = buf
		}
		return buf
	}
	root := own(f.instrs[len(f.instrs)-1].dst)
	for _, o := range f.extra {
		own(o.reg)
	}
	copy(io.out[b-io.outOff:e-io.outOff], root)
	for i, o := range f.extra {
		copy(io.extra[i][b:e], r.views[o.reg][:n])
	}
}

// gatherStrided fills dst with the elements lo, lo+1, ... of a view over src with dimensions
// dims and per-axis strides (0 repeats). The innermost axis is copied, filled or strided in a
// tight loop.
func gatherStrided[T float32 | uint16 | int32 | bool](dst, src []T, dims, strides []int, lo int) {
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
			fill(row, src[off])
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

// fill sets every element of dst to v. A run of 32-bit values (float32, int32) is stored by the
// vector kernel where there is one (fill32Vec); another long run is filled by doubling copies
// (memmove's vector stores): several times faster than a store per element. Broadcasts of a
// column (the softmax's row maximum and sum) are such runs, one per row of every block.
func fill[T any](dst []T, v T) {
	if len(dst) >= 16 && unsafe.Sizeof(v) == 4 &&
		fill32Vec((*uint32)(unsafe.Pointer(unsafe.SliceData(dst))), *(*uint32)(unsafe.Pointer(&v)), len(dst)) {
		return
	}
	if len(dst) < 32 {
		for i := range dst {
			dst[i] = v
		}
		return
	}
	dst[0] = v
	for k := 1; k < len(dst); k *= 2 {
		copy(dst[k:], dst[:k])
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
// has them (within 2 ulps of the float64 result rounded once), and so do Sqrt and Neg (the bits
// of unaryRef); the other operations, and all of them without the kernels, are computed as
// simplego computes them (unaryRef).
func unaryF32(op backends.OpType, dst, a []float32) {
	a = a[:len(dst)]
	switch op {
	case opCopy:
		copy(dst, a)
		return
	case backends.OpTypeExp:
		if expF32Vec(dst, a) {
			return
		}
	case backends.OpTypeTanh:
		if tanhF32Vec(dst, a) {
			return
		}
	case backends.OpTypeSqrt:
		if sqrtF32Vec(dst, a) {
			return
		}
	case backends.OpTypeNeg:
		if negF32Vec(dst, a) {
			return
		}
	}
	unaryRef(op, dst, a)
}

// unaryRef computes dst = op(a) as simplego computes a float32 (or, before truncation, a
// bfloat16) operation: the transcendental functions in float64, rounded once to float32; Abs
// negates the negative values only (-0 and NaNs keep their sign).
func unaryRef(op backends.OpType, dst, a []float32) {
	a = a[:len(dst)]
	switch op {
	case backends.OpTypeNeg:
		for i := range dst {
			dst[i] = -a[i]
		}
	case backends.OpTypeAbs:
		for i, x := range a {
			if x < 0 {
				x = -x
			}
			dst[i] = x
		}
	case backends.OpTypeExp:
		for i := range dst {
			dst[i] = float32(math.Exp(float64(a[i])))
		}
	case backends.OpTypeLog:
		for i := range dst {
			dst[i] = float32(math.Log(float64(a[i])))
		}
	case backends.OpTypeTanh:
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

// selectF32 sets dst[i] to a[i] where cond[i] is 1 and to b[i] where it is 0 (Where). It reads
// element i of every operand before writing element i of dst, so dst may be one of them.
func selectF32(dst, cond, a, b []float32) {
	if selectF32Vec(dst, cond, a, b) {
		return
	}
	cond, a, b = cond[:len(dst)], a[:len(dst)], b[:len(dst)]
	for i, c := range cond {
		// Branch-free: masks may change at every element (attention's causal mask).
		m := -(math.Float32bits(c) >> 29 & 1) // all ones where c is 1.0 (0x3f800000), none where 0
		dst[i] = math.Float32frombits(math.Float32bits(a[i])&m | math.Float32bits(b[i])&^m)
	}
}

// boolsToF32 sets dst[i] to 1 where src[i] is true, else 0. It reads the bools as bytes (Go
// stores them as 0 or 1), so there is no branch to mispredict on a mask that changes at every
// element.
func boolsToF32(dst []float32, src []bool) {
	if boolsToF32Vec(dst, src) {
		return
	}
	u := unsafe.Slice((*uint8)(unsafe.Pointer(unsafe.SliceData(src))), len(src))
	dst = dst[:len(u)]
	for j, t := range u {
		dst[j] = float32(t)
	}
}

// b2f is a bool as 0 or 1.
func b2f(t bool) float32 {
	if t {
		return 1
	}
	return 0
}
