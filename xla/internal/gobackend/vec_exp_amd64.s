//go:build amd64 && !purego

#include "textflag.h"

DATA expLo<>+0(SB)/4, $0xc2d00000
DATA expLo<>+4(SB)/4, $0xc2d00000
DATA expLo<>+8(SB)/4, $0xc2d00000
DATA expLo<>+12(SB)/4, $0xc2d00000
DATA expLo<>+16(SB)/4, $0xc2d00000
DATA expLo<>+20(SB)/4, $0xc2d00000
DATA expLo<>+24(SB)/4, $0xc2d00000
DATA expLo<>+28(SB)/4, $0xc2d00000
GLOBL expLo<>(SB), RODATA|NOPTR, $32

DATA expHi<>+0(SB)/4, $0x42b1999a
DATA expHi<>+4(SB)/4, $0x42b1999a
DATA expHi<>+8(SB)/4, $0x42b1999a
DATA expHi<>+12(SB)/4, $0x42b1999a
DATA expHi<>+16(SB)/4, $0x42b1999a
DATA expHi<>+20(SB)/4, $0x42b1999a
DATA expHi<>+24(SB)/4, $0x42b1999a
DATA expHi<>+28(SB)/4, $0x42b1999a
GLOBL expHi<>(SB), RODATA|NOPTR, $32

DATA expLog2e<>+0(SB)/4, $0x3fb8aa3b
DATA expLog2e<>+4(SB)/4, $0x3fb8aa3b
DATA expLog2e<>+8(SB)/4, $0x3fb8aa3b
DATA expLog2e<>+12(SB)/4, $0x3fb8aa3b
DATA expLog2e<>+16(SB)/4, $0x3fb8aa3b
DATA expLog2e<>+20(SB)/4, $0x3fb8aa3b
DATA expLog2e<>+24(SB)/4, $0x3fb8aa3b
DATA expLog2e<>+28(SB)/4, $0x3fb8aa3b
GLOBL expLog2e<>(SB), RODATA|NOPTR, $32

DATA expHalf<>+0(SB)/4, $0x3f000000
DATA expHalf<>+4(SB)/4, $0x3f000000
DATA expHalf<>+8(SB)/4, $0x3f000000
DATA expHalf<>+12(SB)/4, $0x3f000000
DATA expHalf<>+16(SB)/4, $0x3f000000
DATA expHalf<>+20(SB)/4, $0x3f000000
DATA expHalf<>+24(SB)/4, $0x3f000000
DATA expHalf<>+28(SB)/4, $0x3f000000
GLOBL expHalf<>(SB), RODATA|NOPTR, $32

DATA expOne<>+0(SB)/4, $0x3f800000
DATA expOne<>+4(SB)/4, $0x3f800000
DATA expOne<>+8(SB)/4, $0x3f800000
DATA expOne<>+12(SB)/4, $0x3f800000
DATA expOne<>+16(SB)/4, $0x3f800000
DATA expOne<>+20(SB)/4, $0x3f800000
DATA expOne<>+24(SB)/4, $0x3f800000
DATA expOne<>+28(SB)/4, $0x3f800000
GLOBL expOne<>(SB), RODATA|NOPTR, $32

DATA expC1<>+0(SB)/4, $0x3f318000
DATA expC1<>+4(SB)/4, $0x3f318000
DATA expC1<>+8(SB)/4, $0x3f318000
DATA expC1<>+12(SB)/4, $0x3f318000
DATA expC1<>+16(SB)/4, $0x3f318000
DATA expC1<>+20(SB)/4, $0x3f318000
DATA expC1<>+24(SB)/4, $0x3f318000
DATA expC1<>+28(SB)/4, $0x3f318000
GLOBL expC1<>(SB), RODATA|NOPTR, $32

