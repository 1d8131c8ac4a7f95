//go:build amd64 && !purego

package gobackend

import "testing"

// forEachVecWidth runs fn with the AVX-512 binary kernels, where the CPU has them, and with the
// AVX2 ones.
func forEachVecWidth(t *testing.T, fn func(t *testing.T)) {
	saved := vecAVX512
	defer func() { vecAVX512 = saved }()
	for _, on := range []bool{true, false} {
		if on && !saved {
			continue
		}
		vecAVX512 = on
		name := "avx2"
		if on {
			name = "avx512"
		}
		t.Run(name, fn)
	}
}
