package gobackend

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestVecBlocksMatchLoops: a short-vector product on the vector kernels (runF32Blocks, as the
// team's parts run it) gives the bits of the element-at-a-time loops, for contractions and outer
// products, rows shorter and longer than vecBlock, and every vector length up to vecMax.
func TestVecBlocksMatchLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	scratch := make([]float32, redScratch)
	for _, outer := range []bool{false, true} {
		for _, k := range []int{1, 3, vecMax} {
			for _, q := range []int{16, 37, 768, 1100} {
				v := &vecPlan{outer: outer, p: 5, k: k, q: q}
				if outer {
					v.p = 5 * q // five rows of q
				}
				n := v.p * k * q // the lhs: [p, k, q] for a contraction, p values for an outer product
				if outer {
					n = v.p
				}
				a, r := make([]float32, n), make([]float32, k)
				for i := range a {
					a[i] = float32(rng.NormFloat64())
				}
				for i := range r {
					r[i] = float32(rng.NormFloat64())
				}
				size := v.rows() * q
				if outer {
					size = v.rows() * k * q
				}
				want, got := make([]float32, size), make([]float32, size)
				v.runF32(a, r, want, 0, v.rows(), nil)
				v.runF32(a, r, got, 1, v.rows(), scratch) // rows 1.. as a second part would
				v.runF32(a, r, got, 0, 1, scratch)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("outer %v k %d q %d: [%d] = %g, the loops give %g", outer, k, q, i, got[i], want[i])
					}
				}
			}
		}
	}
}
