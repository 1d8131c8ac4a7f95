package gemm

import "math"

// BF16ToFloat32 widens a bfloat16 (stored as its 16 bits) to float32. The
// conversion is exact: bfloat16 is the upper half of an IEEE float32.
func BF16ToFloat32(v uint16) float32 { return math.Float32frombits(uint32(v) << 16) }

// Float32ToBF16 rounds a float32 to the nearest bfloat16, ties to even, as
// PyTorch and XLA do. NaNs stay NaN (quiet bit forced so truncation cannot turn
// a NaN payload into Inf); overflow rounds to ±Inf.
func Float32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// storeBF16Go is storeBF16 in Go, the reference of the vector versions.
func storeBF16Go(dst []uint16, src []float32, accumulate bool) {
	dst = dst[:len(src)]
	if accumulate {
		for x, v := range src {
			dst[x] = Float32ToBF16(BF16ToFloat32(dst[x]) + v)
		}
		return
	}
	for x, v := range src {
		dst[x] = Float32ToBF16(v)
	}
}

// RoundBF16 writes src rounded to bfloat16 (nearest, ties to even: Float32ToBF16) into dst
// (len(dst) >= len(src)), with the AVX-512 loop of the products' final store where the CPU has
// it.
func RoundBF16(dst []uint16, src []float32) { storeBF16(dst, src, false) }
