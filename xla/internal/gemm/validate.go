package gemm

import (
	"fmt"
	"math"
	"unsafe"
)

// validate checks op and batch against the operand lengths and fills in the
// default (tight) leading dimensions. Every error names the offending field.
func validate(op *Op, batch Batch, lenA, lenB, lenC int) error {
	if op.M < 0 || op.N < 0 || op.K < 0 {
		return fmt.Errorf("gemm: negative dimension in Op{M: %d, N: %d, K: %d}", op.M, op.N, op.K)
	}
	if batch.Count < 0 {
		return fmt.Errorf("gemm: Batch.Count = %d, must be >= 0", batch.Count)
	}
	if batch.StrideA < 0 || batch.StrideB < 0 || batch.StrideC < 0 {
		return fmt.Errorf("gemm: negative batch stride in Batch{StrideA: %d, StrideB: %d, StrideC: %d}",
			batch.StrideA, batch.StrideB, batch.StrideC)
	}
	// Stored shapes (rows × cols) of A, B and C.
	aRows, aCols := op.M, op.K
	if op.TransA {
		aRows, aCols = op.K, op.M
	}
	bRows, bCols := op.K, op.N
	if op.TransB {
		bRows, bCols = op.N, op.K
	}
	var err error
	if op.LDA, err = leading("LDA", op.LDA, aCols); err != nil {
		return err
	}
	if op.LDB, err = leading("LDB", op.LDB, bCols); err != nil {
		return err
	}
	if op.LDC, err = leading("LDC", op.LDC, op.N); err != nil {
		return err
	}
	extA, okA := extent(aRows, aCols, op.LDA)
	extB, okB := extent(bRows, bCols, op.LDB)
	extC, okC := extent(op.M, op.N, op.LDC)
	if !okA || !okB || !okC {
		return fmt.Errorf("gemm: matrix extent overflows int (M=%d N=%d K=%d LDA=%d LDB=%d LDC=%d)",
			op.M, op.N, op.K, op.LDA, op.LDB, op.LDC)
	}
	// The outputs must be disjoint: one after another, or side by side in the same rows
	// (attention's heads written into [seq, heads·dim] rows: each item N columns wide, the
	// items StrideC apart, all within LDC).
	sideBySide := op.M > 1 && batch.StrideC >= op.N && (batch.Count-1)*batch.StrideC+op.N <= op.LDC
	if batch.Count > 1 && extC > 0 && batch.StrideC < extC && !sideBySide {
		return fmt.Errorf("gemm: Batch.StrideC = %d overlaps consecutive outputs (each C spans %d elements)",
			batch.StrideC, extC)
	}
	for _, m := range []struct {
		name          string
		ext, stride   int
		have          int
		rows, cols, l int
	}{
		{"A", extA, batch.StrideA, lenA, aRows, aCols, op.LDA},
		{"B", extB, batch.StrideB, lenB, bRows, bCols, op.LDB},
		{"C", extC, batch.StrideC, lenC, op.M, op.N, op.LDC},
	} {
		need, ok := batchedExtent(batch.Count, m.stride, m.ext)
		if !ok {
			return fmt.Errorf("gemm: %s: batched extent overflows int (Count=%d stride=%d)", m.name, batch.Count, m.stride)
		}
		if m.have < need {
			return fmt.Errorf("gemm: %s has %d elements, need %d (%d×%d stored with leading dimension %d, batch count %d, stride %d)",
				m.name, m.have, need, m.rows, m.cols, m.l, batch.Count, m.stride)
		}
	}
	return nil
}

// leading resolves a leading dimension: 0 means cols, otherwise it must be at
// least cols (and at least 1).
func leading(name string, ld, cols int) (int, error) {
	if ld == 0 {
		return max(cols, 1), nil
	}
	if ld < 0 || ld < cols {
		return 0, fmt.Errorf("gemm: Op.%s = %d, must be >= the stored row length %d (or 0 for tight)", name, ld, cols)
	}
	return ld, nil
}

// extent is the number of elements a rows×cols matrix with leading dimension ld
// spans: (rows-1)*ld + cols, or 0 when it is empty.
func extent(rows, cols, ld int) (int, bool) {
	if rows == 0 || cols == 0 {
		return 0, true
	}
	if rows-1 > (math.MaxInt-cols)/ld {
		return 0, false
	}
	return (rows-1)*ld + cols, true
}

// batchedExtent is the elements count items of ext elements, stride apart, span.
func batchedExtent(count, stride, ext int) (int, bool) {
	if count == 0 || ext == 0 {
		return 0, true
	}
	if stride > 0 && count-1 > (math.MaxInt-ext)/stride {
		return 0, false
	}
	return (count-1)*stride + ext, true
}

// checkOverlapF32 rejects a C that shares memory with A or B: the kernels read
// packed copies of A and B block by block while writing C, so an overlap would
// silently produce wrong results.
func checkOverlapF32(a, b, c []float32) error {
	if overlaps(unsafe.Pointer(unsafe.SliceData(a)), len(a), unsafe.Pointer(unsafe.SliceData(c)), len(c), 4) {
		return fmt.Errorf("gemm: C overlaps A in memory")
	}
	if overlaps(unsafe.Pointer(unsafe.SliceData(b)), len(b), unsafe.Pointer(unsafe.SliceData(c)), len(c), 4) {
		return fmt.Errorf("gemm: C overlaps B in memory")
	}
	return nil
}

// checkOverlapU16 is checkOverlapF32 for bfloat16 storage.
func checkOverlapU16(a, b, c []uint16) error {
	if overlaps(unsafe.Pointer(unsafe.SliceData(a)), len(a), unsafe.Pointer(unsafe.SliceData(c)), len(c), 2) {
		return fmt.Errorf("gemm: C overlaps A in memory")
	}
	if overlaps(unsafe.Pointer(unsafe.SliceData(b)), len(b), unsafe.Pointer(unsafe.SliceData(c)), len(c), 2) {
		return fmt.Errorf("gemm: C overlaps B in memory")
	}
	return nil
}

func overlaps(p unsafe.Pointer, n int, q unsafe.Pointer, m int, size uintptr) bool {
	if n == 0 || m == 0 {
		return false
	}
	p0, q0 := uintptr(p), uintptr(q)
	return p0 < q0+uintptr(m)*size && q0 < p0+uintptr(n)*size
}
