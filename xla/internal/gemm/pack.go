package gemm

// Packing copies a block of an input matrix into the contiguous micro-panel
// layout the kernels read: panel t of a block holds, for each of the kb steps of
// the shared (k) dimension, w consecutive values along the panel's own dimension
// (rows of A with w = mr, columns of B with w = nr). Panels at the edge are
// zero-padded to w so the kernels never need a remainder path; the padded
// results land in the edge tile and are dropped.
//
// Both A and B reduce to one shape: element (x, p) of the block (x along the
// panel dimension, p along k) lives at data[x*sx + p*sp], and exactly one of sx,
// sp is 1 because the matrices are row-major with an optional transpose:
//
//	A, not transposed: x = row i,    sx = lda, sp = 1
//	A, transposed:     x = row i,    sx = 1,   sp = lda
//	B, not transposed: x = column j, sx = 1,   sp = ldb
//	B, transposed:     x = column j, sx = ldb, sp = 1
//
// With sx == 1 each step is a contiguous copy of w values; with sp == 1 each x
// is a contiguous run along k that is scattered with stride w.

// packF32 packs the nx×kb block starting at (x0, p0) into dst in panels of w.
func packF32(dst, src []float32, x0, p0, nx, kb, w, sx, sp int) {
	for t := 0; t*w < nx; t++ {
		xs := x0 + t*w
		cols := min(w, nx-t*w)
		d := dst[t*w*kb : (t+1)*w*kb]
		if sx == 1 {
			if cols == w && copyPanel(d, src[xs+p0*sp:], kb, sp, w) {
				continue
			}
			for p := 0; p < kb; p++ {
				off := xs + (p0+p)*sp
				row := d[p*w : p*w+w]
				copy(row[:cols], src[off:off+cols])
				clear(row[cols:])
			}
			continue
		}
		// Vector code packs the first steps where it can (16×16 transposes in
		// registers); Go does the rest.
		done := transposedF32(d, src, xs, p0, cols, kb, w, sx)
		x := 0
		// Four x at a time: four sequential read streams, one 16-byte write
		// per p, and one bounds check instead of four.
		for ; x+4 <= cols; x += 4 {
			off := (xs+x)*sx + p0
			s0 := src[off+done : off+kb]
			s1 := src[off+sx+done : off+sx+kb]
			s2 := src[off+2*sx+done : off+2*sx+kb]
			s3 := src[off+3*sx+done : off+3*sx+kb]
			for i := range s0 {
				q := (*[4]float32)(d[(done+i)*w+x:])
				q[0], q[1], q[2], q[3] = s0[i], s1[i], s2[i], s3[i]
			}
		}
		for ; x < cols; x++ {
			off := (xs+x)*sx + p0
			for p, v := range src[off+done : off+kb] {
				d[(done+p)*w+x] = v
			}
		}
		if cols < w {
			for p := done; p < kb; p++ {
				clear(d[p*w+cols : p*w+w])
			}
		}
	}
}

// packBF16 is packF32 for bfloat16 storage: each value is widened to float32
// (exact: a bfloat16 is the upper half of a float32) while it is copied, so the
// float32 kernels run unchanged and accumulate in float32. This is how
// bfloat16 inputs run on CPUs without AVX512-BF16. With sx == 1 the full
// panels are widened by vector code where there is some (widenPanels).
func packBF16(dst []float32, src []uint16, x0, p0, nx, kb, w, sx, sp int) {
	t := 0
	if sx == 1 {
		t = widenPanels(dst, src, x0, p0, nx, kb, w, sp)
	}
	for ; t*w < nx; t++ {
		xs := x0 + t*w
		cols := min(w, nx-t*w)
		d := dst[t*w*kb : (t+1)*w*kb]
		if sx == 1 {
			for p := 0; p < kb; p++ {
				off := xs + (p0+p)*sp
				row := d[p*w : p*w+w]
				for x, v := range src[off : off+cols] {
					row[x] = BF16ToFloat32(v)
				}
				clear(row[cols:])
			}
			continue
		}
		// Vector code packs the first steps where it can; Go does the rest.
		done := widenTransposed(d, src, xs, p0, cols, kb, w, sx)
		x := 0
		for ; x+4 <= cols; x += 4 {
			off := (xs+x)*sx + p0
			s0 := src[off+done : off+kb]
			s1 := src[off+sx+done : off+sx+kb]
			s2 := src[off+2*sx+done : off+2*sx+kb]
			s3 := src[off+3*sx+done : off+3*sx+kb]
			for i := range s0 {
				q := (*[4]float32)(d[(done+i)*w+x:])
				q[0], q[1], q[2], q[3] = BF16ToFloat32(s0[i]), BF16ToFloat32(s1[i]), BF16ToFloat32(s2[i]), BF16ToFloat32(s3[i])
			}
		}
		for ; x < cols; x++ {
			off := (xs+x)*sx + p0
			for p, v := range src[off+done : off+kb] {
				d[(done+p)*w+x] = BF16ToFloat32(v)
			}
		}
		if cols < w {
			for p := done; p < kb; p++ {
				clear(d[p*w+cols : p*w+w])
			}
		}
	}
}

