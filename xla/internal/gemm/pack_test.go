package gemm

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPackF32Layout checks packF32, with whatever vector code this build and
// CPU use (the AVX-512 16×16 transposes for k-contiguous operands), against
// the panel layout spelled out element by element: value (x, p) of panel t
// is src[(x0+t*w+x)*sx + (p0+p)*sp] at t*w*kb + p*w + x, zero past nx; every
// panel width the kernels use, and lengths around the 16-step chunks.
func TestPackF32Layout(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 15))
	for _, w := range []int{4, 6, 8, 12, 16, 32} {
		for _, kb := range []int{1, 15, 16, 17, 31, 32, 33, 64, 100, 256} {
			for _, nx := range []int{1, w - 1, w, w + 1, 3*w + 5, 11 * w} {
				if nx < 1 {
					continue
				}
				for _, trans := range []bool{false, true} {
					ld := nx + kb + 3
					src := make([]float32, (nx+kb+2)*ld)
					for i := range src {
						src[i] = float32(rng.NormFloat64())
					}
					x0, p0 := 1, 2
					sx, sp := 1, ld // x contiguous
					if trans {
						sx, sp = ld, 1 // k contiguous: the transposing path
					}
					panels := ceilDiv(nx, w)
					got := make([]float32, panels*w*kb+1)
					for i := range got {
						got[i] = -7
					}
					packF32(got, src, x0, p0, nx, kb, w, sx, sp)
					for tp := range panels {
						for p := range kb {
							for x := range w {
								want := float32(0)
								if xx := tp*w + x; xx < nx {
									want = src[(x0+xx)*sx+(p0+p)*sp]
								}
								if g := got[tp*w*kb+p*w+x]; math.Float32bits(g) != math.Float32bits(want) {
									t.Fatalf("w=%d kb=%d nx=%d trans=%v: panel %d step %d x %d = %v, want %v", w, kb, nx, trans, tp, p, x, g, want)
								}
							}
						}
					}
					if got[len(got)-1] != -7 {
						t.Fatalf("w=%d kb=%d nx=%d trans=%v: wrote past the panels", w, kb, nx, trans)
					}
				}
			}
		}
	}
}
