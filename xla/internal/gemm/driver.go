package gemm

import (
	"context"
	"errors"
	"fmt"
)

// operand is one input matrix in either storage type (exactly one slice set).
type operand struct {
	f32  []float32
	bf16 []uint16
}

// at returns the operand's storage starting at element off.
func (o operand) at(off int) operand {
	if o.bf16 != nil {
		return operand{bf16: o.bf16[off:]}
	}
	return operand{f32: o.f32[off:]}
}

// packOperand packs an nx×kb block at (x0, p0) of o into float32 panels
// (see pack.go for sx, sp), widening bfloat16 storage.
func packOperand(dst []float32, o operand, x0, p0, nx, kb, w, sx, sp int) {
	if o.bf16 != nil {
		packBF16(dst, o.bf16, x0, p0, nx, kb, w, sx, sp)
		return
	}
	packF32(dst, o.f32, x0, p0, nx, kb, w, sx, sp)
}

// inputs are the slices of one call.
type inputs struct {
	a, b    operand
	cf32    []float32
	cbf16   []uint16
	bf16Out bool
}

// job is the work of one call, shared read-only by its workers.
type job struct {
	ctx    context.Context
	op     Op
	batch  Batch
	in     inputs
	active int // workers taking part
	// byBatch: worker w computes whole batch items [w*Count/active, ...);
	// otherwise every worker takes its share of every item, split along M
	// (splitM) or N.
	byBatch bool
	splitM  bool
}

// worker holds one goroutine's reusable buffers and result.
type worker struct {
	packA, packB []float32 // float32 panels
	pairA, pairB []uint32  // bfloat16 panels paired along k
	tile         []float32 // mr×nr tile for edge tiles
	scratch      []float32 // float32 accumulator for bfloat16 outputs
	err          error
}

// parallelMin is the smallest M·N·K worth splitting over goroutines: below it
// (≈ 0.5 MFLOP, tens of µs) starting and joining a goroutine costs more than
// the second core saves.
const parallelMin = 64 * 64 * 64

// run plans the call and runs its workers (worker 0 on the caller, through the runner when
// there are more).
func (p *Pool) run(ctx context.Context, op Op, batch Batch, in inputs) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if batch.Count == 0 || op.M == 0 || op.N == 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()

	j := job{ctx: ctx, op: op, batch: batch, in: in, active: 1}
	work := op.M * op.N * max(op.K, 1)
	if p.threads > 1 && work*batch.Count >= parallelMin {
		mr, nr := p.spec.tile(in.a.bf16 != nil)
		mt := ceilDiv(op.M, mr)
		nt := ceilDiv(op.N, nr)
		switch {
		case batch.Count >= p.threads:
			j.byBatch, j.active = true, p.threads
		case work >= parallelMin:
			// Each worker packs all of the operand along the dimension it does
			// not split, so split the larger of M and N: the duplicated
			// packing is then the smaller operand.
			j.splitM = op.M >= op.N && mt >= 2 || nt < 2
			tiles := nt
			if j.splitM {
				tiles = mt
			}
			j.active = min(p.threads, tiles)
		}
	}
	p.job = j
	if j.active > 1 {
		p.runner.Run(j.active, p.part)
	} else {
		p.part(0)
	}
	p.job = job{} // drop references to the caller's slices and context

	// Report an internal error over a cancellation (every worker sees the
	// same cancelled context, so that error would otherwise repeat).
	var first error
	for w := 0; w < j.active; w++ {
		err := p.workers[w].err
		p.workers[w].err = nil
		if err != nil && (first == nil || errors.Is(first, ctx.Err()) && !errors.Is(err, ctx.Err())) {
			first = err
		}
	}
	return first
}

