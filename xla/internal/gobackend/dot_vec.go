package gobackend

import (
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
// (out [p, q]), or, if outer, lhs viewed as [p] times the vector (out [p, k]).
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
		return &vecPlan{outer: true, p: lhs.Size(), k: rhs.Dimensions[0]}
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
// product sums them in float32 and rounds the result once, to nearest even, as the GEMM does.
func (v *vecPlan) run(dt dtypes.DType, lhs, rhs, out any) {
	if dt == dtypes.BFloat16 {
		a, r, c := bf16Bits(lhs.([]bfloat16.BFloat16)), bf16Bits(rhs.([]bfloat16.BFloat16)), bf16Bits(out.([]bfloat16.BFloat16))
		var w [vecMax]float32
		for i, x := range r {
			w[i] = gemm.BF16ToFloat32(x)
		}
		if v.outer {
			for i, x := range a[:v.p] {
				xf := gemm.BF16ToFloat32(x)
				row := c[i*v.k : (i+1)*v.k]
				for j := range row {
					row[j] = gemm.Float32ToBF16(xf * w[j])
				}
			}
			return
		}
		for i := range v.p {
			src := a[i*v.k*v.q : (i+1)*v.k*v.q]
			dst := c[i*v.q : (i+1)*v.q]
			for x := range dst {
				acc := float32(0)
				if v.k > 0 {
					acc = gemm.BF16ToFloat32(src[x]) * w[0]
				}
				for j := 1; j < v.k; j++ {
					acc += gemm.BF16ToFloat32(src[j*v.q+x]) * w[j]
				}
				dst[x] = gemm.Float32ToBF16(acc)
			}
		}
		return
	}
	a, r, c := lhs.([]float32), rhs.([]float32), out.([]float32)
	if v.outer {
		for i, x := range a[:v.p] {
			row := c[i*v.k : (i+1)*v.k]
			for j := range row {
				row[j] = x * r[j]
			}
		}
		return
	}
	for i := range v.p {
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
