//go:build amd64 && !purego

#include "textflag.h"

// func kernelAVX512Strided(k int, a *float32, asr, ask int, b *float32, bsk int, c *float32, ldc int, beta int)
//
// kernelAVX512 on operands read where they lie instead of from packed panels: step p reads
// A's 12 elements at a + r*asr + p*ask (r = 0..11) and B's 32 at b + p*bsk, all strides in
// elements. A packed panel is asr = 1, ask = 12 and bsk = 32; a row-major A block is asr = lda,
// ask = 1, a transposed one asr = 1, ask = lda, and a row-major B block bsk = ldb. Each step does
// the same FMAs in the same order as kernelAVX512, so the results are the same bits.
//
// The 12 rows are addressed from four base registers, a + {0, 3, 6, 9}·asr (AX, R9, R10, R11),
// and SI = asr in bytes as a scaled index: rows 1, 2, 4 and 8 are AX + SI·{1, 2, 4, 8}, rows 5,
// 7 and 11 are R9 + SI·{2, 4, 8}, row 10 is R10 + SI·4. Each step adds ask to the four bases and
// bsk to b.
TEXT ·kernelAVX512Strided(SB), NOSPLIT, $0-72
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ asr+16(FP), SI
	SHLQ $2, SI
	MOVQ ask+24(FP), R13
	SHLQ $2, R13
	MOVQ b+32(FP), BX
	MOVQ bsk+40(FP), R12
	SHLQ $2, R12
	MOVQ c+48(FP), DI
	MOVQ ldc+56(FP), DX
	SHLQ $2, DX
	MOVQ beta+64(FP), R8
	LEAQ (AX)(SI*2), R9
	ADDQ SI, R9
	LEAQ (R9)(SI*2), R10
	ADDQ SI, R10
	LEAQ (R10)(SI*2), R11
	ADDQ SI, R11
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	TESTQ CX, CX
	JZ    stridedstore
stridedloop:
	VMOVUPS (BX), Z24
	VMOVUPS 64(BX), Z25
	VBROADCASTSS (AX), Z26
	VFMADD231PS Z24, Z26, Z0
	VFMADD231PS Z25, Z26, Z1
	VBROADCASTSS (AX)(SI*1), Z27
	VFMADD231PS Z24, Z27, Z2
	VFMADD231PS Z25, Z27, Z3
	VBROADCASTSS (AX)(SI*2), Z28
	VFMADD231PS Z24, Z28, Z4
	VFMADD231PS Z25, Z28, Z5
	VBROADCASTSS (R9), Z29
	VFMADD231PS Z24, Z29, Z6
	VFMADD231PS Z25, Z29, Z7
	VBROADCASTSS (AX)(SI*4), Z30
	VFMADD231PS Z24, Z30, Z8
	VFMADD231PS Z25, Z30, Z9
	VBROADCASTSS (R9)(SI*2), Z31
	VFMADD231PS Z24, Z31, Z10
	VFMADD231PS Z25, Z31, Z11
	VBROADCASTSS (R10), Z26
	VFMADD231PS Z24, Z26, Z12
	VFMADD231PS Z25, Z26, Z13
	VBROADCASTSS (R9)(SI*4), Z27
	VFMADD231PS Z24, Z27, Z14
	VFMADD231PS Z25, Z27, Z15
	VBROADCASTSS (AX)(SI*8), Z28
	VFMADD231PS Z24, Z28, Z16
	VFMADD231PS Z25, Z28, Z17
	VBROADCASTSS (R11), Z29
	VFMADD231PS Z24, Z29, Z18
	VFMADD231PS Z25, Z29, Z19
	VBROADCASTSS (R10)(SI*4), Z30
	VFMADD231PS Z24, Z30, Z20
	VFMADD231PS Z25, Z30, Z21
	VBROADCASTSS (R9)(SI*8), Z31
	VFMADD231PS Z24, Z31, Z22
	VFMADD231PS Z25, Z31, Z23
	ADDQ R13, AX
	ADDQ R13, R9
	ADDQ R13, R10
	ADDQ R13, R11
	ADDQ R12, BX
	DECQ CX
	JNZ  stridedloop
