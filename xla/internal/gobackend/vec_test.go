package gobackend

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
)

// TestBinaryF32Vec: the vector kernels (AVX2 where the CPU has it) give bitwise the portable
// loops' results on awkward lengths (not multiples of the vector width or the 32-lane unroll),
// with NaN, infinities, signed zeros and subnormals among the operands, and in place (dst is a).
func TestBinaryF32Vec(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		math.SmallestNonzeroFloat32, 1e-40, math.MaxFloat32}
	value := func() float32 {
		if rng.IntN(8) == 0 {
			return special[rng.IntN(len(special))]
		}
		return (rng.Float32()*2 - 1) * float32(math.Pow(10, float64(rng.IntN(7)-3)))
	}
	portable := map[backends.OpType]func(x, y float32) float32{
		backends.OpTypeAdd: func(x, y float32) float32 { return x + y },
		backends.OpTypeSub: func(x, y float32) float32 { return x - y },
		backends.OpTypeMul: func(x, y float32) float32 { return x * y },
		backends.OpTypeDiv: func(x, y float32) float32 { return x / y },
		backends.OpTypeMax: func(x, y float32) float32 { return max(x, y) },
		backends.OpTypeMin: func(x, y float32) float32 { return min(x, y) },
	}
	t.Logf("AVX2 kernels in use: %v", vecEnabled())
	for op, f := range portable {
		for _, n := range []int{1, 7, 8, 9, 31, 32, 33, 129, 512, 1000} {
			a, b := make([]float32, n), make([]float32, n)
			for i := range a {
				a[i], b[i] = value(), value()
			}
			want := make([]float32, n)
			for i := range want {
				want[i] = f(a[i], b[i])
			}
			got := make([]float32, n)
			binaryF32(op, got, a, b)
			binaryF32(op, a, a, b) // in place
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(isNaN32(got[i]) && isNaN32(want[i])) {
					t.Fatalf("%s n=%d [%d]: %g op %g = %g, want %g", op, n, i, a[i], b[i], got[i], want[i])
				}
				if math.Float32bits(a[i]) != math.Float32bits(got[i]) && !(isNaN32(a[i]) && isNaN32(got[i])) {
					t.Fatalf("%s n=%d [%d]: in place %g, out of place %g", op, n, i, a[i], got[i])
				}
			}
		}
	}
}

func isNaN32(x float32) bool { return x != x }
