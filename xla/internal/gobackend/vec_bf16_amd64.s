//go:build amd64 && !purego

#include "textflag.h"

// bfloat16 conversion kernels for fusions (bf16.go): 32 elements per iteration, then 8 or 16,
// then one at a time. They move bits only (no floating-point arithmetic), so they give exactly
// the portable loops' results, NaNs included.

// func widenBF16AVX2(dst *float32, src *uint16, n int)
// dst[i] = float32 with the bits src[i] << 16.
TEXT ·widenBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
widen32:
	CMPQ CX, $32
	JL   widen8
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPMOVZXWD 32(SI), Y2
	VPMOVZXWD 48(SI), Y3
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VPSLLD    $16, Y2, Y2
	VPSLLD    $16, Y3, Y3
	VMOVDQU   Y0, (DI)
	VMOVDQU   Y1, 32(DI)
	VMOVDQU   Y2, 64(DI)
	VMOVDQU   Y3, 96(DI)
	ADDQ      $64, SI
	ADDQ      $128, DI
	SUBQ      $32, CX
	JMP       widen32
widen8:
	CMPQ CX, $8
	JL   widentail
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	SUBQ      $8, CX
	JMP       widen8
widentail:
	CMPQ    CX, $0
	JE      widendone
	MOVWLZX (SI), AX
	SHLL    $16, AX
	MOVL    AX, (DI)
	ADDQ    $2, SI
	ADDQ    $4, DI
	DECQ    CX
	JMP     widentail
widendone:
	VZEROUPPER
	RET

// func narrowBF16AVX2(dst *uint16, src *float32, n int)
// dst[i] = the upper 16 bits of src[i] (simplego's truncation). VPACKUSDW packs within each
// 128-bit lane, so VPERMQ puts the four quarter results back in order.
TEXT ·narrowBF16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
narrow32:
	CMPQ CX, $32
	JL   narrow16
	VMOVDQU   (SI), Y0
	VMOVDQU   32(SI), Y1
	VMOVDQU   64(SI), Y2
	VMOVDQU   96(SI), Y3
	VPSRLD    $16, Y0, Y0
	VPSRLD    $16, Y1, Y1
	VPSRLD    $16, Y2, Y2
	VPSRLD    $16, Y3, Y3
	VPACKUSDW Y1, Y0, Y0
	VPACKUSDW Y3, Y2, Y2
	VPERMQ    $0xd8, Y0, Y0
	VPERMQ    $0xd8, Y2, Y2
	VMOVDQU   Y0, (DI)
	VMOVDQU   Y2, 32(DI)
	ADDQ      $128, SI
	ADDQ      $64, DI
	SUBQ      $32, CX
	JMP       narrow32
narrow16:
	CMPQ CX, $16
	JL   narrowtail
	VMOVDQU   (SI), Y0
	VMOVDQU   32(SI), Y1
	VPSRLD    $16, Y0, Y0
	VPSRLD    $16, Y1, Y1
	VPACKUSDW Y1, Y0, Y0
	VPERMQ    $0xd8, Y0, Y0
	VMOVDQU   Y0, (DI)
	ADDQ      $64, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JMP       narrow16
narrowtail:
	CMPQ CX, $0
	JE   narrowdone
	MOVL (SI), AX
	SHRL $16, AX
	MOVW AX, (DI)
	ADDQ $4, SI
	ADDQ $2, DI
	DECQ CX
	JMP  narrowtail
narrowdone:
	VZEROUPPER
	RET

// Binary operations whose result is bfloat16: dst[i] = (a[i] OP b[i]) with the lower 16 bits
// cleared, the float32 operation and simplego's truncation in one pass (see BINOP in
// vec_amd64.s, whose arithmetic this is). dst may be a or b (same index).
#define BINOPBF16(NAME, PS, SS) \
TEXT NAME(SB), NOSPLIT, $0-32 \
	MOVQ         dst+0(FP), DI \
	MOVQ         a+8(FP), SI \
	MOVQ         b+16(FP), DX \
	MOVQ         n+24(FP), CX \
	MOVL         $-65536, AX \
	VMOVD        AX, X15 \
	VPBROADCASTD X15, Y15 \
loop32: \
	CMPQ    CX, $32 \
	JL      loop8 \
	VMOVUPS (SI), Y0 \
	VMOVUPS 32(SI), Y1 \
	VMOVUPS 64(SI), Y2 \
	VMOVUPS 96(SI), Y3 \
	PS      (DX), Y0, Y0 \
	PS      32(DX), Y1, Y1 \
	PS      64(DX), Y2, Y2 \
	PS      96(DX), Y3, Y3 \
	VPAND   Y15, Y0, Y0 \
	VPAND   Y15, Y1, Y1 \
	VPAND   Y15, Y2, Y2 \
	VPAND   Y15, Y3, Y3 \
	VMOVUPS Y0, (DI) \
	VMOVUPS Y1, 32(DI) \
	VMOVUPS Y2, 64(DI) \
	VMOVUPS Y3, 96(DI) \
	ADDQ    $128, SI \
	ADDQ    $128, DX \
	ADDQ    $128, DI \
	SUBQ    $32, CX \
	JMP     loop32 \
loop8: \
	CMPQ    CX, $8 \
	JL      tail \
	VMOVUPS (SI), Y0 \
	PS      (DX), Y0, Y0 \
	VPAND   Y15, Y0, Y0 \
	VMOVUPS Y0, (DI) \
	ADDQ    $32, SI \
	ADDQ    $32, DX \
	ADDQ    $32, DI \
	SUBQ    $8, CX \
	JMP     loop8 \
tail: \
	CMPQ   CX, $0 \
	JE     done \
	VMOVSS (SI), X0 \
	SS     (DX), X0, X0 \
	VPAND  X15, X0, X0 \
	VMOVSS X0, (DI) \
	ADDQ   $4, SI \
	ADDQ   $4, DX \
	ADDQ   $4, DI \
	DECQ   CX \
	JMP    tail \
done: \
	VZEROUPPER \
	RET

// func addBF16AVX2(dst, a, b *float32, n int)
BINOPBF16(·addBF16AVX2, VADDPS, VADDSS)

// func subBF16AVX2(dst, a, b *float32, n int)
BINOPBF16(·subBF16AVX2, VSUBPS, VSUBSS)

// func mulBF16AVX2(dst, a, b *float32, n int)
BINOPBF16(·mulBF16AVX2, VMULPS, VMULSS)

// func divBF16AVX2(dst, a, b *float32, n int)
BINOPBF16(·divBF16AVX2, VDIVPS, VDIVSS)