DATA expC2<>+0(SB)/4, $0xb95e8083
DATA expC2<>+4(SB)/4, $0xb95e8083
DATA expC2<>+8(SB)/4, $0xb95e8083
DATA expC2<>+12(SB)/4, $0xb95e8083
DATA expC2<>+16(SB)/4, $0xb95e8083
DATA expC2<>+20(SB)/4, $0xb95e8083
DATA expC2<>+24(SB)/4, $0xb95e8083
DATA expC2<>+28(SB)/4, $0xb95e8083
GLOBL expC2<>(SB), RODATA|NOPTR, $32

DATA expP0<>+0(SB)/4, $0x39506967
DATA expP0<>+4(SB)/4, $0x39506967
DATA expP0<>+8(SB)/4, $0x39506967
DATA expP0<>+12(SB)/4, $0x39506967
DATA expP0<>+16(SB)/4, $0x39506967
DATA expP0<>+20(SB)/4, $0x39506967
DATA expP0<>+24(SB)/4, $0x39506967
DATA expP0<>+28(SB)/4, $0x39506967
GLOBL expP0<>(SB), RODATA|NOPTR, $32

DATA expP1<>+0(SB)/4, $0x3ab743ce
DATA expP1<>+4(SB)/4, $0x3ab743ce
DATA expP1<>+8(SB)/4, $0x3ab743ce
DATA expP1<>+12(SB)/4, $0x3ab743ce
DATA expP1<>+16(SB)/4, $0x3ab743ce
DATA expP1<>+20(SB)/4, $0x3ab743ce
DATA expP1<>+24(SB)/4, $0x3ab743ce
DATA expP1<>+28(SB)/4, $0x3ab743ce
GLOBL expP1<>(SB), RODATA|NOPTR, $32

DATA expP2<>+0(SB)/4, $0x3c088908
DATA expP2<>+4(SB)/4, $0x3c088908
DATA expP2<>+8(SB)/4, $0x3c088908
DATA expP2<>+12(SB)/4, $0x3c088908
DATA expP2<>+16(SB)/4, $0x3c088908
DATA expP2<>+20(SB)/4, $0x3c088908
DATA expP2<>+24(SB)/4, $0x3c088908
DATA expP2<>+28(SB)/4, $0x3c088908
GLOBL expP2<>(SB), RODATA|NOPTR, $32

DATA expP3<>+0(SB)/4, $0x3d2aa9c1
DATA expP3<>+4(SB)/4, $0x3d2aa9c1
DATA expP3<>+8(SB)/4, $0x3d2aa9c1
DATA expP3<>+12(SB)/4, $0x3d2aa9c1
DATA expP3<>+16(SB)/4, $0x3d2aa9c1
DATA expP3<>+20(SB)/4, $0x3d2aa9c1
DATA expP3<>+24(SB)/4, $0x3d2aa9c1
DATA expP3<>+28(SB)/4, $0x3d2aa9c1
GLOBL expP3<>(SB), RODATA|NOPTR, $32

DATA expP4<>+0(SB)/4, $0x3e2aaaaa
DATA expP4<>+4(SB)/4, $0x3e2aaaaa
DATA expP4<>+8(SB)/4, $0x3e2aaaaa
DATA expP4<>+12(SB)/4, $0x3e2aaaaa
DATA expP4<>+16(SB)/4, $0x3e2aaaaa
DATA expP4<>+20(SB)/4, $0x3e2aaaaa
DATA expP4<>+24(SB)/4, $0x3e2aaaaa
DATA expP4<>+28(SB)/4, $0x3e2aaaaa
GLOBL expP4<>(SB), RODATA|NOPTR, $32

DATA expP5<>+0(SB)/4, $0x3f000000
DATA expP5<>+4(SB)/4, $0x3f000000
DATA expP5<>+8(SB)/4, $0x3f000000
DATA expP5<>+12(SB)/4, $0x3f000000
DATA expP5<>+16(SB)/4, $0x3f000000
DATA expP5<>+20(SB)/4, $0x3f000000
DATA expP5<>+24(SB)/4, $0x3f000000
DATA expP5<>+28(SB)/4, $0x3f000000
GLOBL expP5<>(SB), RODATA|NOPTR, $32

