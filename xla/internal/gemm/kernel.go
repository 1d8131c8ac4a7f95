package gemm

import "fmt"

// Kernel names a micro-kernel implementation.
type Kernel int

const (
	// KernelAuto picks the fastest kernel the CPU supports.
	KernelAuto Kernel = iota
	// KernelGeneric is the portable pure-Go kernel; it runs everywhere.
	KernelGeneric
	// KernelAVX2 is the AVX2+FMA assembly kernel (6×16 register tile, ymm).
	KernelAVX2
	// KernelAVX512 is the AVX-512F assembly kernel (12×32 register tile, zmm).
	KernelAVX512
)

func (k Kernel) String() string {
	switch k {
	case KernelAuto:
		return "auto"
	case KernelGeneric:
		return "generic"
	case KernelAVX2:
		return "avx2"
	case KernelAVX512:
		return "avx512"
	}
	return fmt.Sprintf("Kernel(%d)", int(k))
}

// microKernel computes an mr×nr tile: C (= or +=) Apanel·Bpanel over k steps,
// with a holding k groups of mr floats and b k groups of nr floats (the packed
// layouts written by packA/packB), and C's rows ldc elements apart.
type microKernel func(k int, a, b, c []float32, ldc int, beta bool)

// kernelSpec is a micro-kernel with the blocking parameters tuned for it.
//
// The loops are (outer to inner): rows in blocks of mc, k in blocks of kc (pack
// an mc×kc block of A), columns in blocks of nc (pack a kc×nc block of B), then
// mr-row micro-panels of A, then nr-column micro-panels of B. So one packed A
// micro-panel (mr×kc) is reused from L1 across nc/nr kernel calls while B
// micro-panels stream from the L2-resident kc×nc block. See doc.go for the
// values and why.
type kernelSpec struct {
	kind       Kernel
	mr, nr     int
	kc, nc, mc int
	fn         microKernel
	supported  func() bool
}

// genericSpec is the pure-Go kernel. Its 4×8 tile keeps 32 accumulators live
// in locals; the Go compiler spills some, but the packed layout still makes every
// inner-loop access sequential.
var genericSpec = kernelSpec{
	kind: KernelGeneric, mr: 4, nr: 8, kc: 256, nc: 512, mc: 1020,
	fn: genericKernel, supported: func() bool { return true },
}

// Available lists the kernels this CPU and build can run, fastest first; the
// generic kernel is always last.
func Available() []Kernel {
	var out []Kernel
	for _, s := range asmKernels {
		if s.supported() {
			out = append(out, s.kind)
		}
	}
	return append(out, KernelGeneric)
}

// lookupKernel resolves k (KernelAuto → the first available) to its spec.
func lookupKernel(k Kernel) (kernelSpec, error) {
	if k == KernelGeneric {
		return genericSpec, nil
	}
	for _, s := range asmKernels {
		if !s.supported() {
			if k == s.kind {
				return kernelSpec{}, fmt.Errorf("gemm: kernel %v is not supported by this CPU", k)
			}
			continue
		}
		if k == KernelAuto || k == s.kind {
			return s, nil
		}
	}
	if k == KernelAuto {
		return genericSpec, nil
	}
	return kernelSpec{}, fmt.Errorf("gemm: kernel %v is not available in this build (GOARCH or purego tag)", k)
}

// genericKernel is the portable micro-kernel for the 4×8 tile.
func genericKernel(k int, a, b, c []float32, ldc int, beta bool) {
	var acc [4][8]float32
	a = a[:k*4]
	b = b[:k*8]
	for p := 0; p < k; p++ {
		ap := a[p*4 : p*4+4 : p*4+4]
		bp := b[p*8 : p*8+8 : p*8+8]
		for r := 0; r < 4; r++ {
			ar := ap[r]
			row := &acc[r]
			row[0] += ar * bp[0]
			row[1] += ar * bp[1]
			row[2] += ar * bp[2]
			row[3] += ar * bp[3]
			row[4] += ar * bp[4]
			row[5] += ar * bp[5]
			row[6] += ar * bp[6]
			row[7] += ar * bp[7]
		}
	}
	for r := 0; r < 4; r++ {
		cr := c[r*ldc : r*ldc+8 : r*ldc+8]
		if beta {
			for j := range cr {
				cr[j] += acc[r][j]
			}
		} else {
			copy(cr, acc[r][:])
		}
	}
}
