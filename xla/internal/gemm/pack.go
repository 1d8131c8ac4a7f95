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
			for p := 0; p < kb; p++ {
				off := xs + (p0+p)*sp
				row := d[p*w : p*w+w]
				copy(row[:cols], src[off:off+cols])
				clear(row[cols:])
			}
			continue
		}
		x := 0
		// Four x at a time: four sequential read streams, one 16-byte write
		// per p, and one bounds check instead of four.
		for ; x+4 <= cols; x += 4 {
			off := (xs+x)*sx + p0
			s0 := src[off : off+kb]
			s1 := src[off+sx : off+sx+kb]
			s2 := src[off+2*sx : off+2*sx+kb]
			s3 := src[off+3*sx : off+3*sx+kb]
			for p := range s0 {
				q := (*[4]float32)(d[p*w+x:])
				q[0], q[1], q[2], q[3] = s0[p], s1[p], s2[p], s3[p]
			}
		}
		for ; x < cols; x++ {
			off := (xs+x)*sx + p0
			s := src[off : off+kb]
			for p, v := range s {
				d[p*w+x] = v
			}
		}
		if cols < w {
			for p := 0; p < kb; p++ {
				clear(d[p*w+cols : p*w+w])
			}
		}
	}
}

// packBF16 is packF32 for bfloat16 storage: each value is widened to float32
// (exact: a bfloat16 is the upper half of a float32) while it is copied, so the
// float32 kernels run unchanged and accumulate in float32.
func packBF16(dst []float32, src []uint16, x0, p0, nx, kb, w, sx, sp int) {
	for t := 0; t*w < nx; t++ {
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
		x := 0
		for ; x+4 <= cols; x += 4 {
			off := (xs+x)*sx + p0
			s0 := src[off : off+kb]
			s1 := src[off+sx : off+sx+kb]
			s2 := src[off+2*sx : off+2*sx+kb]
			s3 := src[off+3*sx : off+3*sx+kb]
			for p := range s0 {
				q := (*[4]float32)(d[p*w+x:])
				q[0], q[1], q[2], q[3] = BF16ToFloat32(s0[p]), BF16ToFloat32(s1[p]), BF16ToFloat32(s2[p]), BF16ToFloat32(s3[p])
			}
		}
		for ; x < cols; x++ {
			off := (xs+x)*sx + p0
			s := src[off : off+kb]
			for p, v := range s {
				d[p*w+x] = BF16ToFloat32(v)
			}
		}
		if cols < w {
			for p := 0; p < kb; p++ {
				clear(d[p*w+cols : p*w+w])
			}
		}
	}
}