DATA expBias<>+0(SB)/4, $0x0000007f
DATA expBias<>+4(SB)/4, $0x0000007f
DATA expBias<>+8(SB)/4, $0x0000007f
DATA expBias<>+12(SB)/4, $0x0000007f
DATA expBias<>+16(SB)/4, $0x0000007f
DATA expBias<>+20(SB)/4, $0x0000007f
DATA expBias<>+24(SB)/4, $0x0000007f
DATA expBias<>+28(SB)/4, $0x0000007f
GLOBL expBias<>(SB), RODATA|NOPTR, $32

DATA tanhAbs<>+0(SB)/4, $0x7fffffff
DATA tanhAbs<>+4(SB)/4, $0x7fffffff
DATA tanhAbs<>+8(SB)/4, $0x7fffffff
DATA tanhAbs<>+12(SB)/4, $0x7fffffff
DATA tanhAbs<>+16(SB)/4, $0x7fffffff
DATA tanhAbs<>+20(SB)/4, $0x7fffffff
DATA tanhAbs<>+24(SB)/4, $0x7fffffff
DATA tanhAbs<>+28(SB)/4, $0x7fffffff
GLOBL tanhAbs<>(SB), RODATA|NOPTR, $32

DATA tanhSign<>+0(SB)/4, $0x80000000
DATA tanhSign<>+4(SB)/4, $0x80000000
DATA tanhSign<>+8(SB)/4, $0x80000000
DATA tanhSign<>+12(SB)/4, $0x80000000
DATA tanhSign<>+16(SB)/4, $0x80000000
DATA tanhSign<>+20(SB)/4, $0x80000000
DATA tanhSign<>+24(SB)/4, $0x80000000
DATA tanhSign<>+28(SB)/4, $0x80000000
GLOBL tanhSign<>(SB), RODATA|NOPTR, $32

DATA tanhTwo<>+0(SB)/4, $0x40000000
DATA tanhTwo<>+4(SB)/4, $0x40000000
DATA tanhTwo<>+8(SB)/4, $0x40000000
DATA tanhTwo<>+12(SB)/4, $0x40000000
DATA tanhTwo<>+16(SB)/4, $0x40000000
DATA tanhTwo<>+20(SB)/4, $0x40000000
DATA tanhTwo<>+24(SB)/4, $0x40000000
DATA tanhTwo<>+28(SB)/4, $0x40000000
GLOBL tanhTwo<>(SB), RODATA|NOPTR, $32

DATA tanhThresh<>+0(SB)/4, $0x3f200000
DATA tanhThresh<>+4(SB)/4, $0x3f200000
DATA tanhThresh<>+8(SB)/4, $0x3f200000
DATA tanhThresh<>+12(SB)/4, $0x3f200000
DATA tanhThresh<>+16(SB)/4, $0x3f200000
DATA tanhThresh<>+20(SB)/4, $0x3f200000
DATA tanhThresh<>+24(SB)/4, $0x3f200000
DATA tanhThresh<>+28(SB)/4, $0x3f200000
GLOBL tanhThresh<>(SB), RODATA|NOPTR, $32

DATA tanhT0<>+0(SB)/4, $0xbbbaf0ea
DATA tanhT0<>+4(SB)/4, $0xbbbaf0ea
DATA tanhT0<>+8(SB)/4, $0xbbbaf0ea
DATA tanhT0<>+12(SB)/4, $0xbbbaf0ea
DATA tanhT0<>+16(SB)/4, $0xbbbaf0ea
DATA tanhT0<>+20(SB)/4, $0xbbbaf0ea
DATA tanhT0<>+24(SB)/4, $0xbbbaf0ea
DATA tanhT0<>+28(SB)/4, $0xbbbaf0ea
GLOBL tanhT0<>(SB), RODATA|NOPTR, $32