// packPairs packs the nx×kb block at (x0, p0) of bfloat16 src for the
// AVX512-BF16 kernel: panels of w, like packF32, but each element is a dword
// holding two consecutive k values of the same x, (x, p) in the high half and
// (x, p+1) in the low half, because VDPBF16PS multiplies such pairs and adds
// both products into one float32 lane — the high halves' product first, then
// the low halves', each rounded once. With p in the high half the kernel adds
// the products in k order, exactly as the float32 kernels' FMAs do on the
// widened values (a bfloat16 product is exact in float32, so an FMA and an
// addition of the product round alike): both bfloat16 paths give the same
// bits, denormals aside (VDPBF16PS reads and writes them as zero). A panel
// holds ceil(kb/2) steps of w dwords; an odd kb leaves the low half of the
// last step zero, which adds 0·0 to every lane. The values stay bfloat16, so the panels are half the
// bytes of packBF16's widened ones.
//
//	sx == 1: rows p and p+1 of the block are contiguous along x; a step
//	         interleaves them.
//	sp == 1: each x is contiguous along k, so a pair is already one dword in
//	         memory; a step gathers w of them (a transpose of dwords).
//
// This is the portable form (and the reference of the tests);
// packPairsAVX512 does the same with vector code.
func packPairs(dst []uint32, src []uint16, x0, p0, nx, kb, w, sx, sp int) {
	kp := (kb + 1) / 2
	for t := 0; t*w < nx; t++ {
		xs := x0 + t*w
		cols := min(w, nx-t*w)
		packPairsRange(dst[t*w*kp:(t+1)*w*kp], src, xs, p0, cols, kb, w, sx, sp, 0)
	}
}

// packPairsRange writes steps [q0, ceil(kb/2)) of one panel d of packPairs:
// cols x values from xs, zero-padded to w.
func packPairsRange(d []uint32, src []uint16, xs, p0, cols, kb, w, sx, sp, q0 int) {
	kp := (kb + 1) / 2
	full := kb / 2 // steps with both halves
	if q0 >= kp {
		return
	}
	if sx == 1 {
		for q := q0; q < kp; q++ {
			off := xs + (p0+2*q)*sp
			row := d[q*w : q*w+w]
			lo := src[off : off+cols]
			if q < full {
				hi := src[off+sp : off+sp+cols]
				for x, v := range lo {
					row[x] = uint32(v)<<16 | uint32(hi[x])
				}
			} else {
				for x, v := range lo {
					row[x] = uint32(v) << 16
				}
			}
			clear(row[cols:])
		}
		return
	}
	x := 0
	// Four x at a time: four sequential read streams and one 16-byte write
	// per step, as in packF32.
	for ; x+4 <= cols; x += 4 {
		off := (xs+x)*sx + p0
		s0 := src[off : off+kb]
		s1 := src[off+sx : off+sx+kb]
		s2 := src[off+2*sx : off+2*sx+kb]
		s3 := src[off+3*sx : off+3*sx+kb]
		for q := q0; q < full; q++ {
			o := (*[4]uint32)(d[q*w+x:])
			o[0] = uint32(s0[2*q])<<16 | uint32(s0[2*q+1])
			o[1] = uint32(s1[2*q])<<16 | uint32(s1[2*q+1])
			o[2] = uint32(s2[2*q])<<16 | uint32(s2[2*q+1])
			o[3] = uint32(s3[2*q])<<16 | uint32(s3[2*q+1])
		}
		if full < kp {
			o := (*[4]uint32)(d[full*w+x:])
			o[0], o[1], o[2], o[3] = uint32(s0[kb-1])<<16, uint32(s1[kb-1])<<16, uint32(s2[kb-1])<<16, uint32(s3[kb-1])<<16
		}
	}
	for ; x < cols; x++ {
		off := (xs+x)*sx + p0
		s := src[off : off+kb]
		for q := q0; q < full; q++ {
			d[q*w+x] = uint32(s[2*q])<<16 | uint32(s[2*q+1])
		}
		if full < kp {
			d[full*w+x] = uint32(s[kb-1]) << 16
		}
	}
	if cols < w {
		for q := q0; q < kp; q++ {
			clear(d[q*w+cols : q*w+w])
		}
	}
}
