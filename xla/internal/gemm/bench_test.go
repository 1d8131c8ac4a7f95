package gemm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// peakFunc measures the FMA peak for a thread count (set on amd64; nil
// elsewhere, where the %peak metric is omitted).
var peakFunc func(threads int) float64

func threadsName(t int) string { return fmt.Sprintf("threads=%d", t) }

// benchShapes are 1024³ and the GPT-2 benchmark model's matmuls (d_model 256,
// vocab 8192, 1024 tokens per step): the embedding/unembedding forward and its
// transposed-B form as produced by the gradient, and the square projection.
var benchShapes = []struct {
	name string
	op   Op
}{
	{"1024x1024x1024", Op{M: 1024, N: 1024, K: 1024}},
	{"1024x256.256x8192", Op{M: 1024, N: 8192, K: 256}},
	{"1024x8192.(256x8192)T", Op{M: 1024, N: 256, K: 8192, TransB: true}},
	{"1024x256.256x1024", Op{M: 1024, N: 1024, K: 256}},
}

func randSlice(n int, rng *rand.Rand) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = float32(rng.NormFloat64())
	}
	return s
}

// BenchmarkFloat32 reports GFLOP/s and, where the peak can be measured, the
// fraction of the machine's FMA peak for the same thread count (measured in
// the same process just before the GEMM runs).
func BenchmarkFloat32(b *testing.B) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 1))
	for _, k := range Available() {
		for _, s := range benchShapes {
			if k == KernelGeneric && s.name != "1024x1024x1024" {
				continue // the fallback is only measured on the headline shape
			}
			for _, threads := range []int{1, 2} {
				b.Run(fmt.Sprintf("%v/%s/%s", k, s.name, threadsName(threads)), func(b *testing.B) {
					p, err := NewPool(Config{Threads: threads, Kernel: k})
					if err != nil {
						b.Fatal(err)
					}
					op := s.op
					a, bb, c := randSlice(op.M*op.K, rng), randSlice(op.K*op.N, rng), make([]float32, op.M*op.N)
					if err := p.Float32(ctx, op, a, bb, c); err != nil { // warm-up: grows the buffers
						b.Fatal(err)
					}
					peak := 0.0
					if peakFunc != nil && k != KernelGeneric {
						peak = peakFunc(threads)
					}
					b.ReportAllocs()
					b.ResetTimer()
					for b.Loop() {
						if err := p.Float32(ctx, op, a, bb, c); err != nil {
							b.Fatal(err)
						}
					}
					g := 2 * float64(op.M) * float64(op.N) * float64(op.K) * float64(b.N) / b.Elapsed().Seconds() / 1e9
					b.ReportMetric(g, "GFLOP/s")
					if peak > 0 {
						b.ReportMetric(peak, "peakGFLOP/s")
						b.ReportMetric(100*g/peak, "%peak")
					}
				})
			}
		}
	}
}

// BenchmarkBFloat16 measures the bfloat16-input, float32-output path at 1024³.
func BenchmarkBFloat16(b *testing.B) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(2, 2))
	n := 1024
	a, bb := toBF16(randSlice(n*n, rng)), toBF16(randSlice(n*n, rng))
	c := make([]float32, n*n)
	p, err := NewPool(Config{Threads: 2})
	if err != nil {
		b.Fatal(err)
	}
	op := Op{M: n, N: n, K: n}
	if err := p.BFloat16(ctx, op, a, bb, c); err != nil { // warm-up: grows the buffers
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if err := p.BFloat16(ctx, op, a, bb, c); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(2*float64(n*n*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkSimpleGoDot is the comparison point: GoMLX v0.26's pure-Go backend
// running the same 1024³ float32 matmul through the graph API (compiled once,
// executed per iteration; includes its per-call buffer handling).
func BenchmarkSimpleGoDot(b *testing.B) {
	backend, err := simplego.New("")
	if err != nil {
		b.Fatal(err)
	}
	defer backend.Finalize()
	rng := rand.New(rand.NewPCG(3, 3))
	n := 1024
	exec, err := graph.NewExec(backend, func(x, y *graph.Node) *graph.Node { return graph.Dot(x, y) })
	if err != nil {
		b.Fatal(err)
	}
	defer exec.Finalize()
	x := tensors.FromFlatDataAndDimensions(randSlice(n*n, rng), n, n)
	y := tensors.FromFlatDataAndDimensions(randSlice(n*n, rng), n, n)
	run := func() {
		out, err := exec.Exec(x, y)
		if err != nil {
			b.Fatal(err)
		}
		for _, t := range out {
			t.FinalizeAll()
		}
	}
	run()
	for b.Loop() {
		run()
	}
	b.ReportMetric(2*float64(n*n*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}
