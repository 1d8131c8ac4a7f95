//go:build amd64 && !purego

// The AVX512-BF16 micro-kernel of the bfloat16 GEMM. Go's assembler (as of
// Go 1.26) has no AVX512_BF16 mnemonics, so VDPBF16PS is emitted as bytes by
// the macro below, which computes its EVEX encoding from register numbers.
// The encoding was checked against GNU as, and TestKernelAVX512BF16 checks
// the kernel bit for bit against a Go model of the instruction, so a wrong
// register in any of its 72 instructions fails that test.

#include "textflag.h"
#include "tile_amd64.h"

// VDPBF16PS_RR(b, a, acc) is VDPBF16PS Z(b), Z(a), Z(acc) in Go operand order
// (Intel: vdpbf16ps zmm_acc, zmm_a, zmm_b): for each dword lane i,
// acc[i] += a.hi[i]·b.hi[i], then += a.lo[i]·b.lo[i]. Operands are register
// numbers 0-31. Encoding: EVEX.512.F3.0F38.W0 52 /r, i.e. 62, then
// P0 = ~R ~X ~B ~R' 0 0 1 0 (R, R' = bits 3, 4 of acc; B, X = bits 3, 4 of b),
// P1 = 0 ~vvvv 1 1 0 (vvvv = bits 0-3 of a), P2 = 0 1 0 0 ~V' 0 0 0
// (V' = bit 4 of a), opcode 52, ModRM = 11 acc[2:0] b[2:0].
#define VDPBF16PS_RR(b, a, acc) \
	BYTE $0x62; \
	BYTE $(((((acc)>>3)&1)^1)<<7 | ((((b)>>4)&1)^1)<<6 | ((((b)>>3)&1)^1)<<5 | ((((acc)>>4)&1)^1)<<4 | 2); \
	BYTE $((15^((a)&15))<<3 | 6); \
	BYTE $(0x40 | ((((a)>>4)&1)^1)<<3); \
	BYTE $0x52; \
	BYTE $(0xC0 | ((acc)&7)<<3 | ((b)&7))

// func kernelAVX512BF16(kp int, a, b *uint32, c *float32, ldc int, beta int)
//
// C[0:12, 0:32] (= or +=) Apanel · Bpanel over kp k-pairs, where Apanel holds
// per pair 12 dwords (row r's bfloat16 pair) and Bpanel per pair 32 dwords
// (column j's pair), as packPairs writes them. Z0..Z23 are the float32
// accumulators (row r in Z(2r), Z(2r+1)), Z24/Z25 the B pairs of the step and
// Z26..Z31 rotate as the broadcast A pairs, as in kernelAVX512: one
// VDPBF16PS does the multiply-adds of two VFMADD231PS at the same issue rate
// (one per cycle on Zen 4), so the same tile and the same 14 loads per step
// (a k-pair here, one k there) do twice the work. The embedded-broadcast form
// (VDPBF16PS with a {1to16} memory operand instead of VPBROADCASTD) measured
// the same, in the kernel alone and in the full product, so the kernel keeps
// the float32 kernel's shape. ldc is in elements; beta != 0 adds into C.
TEXT ·kernelAVX512BF16(SB), NOSPLIT, $0-48
	MOVQ kp+0(FP), CX
	MOVQ a+8(FP), AX
	MOVQ b+16(FP), BX
	MOVQ c+24(FP), DI
	MOVQ ldc+32(FP), DX
	SHLQ $2, DX
	MOVQ beta+40(FP), R8
	TILE_ZERO
	MOVQ DI, R9
	PREFETCHT0 (R9)
	PREFETCHT0 64(R9)
	ADDQ DX, R9
	PREFETCHT0 (R9)
	PREFETCHT0 64(R9)
	ADDQ DX, R9
	PREFETCHT0 (R9)
	PREFETCHT0 64(R9)
	ADDQ DX, R9
	PREFETCHT0 (R9)
	PREFETCHT0 64(R9)
	ADDQ DX, R9
	PREFETCHT0 (R9)
	PREFETCHT0 64(R9)
	ADDQ DX, R9
	PREFETCHT0 (R9)
	PREFETCHT0 64(R9)
	ADDQ DX, R9
	PREFETCHT0 (R9)
	PREFETCHT0 64(R9)
	ADDQ DX, R9
	PREFETCHT0 (R9)
	PREFETCHT0 64(R9)
	ADDQ DX, R9
	PREFETCHT0 (R9)
	PREFETCHT0 64(R9)
	ADDQ DX, R9
	PREFETCHT0 (R9)
	PREFETCHT0 64(R9)
	ADDQ DX, R9
	PREFETCHT0 (R9)
	PREFETCHT0 64(R9)
	ADDQ DX, R9
	PREFETCHT0 (R9)
	PREFETCHT0 64(R9)
	ADDQ DX, R9
	MOVQ CX, R10
	SHRQ $1, R10
	JZ   kernelAVX512BF16tail
