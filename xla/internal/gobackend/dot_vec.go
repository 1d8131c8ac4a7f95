package gobackend

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/gotpu/gotpu/xla/internal/gemm"
)

// Products with a short vector. A DotGeneral whose rhs is a vector of a few elements and which
// has no batch axes is a product the GEMM's 12×32 register tile would mostly waste: contracted
// with the vector it is a GEMM with N = 1 (and, when the contracting axis is not the lhs's last,
// a transposed copy of the lhs first), and as an outer product it has K = 1 and N a few. models'
// core.Select writes exactly these — it takes index i of an axis as a contraction with a one-hot
// vector (GoMLX differentiates Slice with Pad, which simplego lacks), and its gradient is the
// outer product with the same vector — and GPT-2 splits every layer's fused q, k, v projection
// with it: 36 contractions and 36 outer products per training step, 11% of the 124M step on the
// GEMM. Here they are one pass over the lhs each, with no copy.

// vecMax is the longest vector taken here rather than by the GEMM.
const vecMax = 8

// vecPlan is a product with a short vector: lhs viewed as [p, k, q] contracted with the vector
// (out [p, q]), or, if outer, lhs viewed as [p/q, q] times the vector, out [p/q, k, q]: q is 1
// (the vector's axis last, as DotGeneral puts it) unless a transpose moved that axis in front of
// the lhs's trailing axes of size q (fold.go).
type vecPlan struct {
	outer   bool
	p, k, q int
}

// planVec returns the vector plan of a product, or nil if it is not one.
func planVec(lhs, rhs shapes.Shape, ax dotAxes) *vecPlan {
	if rhs.Rank() != 1 || len(ax.lhsBatch) != 0 || rhs.Dimensions[0] > vecMax {
		return nil
	}
	switch len(ax.lhsContracting) {
	case 0:
		return &vecPlan{outer: true, p: lhs.Size(), k: rhs.Dimensions[0], q: 1}
	case 1:
		c := ax.lhsContracting[0]
		v := &vecPlan{p: 1, k: lhs.Dimensions[c], q: 1}
		for _, d := range lhs.Dimensions[:c] {
			v.p *= d
		}
		for _, d := range lhs.Dimensions[c+1:] {
			v.q *= d
		}
		return v
	}
	return nil
}

// run computes the product of the flat data: float32 sums the k products in order, a bfloat16
// product sums them in float32 (in scratch, a row at a time) and rounds each result once, to
// nearest even, as the GEMM does.
func (v *vecPlan) run(dt dtypes.DType, lhs, rhs, out any, scratch *[]float32) {
	if dt == dtypes.BFloat16 {
		a, r, c := bf16Bits(lhs.([]bfloat16.BFloat16)), bf16Bits(rhs.([]bfloat16.BFloat16)), bf16Bits(out.([]bfloat16.BFloat16))
		var w [vecMax]float32
		for i, x := range r {
			w[i] = gemm.BF16ToFloat32(x)
		}
		if v.outer {
			// Whole lhs rows of q at a time, about 4096 results per rounding pass.
			rows := max(1, 4096/max(1, v.k*v.q))
			*scratch = grow(*scratch, rows*v.k*v.q)
			for r0 := 0; r0 < v.p/v.q; r0 += rows {
				n := min(rows, v.p/v.q-r0)
				acc := (*scratch)[:n*v.k*v.q]
				for i := range n {
					src := a[(r0+i)*v.q : (r0+i+1)*v.q]
					for j := range v.k {
						dst := acc[(i*v.k+j)*v.q : (i*v.k+j+1)*v.q]
						for x, s := range src {
							dst[x] = gemm.BF16ToFloat32(s) * w[j]
						}
					}
				}
				gemm.RoundBF16(c[r0*v.k*v.q:], acc)
			}
			return
		}
		*scratch = grow(*scratch, v.q)
		acc := *scratch
		for i := range v.p {
			src := a[i*v.k*v.q : (i+1)*v.k*v.q]
			if v.k == 0 {
				clear(acc)
			}
			for j := range v.k {
				wj := w[j]
				for x, s := range src[j*v.q : (j+1)*v.q] {
					if j == 0 {
						acc[x] = gemm.BF16ToFloat32(s) * wj
					} else {
						acc[x] += gemm.BF16ToFloat32(s) * wj
					}
				}
			}
			gemm.RoundBF16(c[i*v.q:], acc)
		}
		return
	}
	a, r, c := lhs.([]float32), rhs.([]float32), out.([]float32)
	v.runF32(a, r, c, 0, v.rows(), nil)
}