DATA tanhT1<>+0(SB)/4, $0x3ca9134e
DATA tanhT1<>+4(SB)/4, $0x3ca9134e
DATA tanhT1<>+8(SB)/4, $0x3ca9134e
DATA tanhT1<>+12(SB)/4, $0x3ca9134e
DATA tanhT1<>+16(SB)/4, $0x3ca9134e
DATA tanhT1<>+20(SB)/4, $0x3ca9134e
DATA tanhT1<>+24(SB)/4, $0x3ca9134e
DATA tanhT1<>+28(SB)/4, $0x3ca9134e
GLOBL tanhT1<>(SB), RODATA|NOPTR, $32

DATA tanhT2<>+0(SB)/4, $0xbd5c1e2d
DATA tanhT2<>+4(SB)/4, $0xbd5c1e2d
DATA tanhT2<>+8(SB)/4, $0xbd5c1e2d
DATA tanhT2<>+12(SB)/4, $0xbd5c1e2d
DATA tanhT2<>+16(SB)/4, $0xbd5c1e2d
DATA tanhT2<>+20(SB)/4, $0xbd5c1e2d
DATA tanhT2<>+24(SB)/4, $0xbd5c1e2d
DATA tanhT2<>+28(SB)/4, $0xbd5c1e2d
GLOBL tanhT2<>(SB), RODATA|NOPTR, $32

DATA tanhT3<>+0(SB)/4, $0x3e088393
DATA tanhT3<>+4(SB)/4, $0x3e088393
DATA tanhT3<>+8(SB)/4, $0x3e088393
DATA tanhT3<>+12(SB)/4, $0x3e088393
DATA tanhT3<>+16(SB)/4, $0x3e088393
DATA tanhT3<>+20(SB)/4, $0x3e088393
DATA tanhT3<>+24(SB)/4, $0x3e088393
DATA tanhT3<>+28(SB)/4, $0x3e088393
GLOBL tanhT3<>(SB), RODATA|NOPTR, $32

DATA tanhT4<>+0(SB)/4, $0xbeaaaa99
DATA tanhT4<>+4(SB)/4, $0xbeaaaa99
DATA tanhT4<>+8(SB)/4, $0xbeaaaa99
DATA tanhT4<>+12(SB)/4, $0xbeaaaa99
DATA tanhT4<>+16(SB)/4, $0xbeaaaa99
DATA tanhT4<>+20(SB)/4, $0xbeaaaa99
DATA tanhT4<>+24(SB)/4, $0xbeaaaa99
DATA tanhT4<>+28(SB)/4, $0xbeaaaa99
GLOBL tanhT4<>(SB), RODATA|NOPTR, $32

// EXPCORE computes Y3 = exp(Y0) for expF32AVX2 and tanhF32AVX2 (one definition, so both get
// the same exp), with its constants from memory; it clobbers Y0, Y1, Y2, Y4 and Y5.
#define EXPCORE \
	VMOVUPS expLo<>(SB), Y1 \
	VMAXPS Y0, Y1, Y0 \
	VMOVUPS expHi<>(SB), Y1 \
	VMINPS Y0, Y1, Y0 \
	VMOVAPS Y0, Y1 \
	VMOVUPS expLog2e<>(SB), Y2 \
	VFMADD213PS expHalf<>(SB), Y2, Y1 \
	VROUNDPS $1, Y1, Y1 \
	VFNMADD231PS expC1<>(SB), Y1, Y0 \
	VFNMADD231PS expC2<>(SB), Y1, Y0 \
	VMULPS Y0, Y0, Y2 \
	VMOVUPS expP0<>(SB), Y3 \
	VFMADD213PS expP1<>(SB), Y0, Y3 \
	VFMADD213PS expP2<>(SB), Y0, Y3 \
	VFMADD213PS expP3<>(SB), Y0, Y3 \
	VFMADD213PS expP4<>(SB), Y0, Y3 \
	VFMADD213PS expP5<>(SB), Y0, Y3 \
	VFMADD213PS Y0, Y2, Y3 \
	VADDPS expOne<>(SB), Y3, Y3 \
	VCVTTPS2DQ Y1, Y4 \
	VPSRAD $1, Y4, Y5 \
	VPSUBD Y5, Y4, Y4 \
	VPADDD expBias<>(SB), Y5, Y5 \
	VPADDD expBias<>(SB), Y4, Y4 \
	VPSLLD $23, Y5, Y5 \
	VPSLLD $23, Y4, Y4 \
	VMULPS Y5, Y3, Y3 \
	VMULPS Y4, Y3, Y3