stridedstore:
	TESTQ R8, R8
	JZ    stridedoverwrite
	VADDPS (DI), Z0, Z0
	VADDPS 64(DI), Z1, Z1
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	ADDQ DX, DI
	VADDPS (DI), Z2, Z2
	VADDPS 64(DI), Z3, Z3
	VMOVUPS Z2, (DI)
	VMOVUPS Z3, 64(DI)
	ADDQ DX, DI
	VADDPS (DI), Z4, Z4
	VADDPS 64(DI), Z5, Z5
	VMOVUPS Z4, (DI)
	VMOVUPS Z5, 64(DI)
	ADDQ DX, DI
	VADDPS (DI), Z6, Z6
	VADDPS 64(DI), Z7, Z7
	VMOVUPS Z6, (DI)
	VMOVUPS Z7, 64(DI)
	ADDQ DX, DI
	VADDPS (DI), Z8, Z8
	VADDPS 64(DI), Z9, Z9
	VMOVUPS Z8, (DI)
	VMOVUPS Z9, 64(DI)
	ADDQ DX, DI
	VADDPS (DI), Z10, Z10
	VADDPS 64(DI), Z11, Z11
	VMOVUPS Z10, (DI)
	VMOVUPS Z11, 64(DI)
	ADDQ DX, DI
	VADDPS (DI), Z12, Z12
	VADDPS 64(DI), Z13, Z13
	VMOVUPS Z12, (DI)
	VMOVUPS Z13, 64(DI)
	ADDQ DX, DI
	VADDPS (DI), Z14, Z14
	VADDPS 64(DI), Z15, Z15
	VMOVUPS Z14, (DI)
	VMOVUPS Z15, 64(DI)
	ADDQ DX, DI
	VADDPS (DI), Z16, Z16
	VADDPS 64(DI), Z17, Z17
	VMOVUPS Z16, (DI)
	VMOVUPS Z17, 64(DI)
	ADDQ DX, DI
	VADDPS (DI), Z18, Z18
	VADDPS 64(DI), Z19, Z19
	VMOVUPS Z18, (DI)
	VMOVUPS Z19, 64(DI)
	ADDQ DX, DI
	VADDPS (DI), Z20, Z20
	VADDPS 64(DI), Z21, Z21
	VMOVUPS Z20, (DI)
	VMOVUPS Z21, 64(DI)
	ADDQ DX, DI
	VADDPS (DI), Z22, Z22
	VADDPS 64(DI), Z23, Z23
	VMOVUPS Z22, (DI)
	VMOVUPS Z23, 64(DI)
	ADDQ DX, DI
	VZEROUPPER
	RET
stridedoverwrite:
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	ADDQ DX, DI
	VMOVUPS Z2, (DI)
	VMOVUPS Z3, 64(DI)
	ADDQ DX, DI
	VMOVUPS Z4, (DI)
	VMOVUPS Z5, 64(DI)
	ADDQ DX, DI
	VMOVUPS Z6, (DI)
	VMOVUPS Z7, 64(DI)
	ADDQ DX, DI
	VMOVUPS Z8, (DI)
	VMOVUPS Z9, 64(DI)
	ADDQ DX, DI
	VMOVUPS Z10, (DI)
	VMOVUPS Z11, 64(DI)
	ADDQ DX, DI
	VMOVUPS Z12, (DI)
	VMOVUPS Z13, 64(DI)
	ADDQ DX, DI
	VMOVUPS Z14, (DI)
	VMOVUPS Z15, 64(DI)
	ADDQ DX, DI
	VMOVUPS Z16, (DI)
	VMOVUPS Z17, 64(DI)
	ADDQ DX, DI
	VMOVUPS Z18, (DI)
	VMOVUPS Z19, 64(DI)
	ADDQ DX, DI
	VMOVUPS Z20, (DI)
	VMOVUPS Z21, 64(DI)
	ADDQ DX, DI
	VMOVUPS Z22, (DI)
	VMOVUPS Z23, 64(DI)
	ADDQ DX, DI
	VZEROUPPER
	RET

// func prefetchRows(p *float32, off, rows, stride, lines int)
//
// PREFETCHT0 of lines cache lines from each of rows rows stride bytes apart, the first at
// p + off bytes: the operand a direct tile reads next, fetched while the current tiles compute.
TEXT ·prefetchRows(SB), NOSPLIT, $0-40
	MOVQ p+0(FP), AX
	ADDQ off+8(FP), AX
	MOVQ rows+16(FP), CX
	MOVQ stride+24(FP), DX
	MOVQ lines+32(FP), BX
	TESTQ CX, CX
	JZ    prefetchdone
	TESTQ BX, BX
	JZ    prefetchdone
prefetchrow:
	MOVQ AX, SI
	MOVQ BX, DI
prefetchline:
	PREFETCHT0 (SI)
	ADDQ $64, SI
	DECQ DI
	JNZ  prefetchline
	ADDQ DX, AX
	DECQ CX
	JNZ  prefetchrow
prefetchdone:
	RET
