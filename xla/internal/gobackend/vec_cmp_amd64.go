//go:build amd64 && !purego

package gobackend

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// vecCmp512 selects eqI32AVX512 and eqF32AVX512, which need AVX512BW and AVX512VL (VPMOVM2B
// into an xmm register) besides AVX512F; read once from the CPU's features.
var vecCmp512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL

//go:noescape
func eqI32AVX512(dst *bool, a, b *int32, n int, ne int)

//go:noescape
func eqF32AVX512(dst *bool, a, b *float32, n int, ne int)

// equalVec sets out[i] = (a[i] == b[i]) != ne over the longest multiple of 16 elements the
// vector kernels can take and returns how many that was (0 without them); the caller's loop
// does the rest. a and b are at least as long as out.
func equalVec[T int32 | float32](out []bool, a, b []T, ne bool) int {
	n := len(out) &^ 15
	if !vecCmp512 || n == 0 {
		return 0
	}
	_, _ = a[n-1], b[n-1]
	flip := 0
	if ne {
		flip = 1
	}
	var zero T
	if _, float := any(zero).(float32); float {
		eqF32AVX512(&out[0], (*float32)(unsafe.Pointer(&a[0])), (*float32)(unsafe.Pointer(&b[0])), n, flip)
	} else {
		eqI32AVX512(&out[0], (*int32)(unsafe.Pointer(&a[0])), (*int32)(unsafe.Pointer(&b[0])), n, flip)
	}
	return n
}
