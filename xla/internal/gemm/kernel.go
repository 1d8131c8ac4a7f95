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
	// Like KernelAVX2 and KernelGeneric it runs bfloat16 inputs by widening
	// them to float32 while packing.
	KernelAVX512
	// KernelAVX512BF16 is KernelAVX512 for float32 inputs plus, for bfloat16
	// inputs, the AVX512-BF16 kernel (VDPBF16PS, 12×32 tile on bfloat16
	// panels paired along k), which does twice the multiply-adds per
	// instruction. Its numerics differ from the widening kernels only in
	// denormals (see the package documentation).
	KernelAVX512BF16
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
	case KernelAVX512BF16:
		return "avx512bf16"
	}
	return fmt.Sprintf("Kernel(%d)", int(k))
}

// engine is one way of running a product: a micro-kernel over packed panels
// whose elements are T, the packing that produces them, and the blocking tuned
// for both.
//
// The loops are (outer to inner): rows in blocks of mc, k in blocks of kc (pack
// an mc×kc block of A), columns in blocks of nc (pack a kc×nc block of B), then
// mr-row micro-panels of A, then nr-column micro-panels of B. So one packed A
// micro-panel (mr×kc) is reused from L1 across nc/nr kernel calls while B
// micro-panels stream from the L2-resident kc×nc block. See doc.go for the
// values and why.
//
// A packed step covers kPer values of k: 1 for float32 panels (T = float32,
// one value per element), 2 for bfloat16 panels (T = uint32, a pair of
// bfloat16 values along k per element).
type engine[T float32 | uint32] struct {
	mr, nr     int
	kc, nc, mc int
	kPer       int
	// fn computes an mr×nr tile: C (= or +=) Apanel·Bpanel over steps packed
	// steps, with a holding steps groups of mr elements and b steps groups of
	// nr elements (the layouts pack writes), and C's rows ldc elements apart.
	fn func(steps int, a, b []T, c []float32, ldc int, beta bool)
	// strided, where set, is fn reading A's element (r, p) of the tile at
	// a[r*asr + p*ask] and B's (p, x) at b[p*bsk + x] (strides in elements):
	// packed panels (asr = 1, ask = mr, bsk = nr) or the operands in place (the
	// driver's direct operands), with fn's results bit for bit.
	strided func(steps int, a []T, asr, ask int, b []T, bsk int, c []float32, ldc int, beta bool)
	// pack packs the nx×kb block at (x0, p0) of an operand into panels of w
	// (see pack.go for sx, sp).
	pack func(dst []T, o operand, x0, p0, nx, kb, w, sx, sp int)
}

// kernelSpec is what a Kernel resolves to: the float32 engine and, where the
// CPU has a native bfloat16 kernel, the engine for bfloat16 inputs.
type kernelSpec struct {
	kind Kernel
	f32  engine[float32]
	// bf16 runs bfloat16 inputs when bf16.fn is set; otherwise they are
	// widened to float32 while packing and run on f32.
	bf16      engine[uint32]
	supported func() bool
}

// tile returns the register tile that computes a call's product, which is
// also the unit the call is split into between workers.
func (s *kernelSpec) tile(bf16 bool) (mr, nr int) {
	if bf16 && s.bf16.fn != nil {
		return s.bf16.mr, s.bf16.nr
	}
	return s.f32.mr, s.f32.nr
}

// genericSpec is the pure-Go kernel. Its 4×8 tile keeps 32 accumulators live
// in locals; the Go compiler spills some, but the packed layout still makes every
// inner-loop access sequential.
var genericSpec = kernelSpec{
	kind:      KernelGeneric,
	f32:       engine[float32]{mr: 4, nr: 8, kc: 256, nc: 512, mc: 1020, kPer: 1, fn: genericKernel, pack: packOperand},
	supported: func() bool { return true },
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
