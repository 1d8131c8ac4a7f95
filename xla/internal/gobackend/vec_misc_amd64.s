//go:build amd64 && !purego

#include "textflag.h"

// Elementwise kernels of fusions that the portable loops ran one element at a time
// (vec_misc_amd64.go): the square root, Where's selection, the bool-to-float conversion of a
// condition, a mask of the bits (negation, and bfloat16 truncation for bf16.go) and a 32-bit
// fill. Each gives the bits of its portable loop; see the Go declarations.

// func sqrtF32AVX(dst, src *float32, n int)
//
// VSQRTPS rounds the exact square root once to float32. The portable loop's
// float32(math.Sqrt(float64(x))) rounds it twice, first to float64, which gives the same float32
// for a square root (53 >= 2*24+2 bits), and a negative input is the same default NaN.
TEXT ·sqrtF32AVX(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
sqrt32:
	CMPQ CX, $32
	JL   sqrt8
	VSQRTPS (SI), Y0
	VSQRTPS 32(SI), Y1
	VSQRTPS 64(SI), Y2
	VSQRTPS 96(SI), Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  sqrt32
sqrt8:
	CMPQ CX, $8
	JL   sqrttail
	VSQRTPS (SI), Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  sqrt8
sqrttail:
	CMPQ CX, $0
	JE   sqrtdone
	VMOVSS (SI), X0
	VSQRTSS X0, X0, X0
	VMOVSS X0, (DI)
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP  sqrttail
sqrtdone:
	VZEROUPPER
	RET

// func selectF32AVX(dst, cond, a, b *float32, n int)
//
// dst[i] = a[i] where cond[i] is 1.0 (0x3f800000), b[i] where it is 0: the condition shifted left
// by 2 puts its bit 29 in the sign bit that VBLENDVPS selects on. Element i of every operand is
// read before element i of dst is written, so dst may be one of them.
TEXT ·selectF32AVX(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ cond+8(FP), DX
	MOVQ a+16(FP), SI
	MOVQ b+24(FP), BX
	MOVQ n+32(FP), CX
sel16:
	CMPQ CX, $16
	JL   sel8
	VMOVDQU (DX), Y0
	VMOVDQU 32(DX), Y1
	VPSLLD $2, Y0, Y0
	VPSLLD $2, Y1, Y1
	VMOVUPS (BX), Y2
	VMOVUPS 32(BX), Y3
	VBLENDVPS Y0, (SI), Y2, Y2
	VBLENDVPS Y1, 32(SI), Y3, Y3
	VMOVUPS Y2, (DI)
	VMOVUPS Y3, 32(DI)
	ADDQ $64, DX
	ADDQ $64, SI
	ADDQ $64, BX
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  sel16
sel8:
	CMPQ CX, $8
	JL   seltail
	VMOVDQU (DX), Y0
	VPSLLD $2, Y0, Y0
	VMOVUPS (BX), Y2
	VBLENDVPS Y0, (SI), Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ $32, DX
	ADDQ $32, SI
	ADDQ $32, BX
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  sel8
seltail:
	CMPQ CX, $0
	JE   seldone
	VMOVSS (DX), X0
	VPSLLD $2, X0, X0
	VMOVSS (BX), X2
	VMOVSS (SI), X1
	VBLENDVPS X0, X1, X2, X2
	VMOVSS X2, (DI)
	ADDQ $4, DX
	ADDQ $4, SI
	ADDQ $4, BX
	ADDQ $4, DI
	DECQ CX
	JMP  seltail
seldone:
	VZEROUPPER
	RET

// func boolsToF32AVX2(dst *float32, src *bool, n int)
//
// dst[i] = 1.0 where src[i] is true (byte 1), else 0: bytes widened to int32 and converted.
TEXT ·boolsToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
b2f16:
	CMPQ CX, $16
	JL   b2f8
	VPMOVZXBD (SI), Y0
	VPMOVZXBD 8(SI), Y1
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $16, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  b2f16
b2f8:
	CMPQ CX, $8
	JL   b2ftail
	VPMOVZXBD (SI), Y0
	VCVTDQ2PS Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $8, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  b2f8
b2ftail:
	CMPQ CX, $0
	JE   b2fdone
	MOVBLZX (SI), AX
	VCVTSI2SSL AX, X0, X0
	VMOVSS X0, (DI)
	INCQ SI
	ADDQ $4, DI
	DECQ CX
	JMP  b2ftail
b2fdone:
	VZEROUPPER
	RET

// func bitsF32AVX2(dst, src *float32, n int, and, xor uint32)
//
// dst[i] = src[i]'s bits AND and, XOR xor: with and 0xffff0000 the float32 value of src[i]'s
// bfloat16 truncation, with xor 0x80000000 its negation (Go's -x: NaNs and zeros change sign
// too). dst may be src.
TEXT ·bitsF32AVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVL         and+24(FP), AX
	MOVL         xor+28(FP), DX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	VMOVD        DX, X15
	VPBROADCASTD X15, Y15
bits32:
	CMPQ    CX, $32
	JL      bits8
	VPAND   (SI), Y14, Y0
	VPAND   32(SI), Y14, Y1
	VPAND   64(SI), Y14, Y2
	VPAND   96(SI), Y14, Y3
	VPXOR   Y15, Y0, Y0
	VPXOR   Y15, Y1, Y1
	VPXOR   Y15, Y2, Y2
	VPXOR   Y15, Y3, Y3
	VMOVDQU Y0, (DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     bits32
bits8:
	CMPQ    CX, $8
	JL      bitstail
	VPAND   (SI), Y14, Y0
	VPXOR   Y15, Y0, Y0
	VMOVDQU Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     bits8
bitstail:
	CMPQ CX, $0
	JE   bitsdone
	MOVL (SI), BX
	ANDL AX, BX
	XORL DX, BX
	MOVL BX, (DI)
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP  bitstail
bitsdone:
	VZEROUPPER
	RET

// func fill32AVX2(dst *uint32, v uint32, n int)
//
// Every one of the n 32-bit elements at dst set to v: a float32 or int32 broadcast, 32 bytes
// per store.
TEXT ·fill32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVL v+8(FP), AX
	MOVQ n+16(FP), CX
	VMOVD AX, X0
	VPBROADCASTD X0, Y0
fill32:
	CMPQ CX, $32
	JL   fill8
	VMOVDQU Y0, (DI)
	VMOVDQU Y0, 32(DI)
	VMOVDQU Y0, 64(DI)
	VMOVDQU Y0, 96(DI)
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  fill32
fill8:
	CMPQ CX, $8
	JL   filltail
	VMOVDQU Y0, (DI)
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  fill8
filltail:
	CMPQ CX, $0
	JE   filldone
	MOVL AX, (DI)
	ADDQ $4, DI
	DECQ CX
	JMP  filltail
filldone:
	VZEROUPPER
	RET

// func maxF32AVX2(src *float32, n int, init float32) (m float32, unordered bool)
//
// The maximum of init and the n elements at src (n a positive multiple of 32), by VMAXPS in four
// accumulators, and whether any element is a NaN (an unordered self-comparison, OR-ed). VMAXPS
// returns its second operand for a NaN and for two zeros, where Go's max propagates the NaN and
// prefers +0: maxRow only keeps m when no element was a NaN and m is not zero, and then it is
// the one value Go's pairwise max gives.
TEXT ·maxF32AVX2(SB), NOSPLIT, $0-29
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS init+16(FP), Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	VXORPS Y8, Y8, Y8
max32:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VMAXPS Y4, Y0, Y0
	VMAXPS Y5, Y1, Y1
	VMAXPS Y6, Y2, Y2
	VMAXPS Y7, Y3, Y3
	VCMPPS $3, Y5, Y4, Y9
	VCMPPS $3, Y7, Y6, Y10
	VORPS Y9, Y8, Y8
	VORPS Y10, Y8, Y8
	ADDQ $128, SI
	SUBQ $32, CX
	JNZ  max32
	VMAXPS Y1, Y0, Y0
	VMAXPS Y3, Y2, Y2
	VMAXPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4E, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xB1, X0, X1
	VMAXPS X1, X0, X0
	VMOVSS X0, m+24(FP)
	VMOVMSKPS Y8, AX
	TESTL AX, AX
	SETNE unordered+28(FP)
	VZEROUPPER
	RET

// func prefetchLines(p unsafe.Pointer, n int)
TEXT ·prefetchLines(SB), NOSPLIT, $0-16
	MOVQ p+0(FP), SI
	MOVQ n+8(FP), CX
pf:
	CMPQ CX, $0
	JLE  pfdone
	PREFETCHT0 (SI)
	ADDQ $64, SI
	SUBQ $64, CX
	JMP  pf
pfdone:
	RET
