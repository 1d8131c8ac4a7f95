package gobackend

import (
	"math"

	"github.com/gomlx/gomlx/backends"
)

// Reductions of fusions. A float32 reduction whose operand is a fusion's output that nothing
// else reads (the gradient norm's squares, the softmax gradient's products, a layer norm's
// centred squares) computes that fusion itself, a few rows at a time into a scratch block of its
// goroutine, and reduces the block while it is in cache: the operand is never written to memory
// and read back. The fusion computes every element as its own step would, and the reduction adds
// them in the same order as from a buffer (reduce.go), so the results are bitwise those of the
// two steps, and so simplego's.

// redScratch is the size of each goroutine's scratch block (floats): eight rows of up to 2048
// values are summed together (sumRows8), longer rows eight at a time a block of 2048 values of
// each at a time (addRows8), and the maxima of longer rows and columns a block at a time.
const redScratch = 8 * 2048

// fusedRedMinInner is the least number of columns (inner positions) a column reduction computes
// a fusion for: each row of the reduced axis is then one call into the fusion, whose set-up a
// narrow row would not repay.
const fusedRedMinInner = 128

// fuseReduceSources gives each float32 reduction whose operand is the output of a float32 fusion
// read by nothing else that fusion as its source: the fusion's step is dropped (absorbed, never
// materialized) and the reduction reads the fusion's operands.
func (b *Builder) fuseReduceSources(native []*nativeOp, absorbed []bool, users [][]int, isOutput []bool) {
	for _, n := range b.nodes {
		nat := native[n.id]
		if nat == nil || nat.red == nil || nat.red.bf16 {
			continue
		}
		p := nat.red
		if p.inner != 1 && p.inner < fusedRedMinInner {
			continue
		}
		prod := b.values[p.in].node
		src := native[prod.id]
		if src == nil || src.fus == nil || src.fus.outBF16 || len(src.fus.extra) > 0 || src.fus.out != p.in || isOutput[p.in] || len(users[p.in]) != 1 {
			continue
		}
		p.src = src.fus
		nat.reads = src.fus.reads
		nat.name += " of a fusion"
		native[prod.id], absorbed[prod.id] = nil, true
	}
}

// runFused reduces the output of the plan's source fusion, computed from the flat data in of the
// values reads, into out, split across the worker's team as run splits.
func (p *reducePlan) runFused(w *worker, reads []int, in []any, out []float32) error {
	io, err := p.src.bind(w, reads, in)
	defer w.unbind(&io)
	if err != nil {
		return err
	}
	return p.runJob(reduceJob{p: p, out: out, src: io, regs: w.regs}, w)
}

// rowsFused is rows (reduce.go) over the source fusion's output, computed into r's scratch block
// as needed.
func (p *reducePlan) rowsFused(out []float32, io fuseIO, r *fuseRegs, olo, ohi, ilo, ihi int) {
	if olo >= ohi || ilo >= ihi {
		return // an empty share of a split
	}
	scratch := r.scratchBlock()
	sum := p.op == backends.OpTypeReduceSum
	init := float32(0)
	if !sum {
		init = float32(math.Inf(-1)) // simplego's initial value (dtypes.Float32.LowestValue)
	}
	// computeAt computes the fusion's output elements [lo, hi) into scratch from element at on,
	// and returns them; compute is computeAt 0 (at most redScratch elements).
	computeAt := func(at, lo, hi int) []float32 {
		io.out, io.outOff = scratch[at:at+hi-lo], lo
		p.src.runRange(&io, r, lo, hi)
		return io.out
	}
	compute := func(lo, hi int) []float32 { return computeAt(0, lo, hi) }
	if p.inner == 1 {
		o := olo
		switch {
		case sum && 8*p.red <= redScratch:
			for ; o+8 <= ohi; o += 8 {
				sumRows8((*[8]float32)(out[o:o+8]), compute(o*p.red, (o+8)*p.red), p.red)
			}
		case sum:
			// Rows longer than an eighth of the scratch (the loss's 50257 logits): eight rows
			// at a time too, a block of each at a time, each row's sum continued from block to
			// block — eight running sums instead of one waiting on each addition.
			const w = redScratch / 8
			for ; o+8 <= ohi; o += 8 {
				var acc [8]float32
				for k := 0; k < p.red; k += w {
					n := min(w, p.red-k)
					for row := range 8 {
						start := (o+row)*p.red + k
						computeAt(row*w, start, start+n)
					}
					addRows8(&acc, scratch, n, w)
				}
				copy(out[o:o+8], acc[:])
			}
		}
		for ; o < ohi; o++ {
			acc := init
			for k := 0; k < p.red; k += redScratch {
				part := compute(o*p.red+k, o*p.red+min(k+redScratch, p.red))
				if sum {
					for _, v := range part {
						acc += v
					}
				} else {
					acc = maxRow(acc, part)
				}
			}
			out[o] = acc
		}
		return
	}
	for o := olo; o < ohi; o++ {
		base := o * p.red * p.inner
		for j0 := ilo; j0 < ihi; j0 += redScratch {
			j1 := min(j0+redScratch, ihi)
			dst := out[o*p.inner+j0 : o*p.inner+j1]
			fill(dst, init)
			for k := range p.red {
				src := compute(base+k*p.inner+j0, base+k*p.inner+j1)
				if sum {
					binaryF32(backends.OpTypeAdd, dst, dst, src) // each dst[j] += src[j], as one float32 addition
				} else {
					for j, v := range src {
						dst[j] = max(dst[j], v)
					}
				}
			}
		}
	}
}