kernelAVX512BF16loop2:
	VMOVUPS 0(BX), Z24
	VMOVUPS 64(BX), Z25
	VPBROADCASTD 0(AX), Z26
	VDPBF16PS_RR(24, 26, 0)
	VDPBF16PS_RR(25, 26, 1)
	VPBROADCASTD 4(AX), Z27
	VDPBF16PS_RR(24, 27, 2)
	VDPBF16PS_RR(25, 27, 3)
	VPBROADCASTD 8(AX), Z28
	VDPBF16PS_RR(24, 28, 4)
	VDPBF16PS_RR(25, 28, 5)
	VPBROADCASTD 12(AX), Z29
	VDPBF16PS_RR(24, 29, 6)
	VDPBF16PS_RR(25, 29, 7)
	VPBROADCASTD 16(AX), Z30
	VDPBF16PS_RR(24, 30, 8)
	VDPBF16PS_RR(25, 30, 9)
	VPBROADCASTD 20(AX), Z31
	VDPBF16PS_RR(24, 31, 10)
	VDPBF16PS_RR(25, 31, 11)
	VPBROADCASTD 24(AX), Z26
	VDPBF16PS_RR(24, 26, 12)
	VDPBF16PS_RR(25, 26, 13)
	VPBROADCASTD 28(AX), Z27
	VDPBF16PS_RR(24, 27, 14)
	VDPBF16PS_RR(25, 27, 15)
	VPBROADCASTD 32(AX), Z28
	VDPBF16PS_RR(24, 28, 16)
	VDPBF16PS_RR(25, 28, 17)
	VPBROADCASTD 36(AX), Z29
	VDPBF16PS_RR(24, 29, 18)
	VDPBF16PS_RR(25, 29, 19)
	VPBROADCASTD 40(AX), Z30
	VDPBF16PS_RR(24, 30, 20)
	VDPBF16PS_RR(25, 30, 21)
	VPBROADCASTD 44(AX), Z31
	VDPBF16PS_RR(24, 31, 22)
	VDPBF16PS_RR(25, 31, 23)
	VMOVUPS 128(BX), Z24
	VMOVUPS 192(BX), Z25
	VPBROADCASTD 48(AX), Z26
	VDPBF16PS_RR(24, 26, 0)
	VDPBF16PS_RR(25, 26, 1)
	VPBROADCASTD 52(AX), Z27
	VDPBF16PS_RR(24, 27, 2)
	VDPBF16PS_RR(25, 27, 3)
	VPBROADCASTD 56(AX), Z28
	VDPBF16PS_RR(24, 28, 4)
	VDPBF16PS_RR(25, 28, 5)
	VPBROADCASTD 60(AX), Z29
	VDPBF16PS_RR(24, 29, 6)
	VDPBF16PS_RR(25, 29, 7)
	VPBROADCASTD 64(AX), Z30
	VDPBF16PS_RR(24, 30, 8)
	VDPBF16PS_RR(25, 30, 9)
	VPBROADCASTD 68(AX), Z31
	VDPBF16PS_RR(24, 31, 10)
	VDPBF16PS_RR(25, 31, 11)
	VPBROADCASTD 72(AX), Z26
	VDPBF16PS_RR(24, 26, 12)
	VDPBF16PS_RR(25, 26, 13)
	VPBROADCASTD 76(AX), Z27
	VDPBF16PS_RR(24, 27, 14)
	VDPBF16PS_RR(25, 27, 15)
	VPBROADCASTD 80(AX), Z28
	VDPBF16PS_RR(24, 28, 16)
	VDPBF16PS_RR(25, 28, 17)
	VPBROADCASTD 84(AX), Z29
	VDPBF16PS_RR(24, 29, 18)
	VDPBF16PS_RR(25, 29, 19)
	VPBROADCASTD 88(AX), Z30
	VDPBF16PS_RR(24, 30, 20)
	VDPBF16PS_RR(25, 30, 21)
	VPBROADCASTD 92(AX), Z31
	VDPBF16PS_RR(24, 31, 22)
	VDPBF16PS_RR(25, 31, 23)
	ADDQ $96, AX
	ADDQ $256, BX
	DECQ R10
	JNZ  kernelAVX512BF16loop2
