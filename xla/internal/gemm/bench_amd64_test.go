//go:build amd64 && !purego

package gemm

import "testing"

// BenchmarkPeak reports the FMA peak alone (GFLOP/s) for 1 and 2 threads.
func BenchmarkPeak(b *testing.B) {
	if !hasAVX2() {
		b.Skip("no AVX2/FMA")
	}
	for _, threads := range []int{1, 2} {
		b.Run(threadsName(threads), func(b *testing.B) {
			var g float64
			for b.Loop() {
				g = MeasurePeakGFLOPS(threads)
			}
			b.ReportMetric(g, "GFLOP/s")
		})
	}
}

func init() {
	peakFunc = MeasurePeakGFLOPS
	if hasAVX512BF16() {
		bf16PeakFunc = MeasureBF16PeakGFLOPS
	}
}
