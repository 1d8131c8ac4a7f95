//go:build amd64 && !purego

package gemm

import "unsafe"

// Packing kernels (pack_amd64.s). The callers below check the slice bounds
// the assembly relies on, so a driver bug panics in Go instead of reading or
// writing out of bounds.
//
//go:noescape
func pairsInterleave(dst *uint32, src *uint16, steps, sp, w int, m0, m1 uint32, np, pstride int)

//go:noescape
func pairsTranspose16(dst *uint32, src *uint16, rows, sx, chunks, w int, mask, swap uint32)

//go:noescape
func widenTranspose16(dst *float32, src *uint16, rows, sx, chunks, w int, mask uint32)

//go:noescape
func copyPanel32(dst, src *float32, kb, sp int)

//go:noescape
func copyPanel12(dst, src *float32, kb, sp int)

//go:noescape
func widenRowsAVX2(dst *float32, src *uint16, steps, sp, w, np, pstride int)

// packPairsAVX512 is packPairs with the bulk of each panel done by the
// AVX-512 packing kernels (AVX512BW, which every AVX512-BF16 CPU has): full
// steps of full-width panels for sx == 1 and whole 16-step chunks for
// sp == 1. Edge panels, the last step of an odd kb and the steps after the
// last whole chunk fall back to the Go loops of packPairs.
func packPairsAVX512(dst []uint32, src []uint16, x0, p0, nx, kb, w, sx, sp int) {
	kp := (kb + 1) / 2
	full := kb / 2
	t := 0
	if sx == 1 && full > 0 {
		// Full panels in groups of about 64 values along x (see
		// pairsInterleave for why groups); the Go loop below finishes the odd
		// last step and the edge panel.
		group := max(1, 64/w)
		m0, m1 := uint32(1)<<min(w, 16)-1, uint32(1)<<max(w-16, 0)-1
		nfull := nx / w
		for ; t < nfull; t += group {
			np := min(group, nfull-t)
			base := x0 + t*w + p0*sp
			_ = src[base+(2*full-1)*sp+np*w-1] // last value read
			_ = dst[(t+np)*w*kp-1]             // last dword written
			pairsInterleave(&dst[t*w*kp], &src[base], full, sp, w, m0, m1, np, w*kp)
		}
		t = nfull
		for u := range nfull {
			packPairsRange(dst[u*w*kp:(u+1)*w*kp], src, x0+u*w, p0, w, kb, w, sx, sp, full)
		}
	}
	for ; t*w < nx; t++ {
		xs := x0 + t*w
		cols := min(w, nx-t*w)
		d := dst[t*w*kp : (t+1)*w*kp]
		if sx == 1 {
			packPairsRange(d, src, xs, p0, cols, kb, w, sx, sp, 0)
			continue
		}
		chunks := kb / 32
		if chunks > 0 {
			for g := 0; g < w; g += 16 {
				rows := min(max(cols-g, 0), 16)
				s := unsafe.SliceData(src) // not read when rows == 0
				if rows > 0 {
					base := (xs+g)*sx + p0
					_ = src[base+(rows-1)*sx+32*chunks-1] // last value read
					s = &src[base]
				}
				_ = d[(16*chunks-1)*w+g+min(16, w-g)-1] // last dword written
				pairsTranspose16(&d[g], s, rows, sx, chunks, w, uint32(1)<<min(16, w-g)-1, 1)
			}
		}
		packPairsRange(d, src, xs, p0, cols, kb, w, sx, sp, 16*chunks)
	}
}

