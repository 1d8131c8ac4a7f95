//go:build amd64 && !purego

#include "textflag.h"

// EQ_SETUP loads the arguments of the equality kernels (dst in DI, a in SI, b in DX, the number
// of 16-element steps in CX) and sets X4 to sixteen bytes of 1 and X3 to sixteen bytes of ne.
#define EQ_SETUP \
	MOVQ dst+0(FP), DI; \
	MOVQ a+8(FP), SI; \
	MOVQ b+16(FP), DX; \
	MOVQ n+24(FP), CX; \
	MOVQ ne+32(FP), AX; \
	MOVQ $0x0101010101010101, BX; \
	MOVQ BX, X4; \
	VPBROADCASTQ X4, X4; \
	IMULQ AX, BX; \
	MOVQ BX, X3; \
	VPBROADCASTQ X3, X3; \
	SHRQ $4, CX

// EQ_STORE turns the 16 comparisons in K1 into Go bools at DI (0xff/0 masked to 1/0, flipped
// by X3) and moves SI, DX and DI to the next 16 elements.
#define EQ_STORE \
	VPMOVM2B K1, X1; \
	VPAND X4, X1, X1; \
	VPXOR X3, X1, X1; \
	VMOVDQU X1, (DI); \
	ADDQ $64, SI; \
	ADDQ $64, DX; \
	ADDQ $16, DI

// func eqI32AVX512(dst *bool, a, b *int32, n int, ne int)
//
// dst[i] = a[i] == b[i] (ne = 0) or a[i] != b[i] (ne = 1), 16 elements a step: the
// comparison's mask becomes 16 bytes of 0 or 0xff (VPMOVM2B), masked to 0 or 1 (Go's bools)
// and flipped for ne. n is a multiple of 16.
TEXT ·eqI32AVX512(SB), NOSPLIT, $0-40
	EQ_SETUP
	JZ   eqi32done
eqi32loop:
	VMOVDQU32 (SI), Z0
	VPCMPEQD (DX), Z0, K1
	EQ_STORE
	DECQ CX
	JNZ  eqi32loop
eqi32done:
	VZEROUPPER
	RET

// func eqF32AVX512(dst *bool, a, b *float32, n int, ne int)
//
// eqI32AVX512 for float32 with Go's semantics: equal is ordered (a NaN equals nothing, and
// -0 equals +0: VCMPPS's EQ_OQ), and not-equal is its negation.
TEXT ·eqF32AVX512(SB), NOSPLIT, $0-40
	EQ_SETUP
	JZ   eqf32done
eqf32loop:
	VMOVUPS (SI), Z0
	VCMPPS $0, (DX), Z0, K1
	EQ_STORE
	DECQ CX
	JNZ  eqf32loop
eqf32done:
	VZEROUPPER
	RET
