//go:build amd64 && !purego

package gobackend

import "unsafe"

// The kernels of vec_misc_amd64.s run where vecAVX2 is set (AVX2 implies the AVX instructions
// the square root and the selection use).

//go:noescape
func sqrtF32AVX(dst, src *float32, n int)

// prefetchLines asks for the cache lines of the n bytes at p (PREFETCHT0), without waiting.
//
//go:noescape
func prefetchLines(p unsafe.Pointer, n int)

//go:noescape
func selectF32AVX(dst, cond, a, b *float32, n int)

//go:noescape
func boolsToF32AVX2(dst *float32, src *bool, n int)

//go:noescape
func bitsF32AVX2(dst, src *float32, n int, and, xor uint32)

//go:noescape
func fill32AVX2(dst *uint32, v uint32, n int)

// negF32Vec computes dst = -a with the vector kernel and reports whether it could: the bits of
// unaryRef's Neg.
func negF32Vec(dst, a []float32) bool {
	n := len(dst)
	if !vecAVX2 || n == 0 || len(a) < n {
		return false
	}
	bitsF32AVX2(&dst[0], &a[0], n, 0xffffffff, 0x80000000)
	return true
}

//go:noescape
func maxF32AVX2(src *float32, n int, init float32) (m float32, unordered bool)

// maxRowVec returns the maximum of init and row as Go's max computes it pairwise, and whether
// the vector kernel could give it: not without AVX2, for a NaN or zero init, or when the row
// holds a NaN or its maximum is zero (see maxF32AVX2); the caller then runs the portable loop.
func maxRowVec(init float32, row []float32) (float32, bool) {
	k := len(row) &^ 31
	if !vecAVX2 || k == 0 || init != init || init == 0 {
		return 0, false
	}
	m, unordered := maxF32AVX2(&row[0], k, init)
	if unordered || m == 0 {
		return 0, false
	}
	return maxRowLoop(m, row[k:]), true
}

// fill32Vec sets the n 32-bit elements at dst to v with the vector kernel and reports whether it
// could. fill uses it for float32 and int32 runs: one call instead of the log2(n) copies of the
// portable doubling.
func fill32Vec(dst *uint32, v uint32, n int) bool {
	if !vecAVX2 {
		return false
	}
	fill32AVX2(dst, v, n)
	return true
}

// sqrtF32Vec computes dst = sqrt(a) with the vector kernel and reports whether it could. The
// results are bitwise unaryRef's.
func sqrtF32Vec(dst, a []float32) bool {
	n := len(dst)
	if !vecAVX2 || n == 0 || len(a) < n {
		return false
	}
	sqrtF32AVX(&dst[0], &a[0], n)
	return true
}

// selectF32Vec is selectF32 with the vector kernel; it reports whether it could run.
func selectF32Vec(dst, cond, a, b []float32) bool {
	n := len(dst)
	if !vecAVX2 || n == 0 || len(cond) < n || len(a) < n || len(b) < n {
		return false
	}
	selectF32AVX(&dst[0], &cond[0], &a[0], &b[0], n)
	return true
}

// boolsToF32Vec is boolsToF32 with the vector kernel; it reports whether it could run.
func boolsToF32Vec(dst []float32, src []bool) bool {
	n := len(src)
	if !vecAVX2 || n == 0 || len(dst) < n {
		return false
	}
	boolsToF32AVX2(&dst[0], unsafe.SliceData(src), n)
	return true
}
