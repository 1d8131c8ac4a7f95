//go:build amd64 && !purego

#include "textflag.h"

// func roundBF16AVX512(dst *uint16, src *float32, n int, accumulate int)
//
// dst[i] = Float32ToBF16(src[i]) (or of BF16ToFloat32(dst[i]) + src[i] when
// accumulate != 0) for i in [0, n), n a multiple of 16, with Float32ToBF16's
// integer rounding so the result is bit-identical to storeBF16Go (up to which
// payload the sum of two NaNs keeps, which Go leaves open): bits + 0x7fff +
// (bit 16) rounds to nearest even in the upper half (overflow carries into
// the exponent and gives ±Inf), and a NaN keeps its upper half with the quiet
// bit set instead (the rounding carry could turn it into Inf). Denormals are
// rounded like any value (no DAZ/FTZ), as in Go.
TEXT ·roundBF16AVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ accumulate+24(FP), R8
	MOVL $1, AX
	VPBROADCASTD AX, Z10          // bit 16 after the shift
	MOVL $0x7fff, AX
	VPBROADCASTD AX, Z11          // rounding bias
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z12          // |x| mask
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z13          // +Inf: |x| above it is NaN
	MOVL $0x400000, AX
	VPBROADCASTD AX, Z14          // the quiet bit, in the upper half
	SHRQ $4, CX
	JZ   rdone
rloop:
	VMOVUPS (SI), Z0
	TESTQ R8, R8
	JZ   rround
	VPMOVZXWD (DI), Z1
	VPSLLD $16, Z1, Z1
	VADDPS Z0, Z1, Z0             // old + x, in Go's operand order
rround:
	VPANDD Z12, Z0, Z2
	VPCMPUD $6, Z13, Z2, K1       // K1: |x| > +Inf, a NaN
	VPSRLD $16, Z0, Z3
	VPANDD Z10, Z3, Z3
	VPADDD Z11, Z0, Z4
	VPADDD Z3, Z4, Z4
	VPORD Z14, Z0, K1, Z4         // NaN lanes: x | quiet bit, unrounded
	VPSRLD $16, Z4, Z4
	VPMOVDW Z4, (DI)
	ADDQ $64, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  rloop
rdone:
	VZEROUPPER
	RET
