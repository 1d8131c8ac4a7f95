//go:build amd64 && !purego

package gobackend

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
)

// forEachVecWidth runs fn with the AVX-512 binary kernels, where the CPU has them, and with the
// AVX2 ones.
func forEachVecWidth(t *testing.T, fn func(t *testing.T)) {
	saved := vecAVX512
	defer func() { vecAVX512 = saved }()
	for _, on := range []bool{true, false} {
		if on && !saved {
			continue
		}
		vecAVX512 = on
		name := "avx2"
		if on {
			name = "avx512"
		}
		t.Run(name, fn)
	}
}

// TestExpTanhWidthsBitwise: the AVX-512 exp and tanh give bitwise the AVX2 kernels' results (so
// a run does not depend on which of them the CPU has), over their whole range, the overflow and
// underflow ends, the polynomial/exp switch of tanh, and the special values, on every length
// around the vector widths.
func TestExpTanhWidthsBitwise(t *testing.T) {
	if !vecAVX512 || !vecFMA {
		t.Skip("no AVX-512 kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(17, 18))
	var xs []float32
	for range 100000 {
		xs = append(xs, rng.Float32()*220-115)
	}
	for range 20000 {
		xs = append(xs, (rng.Float32()*2-1)*0.7)
	}
	xs = append(xs, float32(math.NaN()), math.Float32frombits(0xffc00001), float32(math.Inf(1)), float32(math.Inf(-1)), 0,
		float32(math.Copysign(0, -1)), 0.625, -0.625, 0.62499994, 88.72284, -103.97208, 1e-30, -1e-40)
	defer func() { vecAVX512 = true }()
	for _, op := range []backends.OpType{backends.OpTypeExp, backends.OpTypeTanh} {
		for _, n := range []int{len(xs), 1, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 47, 48, 49} {
			in := xs[len(xs)-n:]
			wide, narrow := make([]float32, n), make([]float32, n)
			vecAVX512 = true
			unaryF32(op, wide, in)
			vecAVX512 = false
			unaryF32(op, narrow, in)
			for i := range wide {
				if math.Float32bits(wide[i]) != math.Float32bits(narrow[i]) {
					t.Fatalf("%s n=%d: (%g) = %g (%#x) with AVX-512, %g (%#x) with AVX2", op, n, in[i], wide[i], math.Float32bits(wide[i]), narrow[i], math.Float32bits(narrow[i]))
				}
			}
		}
	}
}
