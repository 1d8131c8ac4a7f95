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

//go:noescape
func kernelAVX2(k int, a, b, c *float32, ldc int, beta int)

// FMA throughput loops (peak_amd64.s), used by the benchmarks to measure the
// machine's peak in the same run as the GEMM numbers.
func fmaPeakAVX512(n int)
func fmaPeakAVX2(n int)

// hasAVX512 reports whether the AVX-512 kernel may run: it needs AVX512F, and the
// OS must save the zmm state (x/sys/cpu folds the XGETBV check into X86.HasAVX512F).
func hasAVX512() bool { return cpu.X86.HasAVX512F }

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

func callAVX2(k int, a, b, c []float32, ldc int, beta bool) {
	_ = a[k*6-1]
	_ = b[k*16-1]
	_ = c[5*ldc+15]
	kernelAVX2(k, unsafe.SliceData(a), unsafe.SliceData(b), unsafe.SliceData(c), ldc, b2i(beta))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// asmKernels lists the assembly kernels compiled into this build.
var asmKernels = []kernelSpec{
	{kind: KernelAVX512, mr: 12, nr: 32, kc: 256, nc: 512, mc: 1020, fn: callAVX512, supported: hasAVX512},
	{kind: KernelAVX2, mr: 6, nr: 16, kc: 256, nc: 512, mc: 1020, fn: callAVX2, supported: hasAVX2},
}
