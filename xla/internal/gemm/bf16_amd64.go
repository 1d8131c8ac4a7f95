//go:build amd64 && !purego

package gemm

// roundBF16AVX512 (bf16_amd64.s) rounds 16 float32 at a time to bfloat16,
// bit-identically to Float32ToBF16.
//
//go:noescape
func roundBF16AVX512(dst *uint16, src *float32, n int, accumulate int)

// storeBF16 writes src rounded to bfloat16 into dst (len(dst) >= len(src)),
// first adding dst's old value in float32 when accumulate is set: the final
// store of a bfloat16-output product. The AVX-512 loop does whole 16-value
// chunks and Go the rest.
func storeBF16(dst []uint16, src []float32, accumulate bool) {
	n := 0
	if hasAVX512BW() {
		n = len(src) &^ 15
		if n > 0 {
			_ = dst[n-1]
			roundBF16AVX512(&dst[0], &src[0], n, b2i(accumulate))
		}
	}
	storeBF16Go(dst[n:], src[n:], accumulate)
}