// func expF32AVX2(dst, src *float32, n int)
//
// dst[i] = exp(src[i]) for i < n (n a multiple of 8), 8 lanes at a time with AVX2 and FMA, by
// Cephes' expf: x is clamped to [-104, 88.8] (keeping NaN: the clamps take x as their second
// operand), n = round(x·log2 e), r = x - n·ln 2 in two parts (Cody-Waite), exp(r) by a degree-5
// polynomial, and the result scaled by 2^(n>>1)·2^(n-(n>>1)) so that both factors are normal
// floats for every n in range: above ln(FLT_MAX) the product overflows to +Inf, far below it
// underflows through the subnormals to 0. Within 2 ulps of the correctly rounded result
// (TestExpF32Vec measures it).
TEXT ·expF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

exploop:
	CMPQ CX, $8
	JL   expdone
	VMOVUPS (SI), Y0
	EXPCORE
	VMOVUPS Y3, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  exploop

expdone:
	VZEROUPPER
	RET

// func tanhF32AVX2(dst, src *float32, n int)
//
// dst[i] = tanh(src[i]) for i < n (n a multiple of 8), by Cephes' tanhf: for |x| < 0.625 the odd
// polynomial x + x·z·P(z), z = x², else 1 - 2/(exp(2|x|) + 1) with the exp above (no
// cancellation there: the result is at least 0.55); the two are computed for all lanes and
// blended, then x's sign is set on the result (tanh is odd; this also keeps tanh(-0) = -0). NaN
// goes through the exp branch and stays NaN; ±Inf gives ±1. TestTanhF32Vec measures the error.
TEXT ·tanhF32AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

tanhloop:
	CMPQ CX, $8
	JL   tanhdone
	VMOVUPS (SI), Y6
	VANDPS tanhAbs<>(SB), Y6, Y7
	VADDPS Y7, Y7, Y0
	EXPCORE
	VADDPS expOne<>(SB), Y3, Y3
	VMOVUPS tanhTwo<>(SB), Y4
	VDIVPS Y3, Y4, Y4
	VMOVUPS expOne<>(SB), Y5
	VSUBPS Y4, Y5, Y5
	VMULPS Y6, Y6, Y2
	VMOVUPS tanhT0<>(SB), Y3
	VFMADD213PS tanhT1<>(SB), Y2, Y3
	VFMADD213PS tanhT2<>(SB), Y2, Y3
	VFMADD213PS tanhT3<>(SB), Y2, Y3
	VFMADD213PS tanhT4<>(SB), Y2, Y3
	VMULPS Y2, Y3, Y3
	VFMADD213PS Y6, Y6, Y3
	VCMPPS $1, tanhThresh<>(SB), Y7, Y4
	VBLENDVPS Y4, Y3, Y5, Y5
	VANDPS tanhSign<>(SB), Y6, Y4
	VORPS Y4, Y5, Y5
	VMOVUPS Y5, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  tanhloop

tanhdone:
	VZEROUPPER
	RET

// The AVX-512 forms of vec_exp_amd64.s's exp and tanh: the same instructions on 16 lanes, with
// the constants of vec_exp_amd64.s broadcast from their first lane ({1to16}), so every lane
// computes exactly what the AVX2 kernels compute (TestExpTanhWidthsBitwise). Where AVX2 blends
// on a vector mask (VBLENDVPS) these compare into a mask register and blend on it.

