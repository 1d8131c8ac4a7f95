//go:build amd64 && !purego

#include "textflag.h"

// Elementwise float32 kernels for fusions (vec_amd64.go): dst[i] = a[i] OP b[i] for i < n,
// 32 lanes per iteration in four ymm registers, then 8, then one at a time. The packed and
// scalar instructions round exactly as Go's float32 arithmetic does, so results are bitwise
// those of the portable loops. dst may be a or b (same index), never a partial overlap.

#define BINOP(NAME, PS, SS) \
TEXT NAME(SB), NOSPLIT, $0-32 \
	MOVQ dst+0(FP), DI \
	MOVQ a+8(FP), SI \
	MOVQ b+16(FP), DX \
	MOVQ n+24(FP), CX \
loop32: \
	CMPQ CX, $32 \
	JL   loop8 \
	VMOVUPS (SI), Y0 \
	VMOVUPS 32(SI), Y1 \
	VMOVUPS 64(SI), Y2 \
	VMOVUPS 96(SI), Y3 \
	PS   (DX), Y0, Y0 \
	PS   32(DX), Y1, Y1 \
	PS   64(DX), Y2, Y2 \
	PS   96(DX), Y3, Y3 \
	VMOVUPS Y0, (DI) \
	VMOVUPS Y1, 32(DI) \
	VMOVUPS Y2, 64(DI) \
	VMOVUPS Y3, 96(DI) \
	ADDQ $128, SI \
	ADDQ $128, DX \
	ADDQ $128, DI \
	SUBQ $32, CX \
	JMP  loop32 \
loop8: \
	CMPQ CX, $8 \
	JL   tail \
	VMOVUPS (SI), Y0 \
	PS   (DX), Y0, Y0 \
	VMOVUPS Y0, (DI) \
	ADDQ $32, SI \
	ADDQ $32, DX \
	ADDQ $32, DI \
	SUBQ $8, CX \
	JMP  loop8 \
tail: \
	CMPQ CX, $0 \
	JE   done \
	VMOVSS (SI), X0 \
	SS   (DX), X0, X0 \
	VMOVSS X0, (DI) \
	ADDQ $4, SI \
	ADDQ $4, DX \
	ADDQ $4, DI \
	DECQ CX \
	JMP  tail \
done: \
	VZEROUPPER \
	RET

// func addF32AVX2(dst, a, b *float32, n int)
BINOP(·addF32AVX2, VADDPS, VADDSS)

// func subF32AVX2(dst, a, b *float32, n int)
BINOP(·subF32AVX2, VSUBPS, VSUBSS)

// func mulF32AVX2(dst, a, b *float32, n int)
BINOP(·mulF32AVX2, VMULPS, VMULSS)

// func divF32AVX2(dst, a, b *float32, n int)
BINOP(·divF32AVX2, VDIVPS, VDIVSS)
