//go:build amd64 && !purego

#include "textflag.h"
#include "tile_amd64.h"

// STRIDED_ROW broadcasts A's element at addr into bc and adds its products with the B row (Z24,
// Z25) into the tile row lo, hi.
#define STRIDED_ROW(addr, bc, lo, hi) \
	VBROADCASTSS addr, bc; \
	VFMADD231PS Z24, bc, lo; \
	VFMADD231PS Z25, bc, hi

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
	TILE_ZERO
	TESTQ CX, CX
	JZ    stridedstore
stridedloop:
	VMOVUPS (BX), Z24
	VMOVUPS 64(BX), Z25
	STRIDED_ROW((AX), Z26, Z0, Z1)
	STRIDED_ROW((AX)(SI*1), Z27, Z2, Z3)
	STRIDED_ROW((AX)(SI*2), Z28, Z4, Z5)
	STRIDED_ROW((R9), Z29, Z6, Z7)
	STRIDED_ROW((AX)(SI*4), Z30, Z8, Z9)
	STRIDED_ROW((R9)(SI*2), Z31, Z10, Z11)
	STRIDED_ROW((R10), Z26, Z12, Z13)
	STRIDED_ROW((R9)(SI*4), Z27, Z14, Z15)
	STRIDED_ROW((AX)(SI*8), Z28, Z16, Z17)
	STRIDED_ROW((R11), Z29, Z18, Z19)
	STRIDED_ROW((R10)(SI*4), Z30, Z20, Z21)
	STRIDED_ROW((R9)(SI*8), Z31, Z22, Z23)
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
	TILE_ADD
	VZEROUPPER
	RET
stridedoverwrite:
	TILE_STORE
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
