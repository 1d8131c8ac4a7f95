//go:build amd64 && !purego

package gemm

import (
	"math"
	"math/rand/v2"
	"testing"
)

func init() {
	if hasAVX512BW() {
		packBF16Pairs = packPairsAVX512
	}
}

// TestPackPairsAVX512 checks the vector pair packer against the portable one
// (itself checked element by element by TestPackPairsLayout) on both
// layouts, panel widths around the 16-lane chunks, kb around the 32-value
// transpose chunks (odd ones included), odd offsets and edge panels. The
// destination starts as garbage, so a dword left unwritten is caught too.
func TestPackPairsAVX512(t *testing.T) {
	if !hasAVX512BW() {
		t.Skip("CPU lacks AVX512BW: the vector pair packer is not used")
	}
	rng := rand.New(rand.NewPCG(16, 17))
	for _, w := range []int{1, 5, 12, 16, 17, 32} {
		for _, kb := range []int{1, 2, 3, 31, 32, 33, 63, 64, 65, 97, 256} {
			for _, nx := range []int{1, w - 1, w, w + 1, 2 * w, 7*w + 3, 13 * w} {
				if nx < 1 {
					continue
				}
				for _, trans := range []bool{false, true} {
					ld := nx + kb + 5
					src := make([]uint16, (nx+kb+4)*ld)
					for i := range src {
						src[i] = uint16(rng.Uint32())
					}
					x0, p0 := 3, 1
					sx, sp := 1, ld
					if trans {
						sx, sp = ld, 1
					}
					size := ceilDiv(nx, w) * w * ((kb + 1) / 2)
					got, want := make([]uint32, size+1), make([]uint32, size+1)
					for i := range got {
						got[i], want[i] = 0xdeadbeef, 0xdeadbeef
					}
					packPairsAVX512(got, src, x0, p0, nx, kb, w, sx, sp)
					packPairs(want, src, x0, p0, nx, kb, w, sx, sp)
					for i := range got {
						if got[i] != want[i] {
							t.Fatalf("w=%d kb=%d nx=%d trans=%v: dword %d = %#x, want %#x", w, kb, nx, trans, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// dpbf16Model is VDPBF16PS on one lane as the Intel SDM specifies it (and
// this package measured on AMD Zen 4): acc += a.hi·b.hi, then += a.lo·b.lo,
// each a float32 addition rounded to nearest even of an exact bfloat16
// product, with denormal inputs (the bfloat16 values and the incoming
// accumulator) read as zero and denormal results flushed to zero.
func dpbf16Model(acc float32, a, b uint32) float32 {
	daz := func(f float32) float32 {
		if f != 0 && math.Abs(float64(f)) < 0x1p-126 {
			return float32(math.Copysign(0, float64(f)))
		}
		return f
	}
	half := func(v uint32) float32 { return daz(BF16ToFloat32(uint16(v))) }
	acc = daz(acc)
	acc = daz(acc + half(a>>16)*half(b>>16))
	return daz(acc + half(a)*half(b))
}

// TestKernelAVX512BF16 checks the assembly kernel bit for bit against
// dpbf16Model: every accumulator and register the hand-encoded VDPBF16PS
// instructions name, odd and even pair counts (the unrolled loop and its
// tail), overwrite and accumulate, a C stride wider than the tile, and inputs
// mixing normal values with zeros, denormals and infinities.
func TestKernelAVX512BF16(t *testing.T) {
	if !hasAVX512BF16() {
		t.Skip("CPU lacks AVX512-BF16")
	}
	rng := rand.New(rand.NewPCG(18, 19))
	value := func(special bool) uint16 {
		if special {
			switch rng.IntN(8) {
			case 0:
				return 0
			case 1:
				return uint16(rng.IntN(0x7f)) + 1 // denormal
			case 2:
				return 0x7f80 // +Inf
			}
		}
		return Float32ToBF16(float32(rng.NormFloat64()))
	}
	const mr, nr, ldc = 12, 32, 37
	for _, kp := range []int{1, 2, 3, 8, 129} {
		for _, beta := range []bool{false, true} {
			for _, special := range []bool{false, true} {
				a, b := make([]uint32, mr*kp), make([]uint32, nr*kp)
				for i := range a {
					a[i] = uint32(value(special && rng.IntN(16) == 0)) | uint32(value(special && rng.IntN(16) == 0))<<16
				}
				for i := range b {
					b[i] = uint32(value(special && rng.IntN(16) == 0)) | uint32(value(special && rng.IntN(16) == 0))<<16
				}
				c := make([]float32, (mr-1)*ldc+nr+1)
				for i := range c {
					c[i] = float32(rng.NormFloat64())
				}
				old := append([]float32(nil), c...)
				callAVX512BF16(kp, a, b, c, ldc, beta)
				for i := range mr {
					for j := range nr {
						var acc float32
						for q := range kp {
							acc = dpbf16Model(acc, a[q*mr+i], b[q*nr+j])
						}
						want := acc
						if beta {
							want = old[i*ldc+j] + acc
						}
						got := c[i*ldc+j]
						if got != want && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
							t.Fatalf("kp=%d beta=%v special=%v: C[%d,%d] = %v (%#x), want %v (%#x)",
								kp, beta, special, i, j, got, math.Float32bits(got), want, math.Float32bits(want))
						}
					}
					for j := nr; j < ldc && i*ldc+j < len(c); j++ {
						if c[i*ldc+j] != old[i*ldc+j] {
							t.Fatalf("kp=%d: C[%d,%d] outside the tile was written", kp, i, j)
						}
					}
				}
			}
		}
	}
}

// BenchmarkMicroKernel measures the AVX-512 micro-kernels alone on
// L1/L2-resident panels (one 12-row A micro-panel against 16 B micro-panels,
// 512 k values, accumulating into a 12×512 C block): the VDPBF16PS kernel
// against the float32 FMA kernel, one thread. It isolates the kernels' rate
// from packing and memory traffic.
func BenchmarkMicroKernel(b *testing.B) {
	const k, panels = 512, 16
	c := make([]float32, 12*32*panels)
	flop := float64(2 * 12 * 32 * k * panels)
	b.Run("bf16", func(b *testing.B) {
		if !hasAVX512BF16() {
			b.Skip("CPU lacks AVX512-BF16")
		}
		a, bp := make([]uint32, 12*k/2), make([]uint32, 32*k/2*panels)
		for b.Loop() {
			for t := range panels {
				callAVX512BF16(k/2, a, bp[t*32*k/2:], c[t*32:], 32*panels, true)
			}
		}
		b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
	b.Run("float32", func(b *testing.B) {
		if !hasAVX512() {
			b.Skip("CPU lacks AVX-512")
		}
		a, bp := make([]float32, 12*k), make([]float32, 32*k*panels)
		for b.Loop() {
			for t := range panels {
				callAVX512(k, a, bp[t*32*k:], c[t*32:], 32*panels, true)
			}
		}
		b.ReportMetric(flop*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}
