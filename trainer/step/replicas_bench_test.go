package step

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/xla"
)

// BenchmarkReplicas measures the cost of data parallelism on gotpu's CPU backend: the same global
// batch (8 sequences of 64 tokens, GPT-2 vocab 2048, d 128, 2 layers) as 1 device × 8 and as one
// SPMD step over 8 virtual devices × 1 (in-graph all-reduce), reporting ms/step for each and the
// overhead of replication + all-reduce as a percentage of the 1-device step (issue #7: < 10%).
func BenchmarkReplicas(b *testing.B) {
	ms := map[int]float64{}
	for _, n := range []int{1, 8} {
		rt := openGoDevices(b, xla.GoBackendGotpu, n)
		cfg := gpt2.DefaultConfig()
		cfg.VocabSize, cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 2048, 128, 2, 4, 64
		cfg.ResidPdrop, cfg.EmbdPdrop, cfg.AttnPdrop = 0, 0, 0
		m, err := models.New(context.Background(), rt, cfg, models.NewOptions{Seed: 1})
		if err != nil {
			b.Fatal(err)
		}
		s, err := New(rt, m, Config{Optimizer: DefaultAdamW(), NumReplicas: n})
		if err != nil {
			b.Fatal(err)
		}
		global := randomBatch(rand.New(rand.NewPCG(1, 1)), 8, 64, 2048)
		micro := [][]*data.Batch{split(global, n)}
		if _, err := s.Step(context.Background(), micro, 1e-3); err != nil { // compile
			b.Fatal(err)
		}
		steps := max(b.N, 3)
		start := time.Now()
		for range steps {
			if _, err := s.Step(context.Background(), micro, 1e-3); err != nil {
				b.Fatal(err)
			}
		}
		ms[n] = float64(time.Since(start).Milliseconds()) / float64(steps)
	}
	b.ReportMetric(ms[1], "1-replica-ms/step")
	b.ReportMetric(ms[8], "8-replica-ms/step")
	b.ReportMetric(100*(ms[8]-ms[1])/ms[1], "overhead-%")
	fmt.Printf("global batch 8: 1 replica %.0f ms/step, 8 replicas %.0f ms/step, overhead %.1f%%\n", ms[1], ms[8], 100*(ms[8]-ms[1])/ms[1])
}
