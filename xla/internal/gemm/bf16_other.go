//go:build !amd64 || purego

package gemm

// storeBF16 writes src rounded to bfloat16 into dst, first adding dst's old
// value in float32 when accumulate is set.
func storeBF16(dst []uint16, src []float32, accumulate bool) { storeBF16Go(dst, src, accumulate) }
