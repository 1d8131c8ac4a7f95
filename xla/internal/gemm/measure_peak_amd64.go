//go:build amd64 && !purego

package gemm

import (
	"sync"
	"time"
)

// MeasurePeakGFLOPS measures the machine's float32 FMA throughput: threads goroutines each run
// the independent-FMA loop of the widest supported width (peak_amd64.s), and the best of three
// runs is returned in GFLOP/s. Benchmarks call it in the same process as the work they rate, so
// that both see the same clock, turbo state and load. It returns 0 where the CPU has neither
// AVX-512 nor AVX2+FMA.
func MeasurePeakGFLOPS(threads int) float64 {
	switch {
	case hasAVX512():
		return bestGFLOPS(threads, fmaPeakAVX512, 16*32)
	case hasAVX2():
		return bestGFLOPS(threads, fmaPeakAVX2, 12*16)
	}
	return 0
}

// MeasureBF16PeakGFLOPS is MeasurePeakGFLOPS for the bfloat16 dot product VDPBF16PS (16 lanes ×
// 2 products × multiply and add = 64 FLOP per instruction, 16 per loop iteration), the rate
// KernelAVX512BF16 runs at; 0 where the CPU lacks AVX512-BF16.
func MeasureBF16PeakGFLOPS(threads int) float64 {
	if !hasAVX512BF16() {
		return 0
	}
	return bestGFLOPS(threads, dpbf16PeakAVX512, 16*64)
}

// bestGFLOPS runs loop on threads goroutines three times and returns the best rate.
func bestGFLOPS(threads int, loop func(int), flopsPerIter int) float64 {
	const iters = 20_000_000
	threads = max(threads, 1)
	best := 0.0
	for range 3 {
		var wg sync.WaitGroup
		start := time.Now()
		for range threads {
			wg.Go(func() { loop(iters) })
		}
		wg.Wait()
		best = max(best, float64(threads)*iters*float64(flopsPerIter)/time.Since(start).Seconds()/1e9)
	}
	return best
}
