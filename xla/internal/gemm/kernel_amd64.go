//go:build amd64 && !purego

package gemm

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// Assembly micro-kernels (kernel_amd64.s). a and b point at packed micro-panels
// of k steps, c at the top-left element of an mr×nr tile with row stride ldc
// (elements); beta != 0 accumulates into C instead of overwriting it.
//
//go:noescape
func kernelAVX512(k int, a, b, c *float32, ldc int, beta int)

// kernelAVX512Strided (kernel_strided_amd64.s) is kernelAVX512 reading A and B
// through element strides instead of from packed panels (see the driver's
// direct operands).
//
//go:noescape
func kernelAVX512Strided(k int, a *float32, asr, ask int, b *float32, bsk int, c *float32, ldc int, beta int)

// prefetchRows (kernel_strided_amd64.s) prefetches lines cache lines of each of
// rows rows stride bytes apart, starting off bytes after p (an offset rather
// than a pointer, so that no Go pointer is formed past the slice).
//
//go:noescape
func prefetchRows(p *float32, off, rows, stride, lines int)

// prefetchBlock prefetches rows rows of span elements, stride elements apart,
// starting at element off of s (see tiler.prefetch). Prefetches do not fault,
// but the callers keep the range inside s anyway.
func prefetchBlock(s []float32, off, rows, stride, span int) {
	if len(s) == 0 || rows <= 0 || span <= 0 {
		return
	}
	b := 4 * off
	lines := (b%64 + 4*span + 63) / 64
	if (4*stride)%64 != 0 {
		lines++ // later rows start elsewhere in their line
	}
	prefetchRows(unsafe.SliceData(s), b, rows, 4*stride, lines)
}

//go:noescape
func kernelAVX2(k int, a, b, c *float32, ldc int, beta int)

// kernelAVX512BF16 (kernel_bf16_amd64.s) is the VDPBF16PS kernel: a and b
// point at pair-interleaved bfloat16 panels (packPairs) of kp k-pairs.
//
//go:noescape
func kernelAVX512BF16(kp int, a, b *uint32, c *float32, ldc int, beta int)

// FMA throughput loops (peak_amd64.s), used by the benchmarks to measure the
// machine's peak in the same run as the GEMM numbers.
func fmaPeakAVX512(n int)
func fmaPeakAVX2(n int)

// dpbf16PeakAVX512 (kernel_bf16_amd64.s) is the VDPBF16PS throughput loop,
// for the benchmarks' BF16 peak.
func dpbf16PeakAVX512(n int)

// hasAVX512 reports whether the AVX-512 kernel may run: it needs AVX512F, and the
// OS must save the zmm state (x/sys/cpu folds the XGETBV check into X86.HasAVX512F).
func hasAVX512() bool { return cpu.X86.HasAVX512F }

// hasAVX512BF16 reports whether the AVX512-BF16 kernel may run: VDPBF16PS on
// zmm needs AVX512F (which carries the OS zmm-state check) and AVX512_BF16,
// and its packing (packPairsAVX512) AVX512BW, which every CPU with
// AVX512_BF16 has.
func hasAVX512BF16() bool { return hasAVX512BW() && cpu.X86.HasAVX512BF16 }

// hasAVX512BW reports whether the AVX-512 packing kernels may run: they use
// 16-bit-element AVX-512 instructions (VPMOVZXWD zmm, VMOVDQU16, KMOVD).
func hasAVX512BW() bool { return cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW }

// hasAVX2 reports whether the AVX2+FMA kernel may run (OS ymm support included).
func hasAVX2() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }

// callAVX512 and callAVX2 adapt the assembly kernels to the microKernel
// signature. The slice-length checks turn a driver bug into a Go panic instead
// of an out-of-bounds write from assembly.
func callAVX512(k int, a, b, c []float32, ldc int, beta bool) {
	_ = a[k*12-1]
	_ = b[k*32-1]
	_ = c[11*ldc+31]
	kernelAVX512(k, unsafe.SliceData(a), unsafe.SliceData(b), unsafe.SliceData(c), ldc, b2i(beta))
}

// callAVX512Strided checks, like callAVX512, that the last element each operand's
// strides reach lies inside its slice.
func callAVX512Strided(k int, a []float32, asr, ask int, b []float32, bsk int, c []float32, ldc int, beta bool) {
	if k > 0 {
		_ = a[11*asr+(k-1)*ask]
		_ = b[(k-1)*bsk+31]
	}
	_ = c[11*ldc+31]
	kernelAVX512Strided(k, unsafe.SliceData(a), asr, ask, unsafe.SliceData(b), bsk, unsafe.SliceData(c), ldc, b2i(beta))
}

func callAVX2(k int, a, b, c []float32, ldc int, beta bool) {
	_ = a[k*6-1]
	_ = b[k*16-1]
	_ = c[5*ldc+15]
	kernelAVX2(k, unsafe.SliceData(a), unsafe.SliceData(b), unsafe.SliceData(c), ldc, b2i(beta))
}

func callAVX512BF16(kp int, a, b []uint32, c []float32, ldc int, beta bool) {
	_ = a[kp*12-1]
	_ = b[kp*32-1]
	_ = c[11*ldc+31]
	kernelAVX512BF16(kp, unsafe.SliceData(a), unsafe.SliceData(b), unsafe.SliceData(c), ldc, b2i(beta))
}

// packOperandPairs packs a block of o, which is bfloat16 storage (the bf16
// engine only runs bfloat16 inputs), into the pair-interleaved panels of
// kernelAVX512BF16.
func packOperandPairs(dst []uint32, o operand, x0, p0, nx, kb, w, sx, sp int) {
	packPairsAVX512(dst, o.bf16, x0, p0, nx, kb, w, sx, sp)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// avx512F32 and avx2F32 are the float32 engines of the assembly kernels.
var (
	avx512F32 = engine[float32]{mr: 12, nr: 32, kc: 256, nc: 512, mc: 1020, kPer: 1, fn: callAVX512, strided: callAVX512Strided, pack: packOperand}
	avx2F32   = engine[float32]{mr: 6, nr: 16, kc: 256, nc: 512, mc: 1020, kPer: 1, fn: callAVX2, pack: packOperand}
)

// avx512BF16 is the bfloat16 engine of KernelAVX512BF16. Its kc is the
// float32 engines' 256 values (128 pairs): each kc block is summed from zero
// and then added to C, so the same block boundaries are what makes both
// bfloat16 paths give the same bits (TestBF16PathsBitwise). kc = 512, whose
// byte footprints equal the float32 engine's, measured within a few percent.
var avx512BF16 = engine[uint32]{mr: 12, nr: 32, kc: 256, nc: 512, mc: 1020, kPer: 2, fn: callAVX512BF16, pack: packOperandPairs}

// asmKernels lists the assembly kernels compiled into this build, fastest
// first (KernelAuto takes the first supported one).
var asmKernels = []kernelSpec{
	{kind: KernelAVX512BF16, f32: avx512F32, bf16: avx512BF16, supported: hasAVX512BF16},
	{kind: KernelAVX512, f32: avx512F32, supported: hasAVX512},
	{kind: KernelAVX2, f32: avx2F32, supported: hasAVX2},
}