// EXPCORE512 computes Z3 = exp(Z0); it clobbers Z0, Z1, Z2, Z4 and Z5. The clamps keep x as
// their second operand, as EXPCORE's do, so a NaN stays NaN.
#define EXPCORE512 \
	VBROADCASTSS expLo<>(SB), Z1 \
	VMAXPS Z0, Z1, Z0 \
	VBROADCASTSS expHi<>(SB), Z1 \
	VMINPS Z0, Z1, Z0 \
	VMOVAPS Z0, Z1 \
	VBROADCASTSS expLog2e<>(SB), Z2 \
	VFMADD213PS.BCST expHalf<>(SB), Z2, Z1 \
	VRNDSCALEPS $1, Z1, Z1 \
	VFNMADD231PS.BCST expC1<>(SB), Z1, Z0 \
	VFNMADD231PS.BCST expC2<>(SB), Z1, Z0 \
	VMULPS Z0, Z0, Z2 \
	VBROADCASTSS expP0<>(SB), Z3 \
	VFMADD213PS.BCST expP1<>(SB), Z0, Z3 \
	VFMADD213PS.BCST expP2<>(SB), Z0, Z3 \
	VFMADD213PS.BCST expP3<>(SB), Z0, Z3 \
	VFMADD213PS.BCST expP4<>(SB), Z0, Z3 \
	VFMADD213PS.BCST expP5<>(SB), Z0, Z3 \
	VFMADD213PS Z0, Z2, Z3 \
	VADDPS.BCST expOne<>(SB), Z3, Z3 \
	VCVTTPS2DQ Z1, Z4 \
	VPSRAD $1, Z4, Z5 \
	VPSUBD Z5, Z4, Z4 \
	VPADDD.BCST expBias<>(SB), Z5, Z5 \
	VPADDD.BCST expBias<>(SB), Z4, Z4 \
	VPSLLD $23, Z5, Z5 \
	VPSLLD $23, Z4, Z4 \
	VMULPS Z5, Z3, Z3 \
	VMULPS Z4, Z3, Z3

// func expF32AVX512(dst, src *float32, n int)
//
// expF32AVX2 on 16 lanes (n a multiple of 16).
TEXT ·expF32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

exp512loop:
	CMPQ CX, $16
	JL   exp512done
	VMOVUPS (SI), Z0
	EXPCORE512
	VMOVUPS Z3, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  exp512loop

exp512done:
	VZEROUPPER
	RET

// func tanhF32AVX512(dst, src *float32, n int)
//
// tanhF32AVX2 on 16 lanes (n a multiple of 16).
TEXT ·tanhF32AVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX

tanh512loop:
	CMPQ CX, $16
	JL   tanh512done
	VMOVUPS (SI), Z6
	VPANDD.BCST tanhAbs<>(SB), Z6, Z7
	VADDPS Z7, Z7, Z0
	EXPCORE512
	VADDPS.BCST expOne<>(SB), Z3, Z3
	VBROADCASTSS tanhTwo<>(SB), Z4
	VDIVPS Z3, Z4, Z4
	VBROADCASTSS expOne<>(SB), Z5
	VSUBPS Z4, Z5, Z5
	VMULPS Z6, Z6, Z2
	VBROADCASTSS tanhT0<>(SB), Z3
	VFMADD213PS.BCST tanhT1<>(SB), Z2, Z3
	VFMADD213PS.BCST tanhT2<>(SB), Z2, Z3
	VFMADD213PS.BCST tanhT3<>(SB), Z2, Z3
	VFMADD213PS.BCST tanhT4<>(SB), Z2, Z3
	VMULPS Z2, Z3, Z3
	VFMADD213PS Z6, Z6, Z3
	VCMPPS.BCST $1, tanhThresh<>(SB), Z7, K1
	VBLENDMPS Z3, Z5, K1, Z5
	VPANDD.BCST tanhSign<>(SB), Z6, Z4
	VPORD Z4, Z5, Z5
	VMOVUPS Z5, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  tanh512loop

tanh512done:
	VZEROUPPER
	RET