// runWorker computes worker w's share of p.job. A panic (a bug in this
// package, since the API validated the shapes) is returned as an error rather
// than crashing the process from a goroutine the caller cannot recover.
func (p *Pool) runWorker(w int) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("gemm: internal error in worker %d: %v", w, r)
		}
	}()
	j := &p.job
	op, spec := j.op, &p.spec
	mr, nr := spec.tile(j.in.a.bf16 != nil)
	first, last := 0, j.batch.Count
	m0, m1, n0, n1 := 0, op.M, 0, op.N
	switch {
	case j.byBatch:
		first, last = w*j.batch.Count/j.active, (w+1)*j.batch.Count/j.active
	case j.active > 1 && j.splitM:
		m0, m1 = share(op.M, mr, w, j.active)
	case j.active > 1:
		n0, n1 = share(op.N, nr, w, j.active)
	}
	wk := &p.workers[w]
	for i := first; i < last; i++ {
		a := j.in.a.at(i * j.batch.StrideA)
		b := j.in.b.at(i * j.batch.StrideB)
		cOff := i*j.batch.StrideC + m0*op.LDC + n0
		var err error
		if j.in.bf16Out {
			err = wk.gemmBF16Out(j.ctx, spec, &op, a, b, j.in.cbf16[cOff:], m0, m1, n0, n1)
		} else {
			err = wk.gemm(j.ctx, spec, &op, a, b, j.in.cf32[cOff:], op.LDC, op.Accumulate, m0, m1, n0, n1)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// share returns worker w's half-open range of n split into whole tiles of t
// among parts workers, as evenly as possible.
func share(n, t, w, parts int) (int, int) {
	tiles := ceilDiv(n, t)
	lo := w * tiles / parts * t
	hi := min((w+1)*tiles/parts*t, n)
	return lo, hi
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// grow returns buf with length n, reallocating only when it is too small.
func grow[T any](buf []T, n int) []T {
	if cap(buf) < n {
		return make([]T, n)
	}
	return buf[:n]
}

// gemm computes rows [m0, m1) × columns [n0, n1) of op(A)·op(B) into c, whose
// element (0, 0) is C(m0, n0) and whose rows are ldc apart, adding to c when
// accumulate is set. It is serial; the caller gives each worker a disjoint
// rectangle.
func (wk *worker) gemm(ctx context.Context, spec *kernelSpec, op *Op, a, b operand, c []float32, ldc int, accumulate bool, m0, m1, n0, n1 int) error {
	if a.bf16 != nil && spec.bf16.fn != nil {
		return gemmPanels(ctx, &spec.bf16, &wk.pairA, &wk.pairB, &wk.tile, op, a, b, c, ldc, accumulate, m0, m1, n0, n1)
	}
	return gemmPanels(ctx, &spec.f32, &wk.packA, &wk.packB, &wk.tile, op, a, b, c, ldc, accumulate, m0, m1, n0, n1)
}

// gemmPanels is gemm on engine e, with the worker's panel buffers for e's
// element type.
func gemmPanels[T float32 | uint32](ctx context.Context, e *engine[T], bufA, bufB *[]T, bufTile *[]float32, op *Op, a, b operand, c []float32, ldc int, accumulate bool, m0, m1, n0, n1 int) error {
	mr, nr := e.mr, e.nr
	if op.K == 0 {
		if !accumulate {
			for i := 0; i < m1-m0; i++ {
				clear(c[i*ldc : i*ldc+n1-n0])
			}
		}
		return nil
	}
	// Strides of A and B in the (x, p) terms of pack.go.
	asx, asp := op.LDA, 1
	if op.TransA {
		asx, asp = 1, op.LDA
	}
	bsx, bsp := 1, op.LDB
	if op.TransB {
		bsx, bsp = op.LDB, 1
	}
	// Split the rows into the fewest mc-sized blocks, evenly: B is re-packed
	// per block, so 1024 rows with mc = 1020 must not become 1020 + 4.
	mc := ceilDiv(ceilDiv(m1-m0, ceilDiv(m1-m0, e.mc)), mr) * mr
	mcMax := mc
	ncMax := min(e.nc, ceilDiv(n1-n0, nr)*nr)
	stepsMax := ceilDiv(min(e.kc, op.K), e.kPer)
	d := directOperands(e, op, a, b, m1-m0, n1-n0)
	*bufA = grow(*bufA, mcMax*stepsMax)
	*bufB = grow(*bufB, ncMax*stepsMax)
	*bufTile = grow(*bufTile, mr*nr)
	t := tiler[T]{e: e, packA: *bufA, packB: *bufB, tile: *bufTile, c: c, ldc: ldc, m0: m0, n0: n0, d: d}

	for ic := m0; ic < m1; ic += mc {
		mb := min(mc, m1-ic)
		for pc := 0; pc < op.K; pc += e.kc {
			if err := ctx.Err(); err != nil {
				return err
			}
			kb := min(e.kc, op.K-pc)
			t.ic, t.pc, t.mb, t.steps = ic, pc, mb, ceilDiv(kb, e.kPer)
			t.beta = accumulate || pc > 0
			if d.a == nil {
				e.pack(t.packA, a, ic, pc, mb, kb, mr, asx, asp)
			} else if r := mb % mr; r != 0 {
				// Only the partial row panel is packed (zero-padded to mr rows);
				// the kernel reads the full ones in place.
				e.pack(t.packA, a, ic+mb-r, pc, r, kb, mr, asx, asp)
			}
			for jc := n0; jc < n1; jc += e.nc {
				nb := min(e.nc, n1-jc)
				t.jc, t.nb = jc, nb
				if d.b == nil {
					e.pack(t.packB, b, jc, pc, nb, kb, nr, bsx, bsp)
				} else if r := nb % nr; r != 0 {
					e.pack(t.packB, b, jc+nb-r, pc, r, kb, nr, bsx, bsp)
				}
				if d.b != nil && d.a == nil {
					// B read in place: one B panel against every A panel, so that it
					// is fetched from memory once and then read from L1.
					for jr := 0; jr < nb; jr += nr {
						t.prefetchB(jr + nr)
						for ir := 0; ir < mb; ir += mr {
							t.run(ir, jr)
						}
					}
					continue
				}
				for ir := 0; ir < mb; ir += mr {
					if d.a != nil {
						t.prefetchA(ir + mr)
					}
					for jr := 0; jr < nb; jr += nr {
						t.run(ir, jr)
					}
				}
			}
		}
	}
	return nil
}

// directMaxTiles is the most tiles of the other side for which an operand is
// read in place rather than packed. Packing an A block costs a read and a write
// of it, repaid by the nc/nr kernel calls that then read it from L1; attention's
// products (a 512×512 score matrix against 64 columns of values, or 64 rows of
// gradients against it) have only 2 to 6 such calls, and their packing cost
// them a quarter of their time.
const directMaxTiles = 6

// direct holds the operands a call reads in place (nil when packed), with the
// strides of A (asr, ask: row and k, in elements) and B (bsk: k; its columns
// are contiguous).
type direct[T float32 | uint32] struct {
	a, b     []T
	asr, ask int
	bsk      int
}

// directOperands decides which operands of an m×n rectangle of op are read in
// place: those of a float32 engine with a strided kernel, in float32 storage,
// whose packed panels the other side would reuse at most directMaxTiles times;
// B only when not transposed (a kernel step reads 32 consecutive columns).
func directOperands[T float32 | uint32](e *engine[T], op *Op, a, b operand, m, n int) direct[T] {
	var d direct[T]
	if e.strided == nil {
		return d
	}
	if af, ok := any(a.f32).([]T); ok && af != nil && ceilDiv(n, e.nr) <= directMaxTiles {
		d.a, d.asr, d.ask = af, op.LDA, 1
		if op.TransA {
			d.asr, d.ask = 1, op.LDA
		}
	}
	if bf, ok := any(b.f32).([]T); ok && bf != nil && !op.TransB && ceilDiv(m, e.mr) <= directMaxTiles {
		d.b, d.bsk = bf, op.LDB
	}
	return d
}

// tiler runs the register tiles of one (ic, pc, jc) block of gemmPanels.
type tiler[T float32 | uint32] struct {
	e                  *engine[T]
	packA, packB       []T
	tile, c            []float32
	ldc, m0, n0        int
	d                  direct[T]
	ic, pc, jc, mb, nb int
	steps              int
	beta               bool
}

// prefetchA prefetches the A panel at row ir of the block, read in place, while
// the tiles of the panel before it compute: with only a few tiles per panel the
// hardware prefetcher does not keep up with its 12 row streams (attention's P·V,
// in one process: 254 GFLOP/s in place without it, 272 with it; 345 with A
// already in cache).
func (t *tiler[T]) prefetchA(ir int) {
	a, ok := any(t.d.a).([]float32)
	if !ok || ir+t.e.mr > t.mb {
		return
	}
	off := (t.ic+ir)*t.d.asr + t.pc*t.d.ask
	if t.d.asr > t.d.ask {
		prefetchBlock(a, off, t.e.mr, t.d.asr, (t.steps-1)*t.d.ask+1)
	} else {
		prefetchBlock(a, off, t.steps, t.d.ask, (t.e.mr-1)*t.d.asr+1)
	}
}

// prefetchB prefetches the B panel at column jr of the block, read in place.
func (t *tiler[T]) prefetchB(jr int) {
	b, ok := any(t.d.b).([]float32)
	if !ok || jr+t.e.nr > t.nb {
		return
	}
	prefetchBlock(b, t.pc*t.d.bsk+t.jc+jr, t.steps, t.d.bsk, t.e.nr)
}

// run computes the tile at (ir, jr) of the block: from packed panels with the
// unrolled kernel, or with the strided one where an operand is read in place;
// an edge tile is computed whole into t.tile and only its existing rows and
// columns are kept.
func (t *tiler[T]) run(ir, jr int) {
	e, steps := t.e, t.steps
	mr, nr := e.mr, e.nr
	rows, cols := min(mr, t.mb-ir), min(nr, t.nb-jr)
	ap, asr, ask := t.packA[ir*steps:(ir+mr)*steps], 1, mr
	if t.d.a != nil {
		if rows == mr {
			ap, asr, ask = t.d.a[(t.ic+ir)*t.d.asr+t.pc*t.d.ask:], t.d.asr, t.d.ask
		} else {
			ap = t.packA[:mr*steps]
		}
	}
	bp, bsk := t.packB[jr*steps:(jr+nr)*steps], nr
	if t.d.b != nil {
		if cols == nr {
			bp, bsk = t.d.b[t.pc*t.d.bsk+t.jc+jr:], t.d.bsk
		} else {
			bp = t.packB[:nr*steps]
		}
	}
	packed := (t.d.a == nil || rows < mr) && (t.d.b == nil || cols < nr)
	off := (t.ic-t.m0+ir)*t.ldc + t.jc - t.n0 + jr
	c, ldc, beta := t.c[off:], t.ldc, t.beta
	edge := rows < mr || cols < nr
	if edge {
		c, ldc, beta = t.tile, nr, false
	}
	if packed {
		e.fn(steps, ap, bp, c, ldc, beta)
	} else {
		e.strided(steps, ap, asr, ask, bp, bsk, c, ldc, beta)
	}
	if !edge {
		return
	}
	for r := 0; r < rows; r++ {
		dst := t.c[off+r*t.ldc : off+r*t.ldc+cols]
		src := t.tile[r*nr : r*nr+cols]
		if t.beta {
			for x, v := range src {
				dst[x] += v
			}
		} else {
			copy(dst, src)
		}
	}
}

// scratchMax bounds the float32 scratch of a bfloat16-output call (elements,
// 4 MiB): rows are processed in chunks whose float32 results fit in it.
const scratchMax = 1 << 20

// gemmBF16Out computes the rectangle into a float32 scratch, a chunk of rows at
// a time, then rounds each result to bfloat16 once (adding the old C first when
// accumulating), so the rounding error does not grow with the number of k blocks.
func (wk *worker) gemmBF16Out(ctx context.Context, spec *kernelSpec, op *Op, a, b operand, c []uint16, m0, m1, n0, n1 int) error {
	nw := n1 - n0
	mr, _ := spec.tile(true)
	chunk := max(mr, scratchMax/nw/mr*mr)
	for r0 := m0; r0 < m1; r0 += chunk {
		r1 := min(r0+chunk, m1)
		wk.scratch = grow(wk.scratch, (r1-r0)*nw)
		if err := wk.gemm(ctx, spec, op, a, b, wk.scratch, nw, false, r0, r1, n0, n1); err != nil {
			return err
		}
		for i := 0; i < r1-r0; i++ {
			row := (r0 - m0 + i) * op.LDC
			storeBF16(c[row:row+nw], wk.scratch[i*nw:(i+1)*nw], op.Accumulate)
		}
	}
	return nil
}
