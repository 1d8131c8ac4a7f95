//go:build !amd64 || purego

package gemm

// asmKernels is empty where no assembly kernel is compiled in (other
// architectures, or the purego build tag); only the generic kernel is available.
var asmKernels []kernelSpec

// prefetchBlock is a no-op without assembly.
func prefetchBlock(s []float32, off, rows, stride, span int) {}
