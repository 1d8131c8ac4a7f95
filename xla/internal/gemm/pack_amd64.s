//go:build amd64 && !purego

// Packing kernels for bfloat16 inputs: the pair-interleaved panels of the
// AVX512-BF16 kernel (see packPairs in pack.go for the layout) and the
// widened float32 panels of the other kernels (packBF16). They handle the
// bulk of a block; pack_amd64.go leaves edge panels, the last step of an odd
// kb and the steps after the last whole transpose chunk to the Go code.

#include "textflag.h"

// func pairsInterleave(dst *uint32, src *uint16, steps, sp, w int, m0, m1 uint32, np, pstride int)
//
// Packs np consecutive full panels of w <= 32 values along x, panel t's x
// starting at src[t*w] and its packed panel at dst[t*pstride]: for q in
// [0, steps), dst[t*pstride + q*w + x] = src[t*w + 2q*sp + x]<<16 |
// src[t*w + (2q+1)*sp + x]. m0 and m1 mask the valid lanes of the two
// 16-lane chunks of a panel ((1<<min(w,16))-1 and (1<<max(w-16,0))-1): masked
// loads and stores never touch memory outside the w values and dwords.
//
// The loop is steps outer, panels inner: a pair of k rows is read once across
// the np panels, so a group of narrow panels consumes whole cache lines of
// the two rows instead of re-reading them (k rows a multiple of a few
// hundred bytes apart fall into a few L1 sets, so a panel at a time re-read
// each line from L2 and measured 1.5-2.7x slower at w = 12 for leading
// dimensions 768, 1000 and 4096).
TEXT ·pairsInterleave(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ steps+16(FP), CX
	MOVQ sp+24(FP), DX
	SHLQ $1, DX               // bytes between k rows
	MOVQ w+32(FP), R8
	LEAQ (R8)(R8*1), R13      // bytes of w values
	SHLQ $2, R8               // bytes between packed steps
	LEAQ (DX)(DX*1), R9       // bytes between k-row pairs
	MOVL m0+40(FP), AX
	KMOVD AX, K1
	MOVL m1+44(FP), BX
	KMOVD BX, K2
	MOVQ pstride+56(FP), R12
	SHLQ $2, R12              // bytes between packed panels
	TESTQ CX, CX
	JZ   ildone
	TESTL BX, BX
	JZ   iq16
iq32:
	MOVQ np+48(FP), BX
	MOVQ SI, R10
	MOVQ DI, R11
it32:
	VMOVDQU16.Z (R10), K1, Y0
	VMOVDQU16.Z (R10)(DX*1), K1, Y1
	VMOVDQU16.Z 32(R10), K2, Y2
	VMOVDQU16.Z 32(R10)(DX*1), K2, Y3
	VPMOVZXWD Y0, Z0
	VPMOVZXWD Y1, Z1
	VPMOVZXWD Y2, Z2
	VPMOVZXWD Y3, Z3
	VPSLLD $16, Z0, Z0
	VPSLLD $16, Z2, Z2
	VPORD Z1, Z0, Z0
	VPORD Z3, Z2, Z2
	VMOVDQU32 Z0, K1, (R11)
	VMOVDQU32 Z2, K2, 64(R11)
	ADDQ R13, R10
	ADDQ R12, R11
	DECQ BX
	JNZ  it32
	ADDQ R9, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  iq32
	JMP  ildone
iq16:
	MOVQ np+48(FP), BX
	MOVQ SI, R10
	MOVQ DI, R11
it16:
	VMOVDQU16.Z (R10), K1, Y0
	VMOVDQU16.Z (R10)(DX*1), K1, Y1
	VPMOVZXWD Y0, Z0
	VPMOVZXWD Y1, Z1
	VPSLLD $16, Z0, Z0
	VPORD Z1, Z0, Z0
	VMOVDQU32 Z0, K1, (R11)
	ADDQ R13, R10
	ADDQ R12, R11
	DECQ BX
	JNZ  it16
	ADDQ R9, SI
	ADDQ R8, DI
	DECQ CX
	JNZ  iq16
ildone:
	VZEROUPPER
	RET

// TRANSPOSE_16X16 transposes the 16×16 dword block in Z0-Z15 (row i in Z(i))
// into Z0-Z15 (column c in Z(c)) with the usual four shuffle stages: dwords
// (T in Z16-Z31), qwords (U in Z0-Z15: U[4h+j] holds column 4L+j of rows
// 4h..4h+3 in each 128-bit lane L), then 128-bit lanes twice (V, W in
// Z16-Z31, then the columns in Z0-Z15).
#define TRANSPOSE_16X16 \
	VPUNPCKLDQ Z1, Z0, Z16; \
	VPUNPCKHDQ Z1, Z0, Z17; \
	VPUNPCKLDQ Z3, Z2, Z18; \
	VPUNPCKHDQ Z3, Z2, Z19; \
	VPUNPCKLDQ Z5, Z4, Z20; \
	VPUNPCKHDQ Z5, Z4, Z21; \
	VPUNPCKLDQ Z7, Z6, Z22; \
	VPUNPCKHDQ Z7, Z6, Z23; \
	VPUNPCKLDQ Z9, Z8, Z24; \
	VPUNPCKHDQ Z9, Z8, Z25; \
	VPUNPCKLDQ Z11, Z10, Z26; \
	VPUNPCKHDQ Z11, Z10, Z27; \
	VPUNPCKLDQ Z13, Z12, Z28; \
	VPUNPCKHDQ Z13, Z12, Z29; \
	VPUNPCKLDQ Z15, Z14, Z30; \
	VPUNPCKHDQ Z15, Z14, Z31; \
	VPUNPCKLQDQ Z18, Z16, Z0; \
	VPUNPCKHQDQ Z18, Z16, Z1; \
	VPUNPCKLQDQ Z19, Z17, Z2; \
	VPUNPCKHQDQ Z19, Z17, Z3; \
	VPUNPCKLQDQ Z22, Z20, Z4; \
	VPUNPCKHQDQ Z22, Z20, Z5; \
	VPUNPCKLQDQ Z23, Z21, Z6; \
	VPUNPCKHQDQ Z23, Z21, Z7; \
	VPUNPCKLQDQ Z26, Z24, Z8; \
	VPUNPCKHQDQ Z26, Z24, Z9; \
	VPUNPCKLQDQ Z27, Z25, Z10; \
	VPUNPCKHQDQ Z27, Z25, Z11; \
	VPUNPCKLQDQ Z30, Z28, Z12; \
	VPUNPCKHQDQ Z30, Z28, Z13; \
	VPUNPCKLQDQ Z31, Z29, Z14; \
	VPUNPCKHQDQ Z31, Z29, Z15; \
	VSHUFI32X4 $0x88, Z4, Z0, Z16; \
	VSHUFI32X4 $0xdd, Z4, Z0, Z20; \
	VSHUFI32X4 $0x88, Z12, Z8, Z24; \
	VSHUFI32X4 $0xdd, Z12, Z8, Z28; \
	VSHUFI32X4 $0x88, Z5, Z1, Z17; \
	VSHUFI32X4 $0xdd, Z5, Z1, Z21; \
	VSHUFI32X4 $0x88, Z13, Z9, Z25; \
	VSHUFI32X4 $0xdd, Z13, Z9, Z29; \
	VSHUFI32X4 $0x88, Z6, Z2, Z18; \
	VSHUFI32X4 $0xdd, Z6, Z2, Z22; \
	VSHUFI32X4 $0x88, Z14, Z10, Z26; \
	VSHUFI32X4 $0xdd, Z14, Z10, Z30; \
	VSHUFI32X4 $0x88, Z7, Z3, Z19; \
	VSHUFI32X4 $0xdd, Z7, Z3, Z23; \
	VSHUFI32X4 $0x88, Z15, Z11, Z27; \
	VSHUFI32X4 $0xdd, Z15, Z11, Z31; \
	VSHUFI32X4 $0x88, Z24, Z16, Z0; \
	VSHUFI32X4 $0xdd, Z24, Z16, Z8; \
	VSHUFI32X4 $0x88, Z28, Z20, Z4; \
	VSHUFI32X4 $0xdd, Z28, Z20, Z12; \
	VSHUFI32X4 $0x88, Z25, Z17, Z1; \
	VSHUFI32X4 $0xdd, Z25, Z17, Z9; \
	VSHUFI32X4 $0x88, Z29, Z21, Z5; \
	VSHUFI32X4 $0xdd, Z29, Z21, Z13; \
	VSHUFI32X4 $0x88, Z26, Z18, Z2; \
	VSHUFI32X4 $0xdd, Z26, Z18, Z10; \
	VSHUFI32X4 $0x88, Z30, Z22, Z6; \
	VSHUFI32X4 $0xdd, Z30, Z22, Z14; \
	VSHUFI32X4 $0x88, Z27, Z19, Z3; \
	VSHUFI32X4 $0xdd, Z27, Z19, Z11; \
	VSHUFI32X4 $0x88, Z31, Z23, Z7; \
	VSHUFI32X4 $0xdd, Z31, Z23, Z15

// STORE_16X16 stores Z0-Z15 as 16 panel steps under mask K1: Z(i) at DI + i*R12 (R12 the
// bytes between steps, R14 = 3*R12), and leaves DI 16 steps further on.
#define STORE_16X16 \
	VMOVDQU32 Z0, K1, (DI); \
	VMOVDQU32 Z1, K1, (DI)(R12*1); \
	VMOVDQU32 Z2, K1, (DI)(R12*2); \
	VMOVDQU32 Z3, K1, (DI)(R14*1); \
	LEAQ (DI)(R12*4), DI; \
	VMOVDQU32 Z4, K1, (DI); \
	VMOVDQU32 Z5, K1, (DI)(R12*1); \
	VMOVDQU32 Z6, K1, (DI)(R12*2); \
	VMOVDQU32 Z7, K1, (DI)(R14*1); \
	LEAQ (DI)(R12*4), DI; \
	VMOVDQU32 Z8, K1, (DI); \
	VMOVDQU32 Z9, K1, (DI)(R12*1); \
	VMOVDQU32 Z10, K1, (DI)(R12*2); \
	VMOVDQU32 Z11, K1, (DI)(R14*1); \
	LEAQ (DI)(R12*4), DI; \
	VMOVDQU32 Z12, K1, (DI); \
	VMOVDQU32 Z13, K1, (DI)(R12*1); \
	VMOVDQU32 Z14, K1, (DI)(R12*2); \
	VMOVDQU32 Z15, K1, (DI)(R14*1); \
	LEAQ (DI)(R12*4), DI

// func pairsTranspose16(dst *uint32, src *uint16, rows, sx, chunks, w int, mask, swap uint32)
//
// Packs up to 16 x-rows that are contiguous along k: row i (i < rows) starts
// at src[i*sx], and its dword q (bfloat16 values 2q, 2q+1), halves swapped
// (2q high) when swap is not 0, goes to dst[q*w + i], for q in [0, 16*chunks);
// rows i >= rows are stored as zero. Without the swap it transposes any
// dwords: packF32's k-contiguous float32 panels (transpose16F32).
// Each chunk loads 16 dwords of every row, transposes the 16×16 block and
// stores output row q's first lanes under mask (16, or 12 for a 12-wide
// panel). Every row's cache line is consumed whole by one chunk.
TEXT ·pairsTranspose16(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ sx+24(FP), DX
	SHLQ $1, DX               // bytes between rows
	MOVQ chunks+32(FP), CX
	MOVQ w+40(FP), R12
	SHLQ $2, R12              // bytes between output rows
	MOVL mask+48(FP), AX
	KMOVW AX, K1
	MOVL swap+52(FP), BX
	LEAQ (DX)(DX*2), R9       // 3 rows
	LEAQ (DX)(DX*4), R10      // 5 rows
	LEAQ (R9)(DX*4), R11      // 7 rows
	LEAQ (SI)(DX*8), R13      // row 8
	LEAQ (R12)(R12*2), R14    // 3 output rows
	TESTQ CX, CX
	JZ   tdone
tchunk:
	// Load rows [0, rows) and fall through the zeroing of the others.
	TESTQ R8, R8
	JZ   tz0
	VMOVDQU32 (SI), Z0
	CMPQ R8, $1
	JLE  tz1
	VMOVDQU32 (SI)(DX*1), Z1
	CMPQ R8, $2
	JLE  tz2
	VMOVDQU32 (SI)(DX*2), Z2
	CMPQ R8, $3
	JLE  tz3
	VMOVDQU32 (SI)(R9*1), Z3
	CMPQ R8, $4
	JLE  tz4
	VMOVDQU32 (SI)(DX*4), Z4
	CMPQ R8, $5
	JLE  tz5
	VMOVDQU32 (SI)(R10*1), Z5
	CMPQ R8, $6
	JLE  tz6
	VMOVDQU32 (SI)(R9*2), Z6
	CMPQ R8, $7
	JLE  tz7
	VMOVDQU32 (SI)(R11*1), Z7
	CMPQ R8, $8
	JLE  tz8
	VMOVDQU32 (R13), Z8
	CMPQ R8, $9
	JLE  tz9
	VMOVDQU32 (R13)(DX*1), Z9
	CMPQ R8, $10
	JLE  tz10
	VMOVDQU32 (R13)(DX*2), Z10
	CMPQ R8, $11
	JLE  tz11
	VMOVDQU32 (R13)(R9*1), Z11
	CMPQ R8, $12
	JLE  tz12
	VMOVDQU32 (R13)(DX*4), Z12
	CMPQ R8, $13
	JLE  tz13
	VMOVDQU32 (R13)(R10*1), Z13
	CMPQ R8, $14
	JLE  tz14
	VMOVDQU32 (R13)(R9*2), Z14
	CMPQ R8, $15
	JLE  tz15
	VMOVDQU32 (R13)(R11*1), Z15
	JMP  tloaded
tz0:
	VPXORD Z0, Z0, Z0
tz1:
	VPXORD Z1, Z1, Z1
tz2:
	VPXORD Z2, Z2, Z2
tz3:
	VPXORD Z3, Z3, Z3
tz4:
	VPXORD Z4, Z4, Z4
tz5:
	VPXORD Z5, Z5, Z5
tz6:
	VPXORD Z6, Z6, Z6
tz7:
	VPXORD Z7, Z7, Z7
tz8:
	VPXORD Z8, Z8, Z8
tz9:
	VPXORD Z9, Z9, Z9
tz10:
	VPXORD Z10, Z10, Z10
tz11:
	VPXORD Z11, Z11, Z11
tz12:
	VPXORD Z12, Z12, Z12
tz13:
	VPXORD Z13, Z13, Z13
tz14:
	VPXORD Z14, Z14, Z14
tz15:
	VPXORD Z15, Z15, Z15
tloaded:
	TRANSPOSE_16X16
	// A dword read from memory holds value 2q in its low half; the panels hold it
	// in the high half (packPairs), so swap the halves.
	TESTL BX, BX
	JZ   tswapped
	VPRORD $16, Z0, Z0
	VPRORD $16, Z1, Z1
	VPRORD $16, Z2, Z2
	VPRORD $16, Z3, Z3
	VPRORD $16, Z4, Z4
	VPRORD $16, Z5, Z5
	VPRORD $16, Z6, Z6
	VPRORD $16, Z7, Z7
	VPRORD $16, Z8, Z8
	VPRORD $16, Z9, Z9
	VPRORD $16, Z10, Z10
	VPRORD $16, Z11, Z11
	VPRORD $16, Z12, Z12
	VPRORD $16, Z13, Z13
	VPRORD $16, Z14, Z14
	VPRORD $16, Z15, Z15
tswapped:
	STORE_16X16
	ADDQ $64, SI
	ADDQ $64, R13
	DECQ CX
	JNZ  tchunk
tdone:
	VZEROUPPER
	RET

// func widenTranspose16(dst *float32, src *uint16, rows, sx, chunks, w int, mask uint32)
//
// The widening counterpart of pairsTranspose16, for packBF16 with sp == 1:
// row i (i < rows) starts at src[i*sx], and its value p goes, as float32, to
// dst[p*w + i], for p in [0, 16*chunks); rows i >= rows are stored as zero.
// Each chunk widens 16 values of every row to dwords (VPMOVZXWD, VPSLLD 16:
// a bfloat16 is the upper half of its float32), transposes them and stores
// output row p's first lanes under mask.
TEXT ·widenTranspose16(SB), NOSPLIT, $0-52
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ rows+16(FP), R8
	MOVQ sx+24(FP), DX
	SHLQ $1, DX               // bytes between rows
	MOVQ chunks+32(FP), CX
	MOVQ w+40(FP), R12
	SHLQ $2, R12              // bytes between output rows
	MOVL mask+48(FP), AX
	KMOVW AX, K1
	LEAQ (DX)(DX*2), R9       // 3 rows
	LEAQ (DX)(DX*4), R10      // 5 rows
	LEAQ (R9)(DX*4), R11      // 7 rows
	LEAQ (SI)(DX*8), R13      // row 8
	LEAQ (R12)(R12*2), R14    // 3 output rows
	TESTQ CX, CX
	JZ   wdone
wchunk:
	// Load rows [0, rows) and fall through the zeroing of the others.
	TESTQ R8, R8
	JZ   wz0
	VPMOVZXWD (SI), Z0
	VPSLLD $16, Z0, Z0
	CMPQ R8, $1
	JLE  wz1
	VPMOVZXWD (SI)(DX*1), Z1
	VPSLLD $16, Z1, Z1
	CMPQ R8, $2
	JLE  wz2
	VPMOVZXWD (SI)(DX*2), Z2
	VPSLLD $16, Z2, Z2
	CMPQ R8, $3
	JLE  wz3
	VPMOVZXWD (SI)(R9*1), Z3
	VPSLLD $16, Z3, Z3
	CMPQ R8, $4
	JLE  wz4
	VPMOVZXWD (SI)(DX*4), Z4
	VPSLLD $16, Z4, Z4
	CMPQ R8, $5
	JLE  wz5
	VPMOVZXWD (SI)(R10*1), Z5
	VPSLLD $16, Z5, Z5
	CMPQ R8, $6
	JLE  wz6
	VPMOVZXWD (SI)(R9*2), Z6
	VPSLLD $16, Z6, Z6
	CMPQ R8, $7
	JLE  wz7
	VPMOVZXWD (SI)(R11*1), Z7
	VPSLLD $16, Z7, Z7
	CMPQ R8, $8
	JLE  wz8
	VPMOVZXWD (R13), Z8
	VPSLLD $16, Z8, Z8
	CMPQ R8, $9
	JLE  wz9
	VPMOVZXWD (R13)(DX*1), Z9
	VPSLLD $16, Z9, Z9
	CMPQ R8, $10
	JLE  wz10
	VPMOVZXWD (R13)(DX*2), Z10
	VPSLLD $16, Z10, Z10
	CMPQ R8, $11
	JLE  wz11
	VPMOVZXWD (R13)(R9*1), Z11
	VPSLLD $16, Z11, Z11
	CMPQ R8, $12
	JLE  wz12
	VPMOVZXWD (R13)(DX*4), Z12
	VPSLLD $16, Z12, Z12
	CMPQ R8, $13
	JLE  wz13
	VPMOVZXWD (R13)(R10*1), Z13
	VPSLLD $16, Z13, Z13
	CMPQ R8, $14
	JLE  wz14
	VPMOVZXWD (R13)(R9*2), Z14
	VPSLLD $16, Z14, Z14
	CMPQ R8, $15
	JLE  wz15
	VPMOVZXWD (R13)(R11*1), Z15
	VPSLLD $16, Z15, Z15
	JMP  wloaded
wz0:
	VPXORD Z0, Z0, Z0
wz1:
	VPXORD Z1, Z1, Z1
wz2:
	VPXORD Z2, Z2, Z2
wz3:
	VPXORD Z3, Z3, Z3
wz4:
	VPXORD Z4, Z4, Z4
wz5:
	VPXORD Z5, Z5, Z5
wz6:
	VPXORD Z6, Z6, Z6
wz7:
	VPXORD Z7, Z7, Z7
wz8:
	VPXORD Z8, Z8, Z8
wz9:
	VPXORD Z9, Z9, Z9
wz10:
	VPXORD Z10, Z10, Z10
wz11:
	VPXORD Z11, Z11, Z11
wz12:
	VPXORD Z12, Z12, Z12
wz13:
	VPXORD Z13, Z13, Z13
wz14:
	VPXORD Z14, Z14, Z14
wz15:
	VPXORD Z15, Z15, Z15
wloaded:
	TRANSPOSE_16X16
	STORE_16X16
	ADDQ $32, SI
	ADDQ $32, R13
	DECQ CX
	JNZ  wchunk
wdone:
	VZEROUPPER
	RET

// func widenRowsAVX2(dst *float32, src *uint16, steps, sp, w, np, pstride int)
//
// Widens np consecutive full panels of w values along x (w a multiple of 4),
// panel t's x starting at src[t*w] and its packed panel at dst[t*pstride]:
// dst[t*pstride + p*w + x] = float32 of bfloat16 src[t*w + p*sp + x] for p in
// [0, steps). A bfloat16 is the upper half of its float32, so widening is a
// zero-extension to 32 bits and a shift into the upper half (VPMOVZXWD,
// VPSLLD), 8 values per ymm and a final 4 in an xmm. Steps outer, panels
// inner, as in pairsInterleave.
TEXT ·widenRowsAVX2(SB), NOSPLIT, $0-56
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ steps+16(FP), CX
	MOVQ sp+24(FP), DX
	SHLQ $1, DX               // bytes between k rows
	MOVQ w+32(FP), R8
	LEAQ (R8)(R8*1), R13      // bytes of w values
	MOVQ pstride+48(FP), R12
	SHLQ $2, R12              // bytes between packed panels
	MOVQ R8, R14
	SUBQ $8, R14              // last start of a whole ymm chunk
	TESTQ CX, CX
	JZ   wdone
wstep:
	MOVQ np+40(FP), BX
	MOVQ SI, R10
	MOVQ DI, R11
wpanel:
	XORQ AX, AX               // value index within the panel
	TESTQ R14, R14
	JL   wfour
w8:
	VPMOVZXWD (R10)(AX*2), Y0
	VPSLLD $16, Y0, Y0
	VMOVDQU Y0, (R11)(AX*4)
	ADDQ $8, AX
	CMPQ AX, R14
	JLE  w8
wfour:
	CMPQ AX, R8
	JGE  wnext
	VPMOVZXWD (R10)(AX*2), X0
	VPSLLD $16, X0, X0
	VMOVDQU X0, (R11)(AX*4)
wnext:
	ADDQ R13, R10
	ADDQ R12, R11
	DECQ BX
	JNZ  wpanel
	ADDQ DX, SI
	LEAQ (DI)(R8*4), DI
	DECQ CX
	JNZ  wstep
wdone:
	VZEROUPPER
	RET


// func copyPanel32(dst, src *float32, kb, sp int)
//
// packF32's copy of one full 32-wide panel with sx == 1: kb steps, each 32 contiguous values
// from src + p*sp (two zmm) to dst + p*32.
TEXT ·copyPanel32(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ kb+16(FP), CX
	MOVQ sp+24(FP), DX
	SHLQ $2, DX
	TESTQ CX, CX
	JZ   c32done
c32loop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	ADDQ DX, SI
	ADDQ $128, DI
	DECQ CX
	JNZ  c32loop
c32done:
	VZEROUPPER
	RET

// func copyPanel12(dst, src *float32, kb, sp int)
//
// copyPanel32 for a 12-wide panel: 12 values (a ymm and an xmm) per step to dst + p*12.
TEXT ·copyPanel12(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ kb+16(FP), CX
	MOVQ sp+24(FP), DX
	SHLQ $2, DX
	TESTQ CX, CX
	JZ   c12done
c12loop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), X1
	VMOVUPS Y0, (DI)
	VMOVUPS X1, 32(DI)
	ADDQ DX, SI
	ADDQ $48, DI
	DECQ CX
	JNZ  c12loop
c12done:
	VZEROUPPER
	RET
