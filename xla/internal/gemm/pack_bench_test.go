package gemm

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkPackGather measures the strided (transposing) packing path alone:
// a 1020×256 block of a row-major A into 12-row panels.
func BenchmarkPackGather(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	ld := 8192
	src := randSlice(1024*ld, rng)
	dst := make([]float32, 1020*256)
	b.SetBytes(1020 * 256 * 4)
	for b.Loop() {
		packF32(dst, src, 0, 0, 1020, 256, 12, ld, 1)
	}
}

// BenchmarkPackCopy measures the contiguous packing path: a 256×512 block of a
// row-major B into 32-column panels.
func BenchmarkPackCopy(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	ld := 8192
	src := randSlice(256*ld, rng)
	dst := make([]float32, 512*256)
	b.SetBytes(512 * 256 * 4)
	for b.Loop() {
		packF32(dst, src, 0, 0, 512, 256, 32, 1, ld)
	}
}