// widenPanels widens the full panels of packBF16's block with sx == 1 using
// AVX2, when the CPU has it and w is a multiple of 4 (every kernel's tile
// width except AVX2's 6-row A panels), and returns how many panels it packed
// (all full ones, or 0).
func widenPanels(dst []float32, src []uint16, x0, p0, nx, kb, w, sp int) int {
	if !hasAVX2() || w%4 != 0 || kb == 0 {
		return 0
	}
	nfull := nx / w
	group := max(1, 64/w) // as in packPairsAVX512
	for t := 0; t < nfull; t += group {
		np := min(group, nfull-t)
		base := x0 + t*w + p0*sp
		_ = src[base+(kb-1)*sp+np*w-1] // last value read
		_ = dst[(t+np)*w*kb-1]         // last value written
		widenRowsAVX2(&dst[t*w*kb], &src[base], kb, sp, w, np, w*kb)
	}
	return nfull
}

// widenTransposed packs the first steps of one panel d of packBF16 with
// sp == 1 (cols x-rows contiguous along k, zero-padded to w) with the
// AVX-512 transpose, when the CPU has AVX512F and AVX512BW, and returns the
// number of steps it did: the whole 16-step chunks of kb, or 0.
func widenTransposed(d []float32, src []uint16, xs, p0, cols, kb, w, sx int) int {
	if !hasAVX512BW() {
		return 0
	}
	return transposePanel(d, src, xs, p0, cols, kb, w, sx, widenTranspose16)
}

// transposePanel runs kernel, a 16×16-transposing packer (widenTranspose16 or transpose16F32),
// over each 16-lane group of one panel d with sp == 1, for the whole 16-step chunks of kb, and
// returns the number of steps done (0 when kb has no whole chunk). The slice checks make a driver
// bug panic in Go instead of reading or writing out of bounds in assembly.
func transposePanel[T uint16 | float32](d []float32, src []T, xs, p0, cols, kb, w, sx int, kernel func(dst *float32, src *T, rows, sx, chunks, w int, mask uint32)) int {
	chunks := kb / 16
	if chunks == 0 {
		return 0
	}
	for g := 0; g < w; g += 16 {
		rows := min(max(cols-g, 0), 16)
		s := unsafe.SliceData(src) // not read when rows == 0
		if rows > 0 {
			base := (xs+g)*sx + p0
			_ = src[base+(rows-1)*sx+16*chunks-1] // last value read
			s = &src[base]
		}
		_ = d[(16*chunks-1)*w+g+min(16, w-g)-1] // last value written
		kernel(&d[g], s, rows, sx, chunks, w, uint32(1)<<min(16, w-g)-1)
	}
	return 16 * chunks
}

// transpose16F32 is pairsTranspose16 without the halves' swap on float32
// rows (a float32 is a dword; sx floats are 2·sx bfloat16 places).
func transpose16F32(dst, src *float32, rows, sx, chunks, w int, mask uint32) {
	pairsTranspose16((*uint32)(unsafe.Pointer(dst)), (*uint16)(unsafe.Pointer(src)), rows, 2*sx, chunks, w, mask, 0)
}

// transposedF32 is widenTransposed for float32 sources: it packs the first
// steps of one panel d of packF32 with sp == 1 with the AVX-512 transpose
// (AVX512F only), and returns the number of steps it did: the whole 16-step
// chunks of kb, or 0. The panels are the Go loops' bits (a copy).
func transposedF32(d []float32, src []float32, xs, p0, cols, kb, w, sx int) int {
	if !hasAVX512() {
		return 0
	}
	return transposePanel(d, src, xs, p0, cols, kb, w, sx, transpose16F32)
}

// copyPanel packs one full panel d of packF32 with sx == 1 (each step w contiguous values of src,
// sp apart) with vector moves instead of a copy call per step, for the AVX-512 kernel's panel
// widths (12 for A, 32 for B), and reports whether it did.
func copyPanel(d, src []float32, kb, sp, w int) bool {
	if kb == 0 || !hasAVX512() || w != 32 && w != 12 {
		return false
	}
	_ = src[(kb-1)*sp+w-1] // last value read
	_ = d[kb*w-1]          // last value written
	if w == 32 {
		copyPanel32(&d[0], &src[0], kb, sp)
	} else {
		copyPanel12(&d[0], &src[0], kb, sp)
	}
	return true
}
