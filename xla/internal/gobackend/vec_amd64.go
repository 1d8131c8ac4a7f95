//go:build amd64 && !purego

package gobackend

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// vecAVX2 selects the AVX2 elementwise kernels (vec_amd64.s, vec_bf16_amd64.s); it is read once
// from the CPU's features and never changes.
var vecAVX2 = cpu.X86.HasAVX2

// vecAVX512 selects the AVX-512 forms of the binary kernels (vec512_amd64.s); read once from the
// CPU's features (tests switch it off to run the AVX2 ones).
var vecAVX512 = cpu.X86.HasAVX512F

//go:noescape
func addF32AVX512(dst, a, b *float32, n int)

//go:noescape
func subF32AVX512(dst, a, b *float32, n int)

//go:noescape
func mulF32AVX512(dst, a, b *float32, n int)

//go:noescape
func divF32AVX512(dst, a, b *float32, n int)

//go:noescape
func addF32AVX2(dst, a, b *float32, n int)

//go:noescape
func subF32AVX2(dst, a, b *float32, n int)

//go:noescape
func mulF32AVX2(dst, a, b *float32, n int)

//go:noescape
func divF32AVX2(dst, a, b *float32, n int)

// binaryF32Vec computes dst = a op b with the AVX2 kernels and reports whether it could (the
// operation has one and the CPU has AVX2). Max and Min stay in Go: VMAXPS does not propagate
// NaN as Go's max does.
func binaryF32Vec(op opKind, dst, a, b []float32) bool {
	n := len(dst)
	if !vecAVX2 || n == 0 || len(a) < n || len(b) < n {
		return false
	}
	if vecAVX512 {
		switch op {
		case vecAdd:
			addF32AVX512(&dst[0], &a[0], &b[0], n)
		case vecSub:
			subF32AVX512(&dst[0], &a[0], &b[0], n)
		case vecMul:
			mulF32AVX512(&dst[0], &a[0], &b[0], n)
		case vecDiv:
			divF32AVX512(&dst[0], &a[0], &b[0], n)
		default:
			return false
		}
		return true
	}
	switch op {
	case vecAdd:
		addF32AVX2(&dst[0], &a[0], &b[0], n)
	case vecSub:
		subF32AVX2(&dst[0], &a[0], &b[0], n)
	case vecMul:
		mulF32AVX2(&dst[0], &a[0], &b[0], n)
	case vecDiv:
		divF32AVX2(&dst[0], &a[0], &b[0], n)
	default:
		return false
	}
	return true
}

// vecEnabled reports whether the vector kernels run (tests log it).
func vecEnabled() bool { return vecAVX2 }

// vecFMA selects the AVX2+FMA exp kernel (vec_exp_amd64.s).
var vecFMA = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func expF32AVX2(dst, src *float32, n int)

// expF32Vec computes dst = exp(a) with the vector kernel and reports whether it could.
func expF32Vec(dst, a []float32) bool {
	return padded(kernelExp, dst, a)
}

//go:noescape
func tanhF32AVX2(dst, src *float32, n int)

// tanhF32Vec computes dst = tanh(a) with the vector kernel and reports whether it could; a short
// tail goes through the same kernel, padded.
func tanhF32Vec(dst, a []float32) bool {
	return padded(kernelTanh, dst, a)
}

// unaryKernel names an 8-lane unary kernel (called directly, not as a func value, so that
// its pointer arguments do not escape: no garbage per operation).
type unaryKernel uint8

const (
	kernelExp unaryKernel = iota
	kernelTanh
)

func (k unaryKernel) call(dst, src *float32, n int) {
	if vecAVX512 {
		// The 16-lane forms over the multiple of 16 (the same function per lane), then the
		// AVX2 ones over the last 8 if any.
		m := n &^ 15
		if m > 0 {
			switch k {
			case kernelExp:
				expF32AVX512(dst, src, m)
			case kernelTanh:
				tanhF32AVX512(dst, src, m)
			}
		}
		if m == n {
			return
		}
		dst, src, n = (*float32)(unsafe.Add(unsafe.Pointer(dst), 4*m)), (*float32)(unsafe.Add(unsafe.Pointer(src), 4*m)), n-m
	}
	switch k {
	case kernelExp:
		expF32AVX2(dst, src, n)
	case kernelTanh:
		tanhF32AVX2(dst, src, n)
	}
}

//go:noescape
func expF32AVX512(dst, src *float32, n int)

//go:noescape
func tanhF32AVX512(dst, src *float32, n int)

// padded runs an 8-lane kernel over dst = f(a): the multiple of 8 in place, the tail through a
// padded copy, so every element gets the same function whatever its position.
func padded(k unaryKernel, dst, a []float32) bool {
	n := len(dst)
	if !vecFMA || n == 0 || len(a) < n {
		return false
	}
	m := n &^ 7
	if m > 0 {
		k.call(&dst[0], &a[0], m)
	}
	if m < n {
		var tmp [8]float32
		copy(tmp[:], a[m:n])
		k.call(&tmp[0], &tmp[0], 8)
		copy(dst[m:n], tmp[:])
	}
	return true
}

//go:noescape
func widenBF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func narrowBF16AVX2(dst *uint16, src *float32, n int)

// widenBF16Vec widens src into dst (the same length) with the AVX2 kernel and reports whether it
// could.
func widenBF16Vec(dst []float32, src []uint16) bool {
	if !vecAVX2 || len(dst) == 0 {
		return false
	}
	widenBF16AVX2(&dst[0], &src[0], len(dst))
	return true
}

// narrowBF16Vec truncates src into dst (the same length) with the AVX2 kernel and reports
// whether it could.
func narrowBF16Vec(dst []uint16, src []float32) bool {
	if !vecAVX2 || len(dst) == 0 {
		return false
	}
	narrowBF16AVX2(&dst[0], &src[0], len(dst))
	return true
}

// roundBF16Vec truncates src to bfloat16 values into dst (the same length) with the AVX2 kernel
// and reports whether it could.
func roundBF16Vec(dst, src []float32) bool {
	if !vecAVX2 || len(dst) == 0 {
		return false
	}
	bitsF32AVX2(&dst[0], &src[0], len(dst), 0xffff0000, 0)
	return true
}

//go:noescape
func addBF16AVX2(dst, a, b *float32, n int)

//go:noescape
func subBF16AVX2(dst, a, b *float32, n int)

//go:noescape
func mulBF16AVX2(dst, a, b *float32, n int)

//go:noescape
func divBF16AVX2(dst, a, b *float32, n int)

// binaryBF16Vec computes dst = a op b truncated to bfloat16 (as float32) with the AVX2 kernels and
// reports whether it could.
func binaryBF16Vec(op opKind, dst, a, b []float32) bool {
	n := len(dst)
	if !vecAVX2 || n == 0 || len(a) < n || len(b) < n {
		return false
	}
	switch op {
	case vecAdd:
		addBF16AVX2(&dst[0], &a[0], &b[0], n)
	case vecSub:
		subBF16AVX2(&dst[0], &a[0], &b[0], n)
	case vecMul:
		mulBF16AVX2(&dst[0], &a[0], &b[0], n)
	case vecDiv:
		divBF16AVX2(&dst[0], &a[0], &b[0], n)
	default:
		return false
	}
	return true
}
