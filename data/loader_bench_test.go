package data

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// busyCollator burns CPU for a fixed time per batch: simulated host work (reading, tokenizing,
// collating) that competes for the cores like the real thing.
type busyCollator struct {
	CausalLMCollator
	work time.Duration
}

func (c busyCollator) Collate(ex []Example) (*Batch, error) {
	end := time.Now().Add(c.work)
	x := uint64(1)
	for time.Now().Before(end) {
		for range 1000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	b, err := c.CausalLMCollator.Collate(ex)
	if b != nil && x == 0 { // keep x alive
		b.Size++
	}
	return b, err
}

// BenchmarkLoaderOverlap feeds a simulated training step of T = 20 ms with host work of 10 ms per
// batch. With prefetch the loader prepares batch n+1 while step n runs, so the step loop hardly
// waits (input_wait_pct_of_step near 0); with PrefetchFactor 0 it waits the whole host time
// (wait_per_batch_ms ≈ host_ms_per_batch). Reported as metrics, not asserted.
func BenchmarkLoaderOverlap(b *testing.B) {
	const step, work = 20 * time.Millisecond, 10 * time.Millisecond
	for _, prefetch := range []int{0, 2} {
		b.Run(fmt.Sprintf("prefetch=%d", prefetch), func(b *testing.B) {
			cfg := testConfig(synthetic(256), 2, 4, prefetch)
			cfg.NumWorkers = 1
			cfg.Collator = busyCollator{CausalLMCollator{BlockSize: 8}, work / 2} // 2 replicas per batch
			l, err := NewLoader(context.Background(), cfg, State{Seed: 42})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			if _, err := l.Next(context.Background()); err != nil { // warm up the pipeline
				b.Fatal(err)
			}
			before := l.Stats()
			b.ResetTimer()
			for range b.N {
				if _, err := l.Next(context.Background()); err != nil {
					b.Fatal(err)
				}
				time.Sleep(step) // the simulated training step
			}
			b.StopTimer()
			s := l.Stats()
			n := float64(s.Batches - before.Batches)
			wait := s.InputWaitSeconds - before.InputWaitSeconds
			b.ReportMetric(100*wait/(n*step.Seconds()), "input_wait_pct_of_step")
			b.ReportMetric(1000*wait/n, "wait_per_batch_ms")
			b.ReportMetric(1000*(s.HostSeconds-before.HostSeconds)/n, "host_ms_per_batch")
		})
	}
}
