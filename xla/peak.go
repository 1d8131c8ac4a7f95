package xla

import "github.com/gotpu/gotpu/xla/internal/gemm"

// CPUPeakGFLOPS measures this machine's float32 fused-multiply-add peak with threads goroutines
// (each running independent 512-bit, or 256-bit, FMA chains; the best of three runs) and returns
// it in GFLOP/s, or 0 where it cannot be measured (no AVX2/AVX-512 FMA, another architecture, the
// purego build). It takes about a second. Benchmarks rate the pure-Go backend's achieved FLOP/s
// against it, measured in the same run so that both see the same clock and load.
func CPUPeakGFLOPS(threads int) float64 { return gemm.MeasurePeakGFLOPS(threads) }

// CPUBF16PeakGFLOPS is CPUPeakGFLOPS for the bfloat16 dot product (AVX512-BF16's VDPBF16PS, the
// rate of the backend's bfloat16 products), or 0 where the CPU lacks it.
func CPUBF16PeakGFLOPS(threads int) float64 { return gemm.MeasureBF16PeakGFLOPS(threads) }