// rows is the number of independent rows of a float32 product (runF32's unit of work): lhs rows
// of q values for an outer product, output rows of q values for a contraction.
func (v *vecPlan) rows() int {
	if v.outer {
		return v.p / v.q
	}
	return v.p
}

// vecBlock is the run of a row runF32 multiplies with the vector kernels at a time: scratch
// holds the k vector elements repeated vecBlock times and a product of vecBlock.
const vecBlock = 512

// runF32 computes rows [lo, hi) of a float32 product. With a scratch of (k+1)·vecBlock floats
// and rows of at least 16 it multiplies and adds with the vector kernels (binaryF32): each result
// is still Σ_j src_j·r_j, every product rounded and then added in order of j, as the loops below.
func (v *vecPlan) runF32(a, r, c []float32, lo, hi int, scratch []float32) {
	if len(scratch) >= (v.k+1)*vecBlock && v.q >= 16 && v.k > 0 {
		v.runF32Blocks(a, r, c, lo, hi, scratch)
		return
	}
	if v.outer {
		for i := lo; i < hi; i++ {
			src := a[i*v.q : (i+1)*v.q]
			for j, rj := range r[:v.k] {
				dst := c[(i*v.k+j)*v.q : (i*v.k+j+1)*v.q]
				for x, s := range src {
					dst[x] = s * rj
				}
			}
		}
		return
	}
	for i := lo; i < hi; i++ {
		src := a[i*v.k*v.q : (i+1)*v.k*v.q]
		dst := c[i*v.q : (i+1)*v.q]
		if v.k == 0 {
			clear(dst)
			continue
		}
		// k passes over the row, each contiguous: dst = Σ_j src_j·r_j in order of j.
		r0 := r[0]
		for x, s := range src[:v.q] {
			dst[x] = s * r0
		}
		for j := 1; j < v.k; j++ {
			rj := r[j]
			for x, s := range src[j*v.q : (j+1)*v.q] {
				dst[x] = dst[x] + s*rj
			}
		}
	}
}

// runF32Blocks is runF32 on the vector kernels, vecBlock values of a row at a time.
func (v *vecPlan) runF32Blocks(a, r, c []float32, lo, hi int, scratch []float32) {
	rep, tmp := scratch[:v.k*vecBlock], scratch[v.k*vecBlock:(v.k+1)*vecBlock]
	for j, rj := range r[:v.k] {
		fill(rep[j*vecBlock:(j+1)*vecBlock], rj)
	}
	for i := lo; i < hi; i++ {
		for x := 0; x < v.q; x += vecBlock {
			e := min(x+vecBlock, v.q)
			if v.outer {
				src := a[i*v.q+x : i*v.q+e]
				for j := range v.k {
					base := (i*v.k + j) * v.q
					binaryF32(backends.OpTypeMul, c[base+x:base+e], src, rep[j*vecBlock:j*vecBlock+e-x])
				}
				continue
			}
			src, dst := a[i*v.k*v.q:(i+1)*v.k*v.q], c[i*v.q+x:i*v.q+e]
			binaryF32(backends.OpTypeMul, dst, src[x:e], rep[:e-x])
			for j := 1; j < v.k; j++ {
				binaryF32(backends.OpTypeMul, tmp[:e-x], src[j*v.q+x:j*v.q+e], rep[j*vecBlock:j*vecBlock+e-x])
				binaryF32(backends.OpTypeAdd, dst, dst, tmp[:e-x])
			}
		}
	}
}

// vecJob is a float32 short-vector product split by rows over a worker's team; every row is
// computed as a serial run computes it. Part p works in regs[p]'s scratch.
type vecJob struct {
	v       *vecPlan
	a, r, c []float32
	regs    []fuseRegs
	per     int // rows per part
}

func (j *vecJob) part(p int) {
	n := j.v.rows()
	j.v.runF32(j.a, j.r, j.c, min(p*j.per, n), min((p+1)*j.per, n), j.regs[p].scratchBlock())
}

// runVec computes a float32 short-vector product on the worker, split across its team when the
// output is large enough; it reports false for other dtypes (run then computes them serially).
func (w *worker) runVec(v *vecPlan, lhs, rhs, out any) (bool, error) {
	c, ok := out.([]float32)
	if !ok {
		return false, nil
	}
	parts := len(w.regs)
	if len(c) < minParallel || parts <= 1 {
		return false, nil
	}
	w.vecJob = vecJob{v: v, a: lhs.([]float32), r: rhs.([]float32), c: c, regs: w.regs, per: (v.rows() + parts - 1) / parts}
	err := w.team.run(parts, &w.vecJob)
	w.vecJob = vecJob{}
	return true, err
}
