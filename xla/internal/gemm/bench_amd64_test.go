//go:build amd64 && !purego

package gemm

import (
	"sync"
	"testing"
	"time"
)

// peakGFLOPS measures the machine's float32 FMA throughput with threads
// goroutines each running the independent-FMA loop of the widest supported
// width, and returns the best of three runs in GFLOP/s. It runs in the same
// benchmark process as the GEMM so that both see the same clock and load.
func peakGFLOPS(threads int) float64 {
	loop, flopsPerIter := fmaPeakAVX2, 12*16
	if hasAVX512() {
		loop, flopsPerIter = fmaPeakAVX512, 16*32
	}
	const iters = 20_000_000
	best := 0.0
	for range 3 {
		var wg sync.WaitGroup
		start := time.Now()
		for range threads {
			wg.Go(func() { loop(iters) })
		}
		wg.Wait()
		g := float64(threads) * iters * float64(flopsPerIter) / time.Since(start).Seconds() / 1e9
		best = max(best, g)
	}
	return best
}

// BenchmarkPeak reports the FMA peak alone (GFLOP/s) for 1 and 2 threads.
func BenchmarkPeak(b *testing.B) {
	if !hasAVX2() {
		b.Skip("no AVX2/FMA")
	}
	for _, threads := range []int{1, 2} {
		b.Run(threadsName(threads), func(b *testing.B) {
			var g float64
			for b.Loop() {
				g = peakGFLOPS(threads)
			}
			b.ReportMetric(g, "GFLOP/s")
		})
	}
}

func init() { peakFunc = peakGFLOPS }
