package step

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/xla"
)

// fsdpBenchModel builds a benchmark model on rt: the GPT-2 fixture, or a GPT-2 made in-process.
type fsdpBenchModel struct {
	name  string
	vocab int
	build func(tb testing.TB, rt *xla.Runtime) models.Model
}

var fsdpBenchModels = []fsdpBenchModel{
	{"gpt2-tiny", 1000, func(tb testing.TB, rt *xla.Runtime) models.Model {
		m, err := models.Load(context.Background(), rt, fixtureDir("gpt2-tiny"), models.LoadOptions{})
		if err != nil {
			tb.Fatal(err)
		}
		return m
	}},
	{"gpt2-d256-l4", 1000, func(tb testing.TB, rt *xla.Runtime) models.Model {
		cfg := gpt2.DefaultConfig()
		cfg.VocabSize, cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 1000, 256, 4, 4, 64
		cfg.ResidPdrop, cfg.EmbdPdrop, cfg.AttnPdrop = 0, 0, 0
		m, err := models.New(context.Background(), rt, cfg, models.NewOptions{Seed: 1})
		if err != nil {
			tb.Fatal(err)
		}
		return m
	}},
}

// fsdpBenchStepper is one layout of the comparison: a stepper on its own 8-device runtime.
type fsdpBenchStepper struct {
	rt    *xla.Runtime
	s     *Stepper
	times []time.Duration
}

// newFSDPBenchStepper builds m's model on 8 virtual devices (fsdp nil: data parallel) and runs
// one warm-up step of micro (tracing and compiling).
func newFSDPBenchStepper(b *testing.B, m fsdpBenchModel, fsdp *FSDP, micro [][]*data.Batch) *fsdpBenchStepper {
	b.Helper()
	rt := openGoDevices(b, xla.GoBackendGotpu, fsdpBenchDevices)
	s, err := New(rt, m.build(b, rt), Config{Optimizer: DefaultAdamW(), NumReplicas: fsdpBenchDevices, FSDP: fsdp})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Step(context.Background(), micro, 1e-3); err != nil {
		b.Fatal(err)
	}
	return &fsdpBenchStepper{rt: rt, s: s}
}

// tokensPerS is the global batch's tokens over the median step time (the median, because other
// processes on a shared machine stall single steps by many times their length).
func (f *fsdpBenchStepper) tokensPerS(global *data.Batch) float64 {
	t := slices.Clone(f.times)
	slices.Sort(t)
	median := (t[(len(t)-1)/2] + t[len(t)/2]) / 2
	return float64(global.Size*global.SeqLen) / median.Seconds()
}

// step runs and times one step.
func (f *fsdpBenchStepper) step(b *testing.B, micro [][]*data.Batch) {
	start := time.Now()
	if _, err := f.s.Step(context.Background(), micro, 1e-3); err != nil {
		b.Fatal(err)
	}
	f.times = append(f.times, time.Since(start))
}

// deviceBytes is the largest per-device live bytes, from the backend's accounting: after Step
// every dispatched step has been read, so these are the persistent parameters and optimizer
// state (shards under FSDP) and the step's small per-device inputs.
func (f *fsdpBenchStepper) deviceBytes(b *testing.B) int64 {
	got, ok := f.rt.DeviceBytes()
	if !ok {
		b.Fatal("gotpu's backend keeps no buffer accounting")
	}
	return slices.Max(got[:fsdpBenchDevices])
}

const fsdpBenchDevices = 8

// BenchmarkFSDPvsDataParallel measures what fully sharding costs on gotpu's CPU backend: the
// same global batch (8 sequences of 64 tokens, one per device) trained with AdamW on 8 virtual
// devices with fsdp full_shard (1 × 8 mesh: an all-gather of every parameter before the forward
// pass and a reduce-scatter of the gradients, both built from all-reduces) and with data
// parallelism (one all-reduce of the gradients), in the same process. It reports the tokens/s of
// each, the ratio fsdp/dp, and each layout's largest per-device persistent bytes between steps
// (xla.Runtime.DeviceBytes), on the GPT-2 fixture and on a wider GPT-2 (d 256, 4 layers,
// vocab 1000). The two layouts' steps alternate (after one warm-up step each), so a change in
// the machine's load during the run weighs on both alike. Each b.N is one timed step of each
// layout (at least 5); tokens/s are those of the median step.
func BenchmarkFSDPvsDataParallel(b *testing.B) {
	for _, m := range fsdpBenchModels {
		b.Run(m.name, func(b *testing.B) {
			global := randomBatch(rand.New(rand.NewPCG(7, 8)), 8, 64, m.vocab)
			micro := [][]*data.Batch{split(global, fsdpBenchDevices)}
			dp := newFSDPBenchStepper(b, m, nil, micro)
			fs := newFSDPBenchStepper(b, m, &FSDP{Data: 1, Shard: fsdpBenchDevices}, micro)
			steps := max(b.N, 5)
			for range steps {
				dp.step(b, micro)
				fs.step(b, micro)
			}
			dpTPS, fsTPS := dp.tokensPerS(global), fs.tokensPerS(global)
			dpBytes, fsBytes := dp.deviceBytes(b), fs.deviceBytes(b)
			b.ReportMetric(fsTPS, "fsdp_tokens_per_s")
			b.ReportMetric(dpTPS, "dp_tokens_per_s")
			b.ReportMetric(fsTPS/dpTPS, "fsdp/dp")
			b.ReportMetric(float64(fsBytes), "fsdp_bytes_per_device")
			b.ReportMetric(float64(dpBytes), "dp_bytes_per_device")
			fmt.Printf("%s, 8 devices, global batch 8 x 64: fsdp full_shard %.0f tokens/s, data parallel %.0f tokens/s, fsdp/dp %.2f; per-device persistent bytes fsdp %d, dp %d (%.3f)\n",
				m.name, fsTPS, dpTPS, fsTPS/dpTPS, fsBytes, dpBytes, float64(fsBytes)/float64(dpBytes))
		})
	}
}
