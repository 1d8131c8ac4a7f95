//go:build amd64 && !purego

#include "textflag.h"

// The AVX-512 forms of vec_amd64.s's binary kernels: dst[i] = a[i] OP b[i] for i < n, 64 lanes
// per iteration in four zmm registers, then 16, then 8 in a ymm register, then one at a time.
// On CPUs that execute 512-bit operations at full width (Zen 5) they move twice the AVX2
// kernels' data per instruction; the packed and scalar instructions round exactly as Go's
// float32 arithmetic does, so results are bitwise those of the portable loops. dst may be a or
// b (same index), never a partial overlap.

#define BINOP512(NAME, PS, SS) \
TEXT NAME(SB), NOSPLIT, $0-32 \
	MOVQ dst+0(FP), DI \
	MOVQ a+8(FP), SI \
	MOVQ b+16(FP), DX \
	MOVQ n+24(FP), CX \
loop64: \
	CMPQ CX, $64 \
	JL   loop16 \
	VMOVUPS (SI), Z0 \
	VMOVUPS 64(SI), Z1 \
	VMOVUPS 128(SI), Z2 \
	VMOVUPS 192(SI), Z3 \
	PS   (DX), Z0, Z0 \
	PS   64(DX), Z1, Z1 \
	PS   128(DX), Z2, Z2 \
	PS   192(DX), Z3, Z3 \
	VMOVUPS Z0, (DI) \
	VMOVUPS Z1, 64(DI) \
	VMOVUPS Z2, 128(DI) \
	VMOVUPS Z3, 192(DI) \
	ADDQ $256, SI \
	ADDQ $256, DX \
	ADDQ $256, DI \
	SUBQ $64, CX \
	JMP  loop64 \
loop16: \
	CMPQ CX, $16 \
	JL   loop8 \
	VMOVUPS (SI), Z0 \
	PS   (DX), Z0, Z0 \
	VMOVUPS Z0, (DI) \
	ADDQ $64, SI \
	ADDQ $64, DX \
	ADDQ $64, DI \
	SUBQ $16, CX \
	JMP  loop16 \
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

// func addF32AVX512(dst, a, b *float32, n int)
BINOP512(·addF32AVX512, VADDPS, VADDSS)

// func subF32AVX512(dst, a, b *float32, n int)
BINOP512(·subF32AVX512, VSUBPS, VSUBSS)

// func mulF32AVX512(dst, a, b *float32, n int)
BINOP512(·mulF32AVX512, VMULPS, VMULSS)

// func divF32AVX512(dst, a, b *float32, n int)
BINOP512(·divF32AVX512, VDIVPS, VDIVSS)