kernelAVX512BF16tail:
	ANDQ $1, CX
	JZ   kernelAVX512BF16store
	VMOVUPS 0(BX), Z24
	VMOVUPS 64(BX), Z25
	VPBROADCASTD 0(AX), Z26
	VDPBF16PS_RR(24, 26, 0)
	VDPBF16PS_RR(25, 26, 1)
	VPBROADCASTD 4(AX), Z27
	VDPBF16PS_RR(24, 27, 2)
	VDPBF16PS_RR(25, 27, 3)
	VPBROADCASTD 8(AX), Z28
	VDPBF16PS_RR(24, 28, 4)
	VDPBF16PS_RR(25, 28, 5)
	VPBROADCASTD 12(AX), Z29
	VDPBF16PS_RR(24, 29, 6)
	VDPBF16PS_RR(25, 29, 7)
	VPBROADCASTD 16(AX), Z30
	VDPBF16PS_RR(24, 30, 8)
	VDPBF16PS_RR(25, 30, 9)
	VPBROADCASTD 20(AX), Z31
	VDPBF16PS_RR(24, 31, 10)
	VDPBF16PS_RR(25, 31, 11)
	VPBROADCASTD 24(AX), Z26
	VDPBF16PS_RR(24, 26, 12)
	VDPBF16PS_RR(25, 26, 13)
	VPBROADCASTD 28(AX), Z27
	VDPBF16PS_RR(24, 27, 14)
	VDPBF16PS_RR(25, 27, 15)
	VPBROADCASTD 32(AX), Z28
	VDPBF16PS_RR(24, 28, 16)
	VDPBF16PS_RR(25, 28, 17)
	VPBROADCASTD 36(AX), Z29
	VDPBF16PS_RR(24, 29, 18)
	VDPBF16PS_RR(25, 29, 19)
	VPBROADCASTD 40(AX), Z30
	VDPBF16PS_RR(24, 30, 20)
	VDPBF16PS_RR(25, 30, 21)
	VPBROADCASTD 44(AX), Z31
	VDPBF16PS_RR(24, 31, 22)
	VDPBF16PS_RR(25, 31, 23)
kernelAVX512BF16store:
	TESTQ R8, R8
	JZ    kernelAVX512BF16overwrite
	TILE_ADD
	VZEROUPPER
	RET
kernelAVX512BF16overwrite:
	TILE_STORE
	VZEROUPPER
	RET

// func dpbf16PeakAVX512(n int)
//
// Runs n iterations of 16 independent VDPBF16PS (16 lanes × 2 pairs × 2 FLOP
// = 64 FLOP each, 1024 per iteration), the BF16 counterpart of fmaPeakAVX512:
// sixteen chains cover its latency × throughput, so the loop runs at the
// core's VDPBF16PS issue limit. Benchmarks use it for timing only.
TEXT ·dpbf16PeakAVX512(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
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
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	TESTQ CX, CX
	JZ   dppeakdone
dppeakloop:
	VDPBF16PS_RR(30, 31, 0)
	VDPBF16PS_RR(30, 31, 1)
	VDPBF16PS_RR(30, 31, 2)
	VDPBF16PS_RR(30, 31, 3)
	VDPBF16PS_RR(30, 31, 4)
	VDPBF16PS_RR(30, 31, 5)
	VDPBF16PS_RR(30, 31, 6)
	VDPBF16PS_RR(30, 31, 7)
	VDPBF16PS_RR(30, 31, 8)
	VDPBF16PS_RR(30, 31, 9)
	VDPBF16PS_RR(30, 31, 10)
	VDPBF16PS_RR(30, 31, 11)
	VDPBF16PS_RR(30, 31, 12)
	VDPBF16PS_RR(30, 31, 13)
	VDPBF16PS_RR(30, 31, 14)
	VDPBF16PS_RR(30, 31, 15)
	DECQ CX
	JNZ  dppeakloop
dppeakdone:
	VZEROUPPER
	RET
