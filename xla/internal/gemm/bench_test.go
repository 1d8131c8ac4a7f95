package gemm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

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
		if k == KernelAVX512BF16 {
			continue // its float32 engine is KernelAVX512's
		}
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

// bf16BenchShapes are 1024³ and the matmuls of a GPT-2 124M training step
// at 1024 tokens (d_model 768, MLP 3072, vocabulary 50257): the forward
// QKV, MLP-up, MLP-down and LM-head products, and gradient layouts with a
// transposed A (weight gradients: activations^T · output gradient) or a
// transposed B (input gradients: output gradient · W^T).
var bf16BenchShapes = []struct {
	name string
	op   Op
}{
	{"1024x1024x1024", Op{M: 1024, N: 1024, K: 1024}},
	{"qkv/1024x768.768x2304", Op{M: 1024, N: 2304, K: 768}},
	{"mlp-up/1024x768.768x3072", Op{M: 1024, N: 3072, K: 768}},
	{"mlp-down/1024x3072.3072x768", Op{M: 1024, N: 768, K: 3072}},
	{"lm-head/1024x768.(50257x768)T", Op{M: 1024, N: 50257, K: 768, TransB: true}},
	{"mlp-up-dW/(1024x768)T.1024x3072", Op{M: 768, N: 3072, K: 1024, TransA: true}},
	{"mlp-up-dX/1024x3072.(768x3072)T", Op{M: 1024, N: 768, K: 3072, TransB: true}},
	{"lm-head-dW/(1024x50257)T.1024x768", Op{M: 50257, N: 768, K: 1024, TransA: true}},
}

// bf16PeakFunc measures the VDPBF16PS peak for a thread count (set on amd64
// CPUs with AVX512-BF16; nil elsewhere).
var bf16PeakFunc func(threads int) float64

// BenchmarkBFloat16 compares, on the same shapes in the same run with 2
// threads, the three ways of doing a product: bfloat16 inputs on the
// AVX512-BF16 kernel (native), bfloat16 inputs widened to float32 for the
// AVX-512 float32 kernel (widen, the path of CPUs without AVX512-BF16) and
// float32 inputs with the same values on that kernel (float32). Every
// iteration runs each path once, in rotating order, timing each call, so
// that the paths share whatever load the machine has; it reports each path's
// GFLOP/s (ns/op is the sum of the three calls), the native/float32 ratio,
// and the float32 FMA peak and VDPBF16PS peak (twice the FLOP per
// instruction) measured just before.
func BenchmarkBFloat16(b *testing.B) {
	ctx := context.Background()
	const threads = 2
	for _, s := range bf16BenchShapes {
		b.Run(s.name, func(b *testing.B) {
			op := s.op
			rng := rand.New(rand.NewPCG(2, 2))
			af := randSlice(op.M*op.K, rng)
			bf := randSlice(op.K*op.N, rng)
			a16, b16 := toBF16(af), toBF16(bf)
			for i, v := range a16 { // float32 inputs with the same values
				af[i] = BF16ToFloat32(v)
			}
			for i, v := range b16 {
				bf[i] = BF16ToFloat32(v)
			}
			c := make([]float32, op.M*op.N)
			type path struct {
				name    string
				call    func() error
				elapsed time.Duration
			}
			var paths []*path
			for _, pc := range []struct {
				name   string
				kernel Kernel
				f32    bool
			}{
				{"native", KernelAVX512BF16, false},
				{"widen", KernelAVX512, false},
				{"float32", KernelAVX512, true},
			} {
				p, err := NewPool(Config{Threads: threads, Kernel: pc.kernel})
				if err != nil {
					b.Logf("no %s path: %v", pc.name, err)
					continue
				}
				call := func() error { return p.BFloat16(ctx, op, a16, b16, c) }
				if pc.f32 {
					call = func() error { return p.Float32(ctx, op, af, bf, c) }
				}
				if err := call(); err != nil { // warm-up: grows the buffers
					b.Fatal(err)
				}
				paths = append(paths, &path{name: pc.name, call: call})
			}
			if len(paths) == 0 {
				b.Skip("no AVX-512 kernel on this CPU")
			}
			fmaPeak, dpPeak := 0.0, 0.0
			if peakFunc != nil {
				fmaPeak = peakFunc(threads)
			}
			if bf16PeakFunc != nil {
				dpPeak = bf16PeakFunc(threads)
			}
			b.ReportAllocs()
			rot := 0
			for b.Loop() {
				for i := range paths {
					pt := paths[(rot+i)%len(paths)]
					start := time.Now()
					if err := pt.call(); err != nil {
						b.Fatal(err)
					}
					pt.elapsed += time.Since(start)
				}
				rot++
			}
			flop := 2 * float64(op.M) * float64(op.N) * float64(op.K) * float64(b.N)
			gflops := map[string]float64{}
			for _, pt := range paths {
				gflops[pt.name] = flop / pt.elapsed.Seconds() / 1e9
				b.ReportMetric(gflops[pt.name], pt.name+"-GFLOP/s")
			}
			if gflops["native"] > 0 && gflops["float32"] > 0 {
				b.ReportMetric(gflops["native"]/gflops["float32"], "native/float32")
			}
			if fmaPeak > 0 {
				b.ReportMetric(fmaPeak, "fmaPeak-GFLOP/s")
			}
			if dpPeak > 0 {
				b.ReportMetric(dpPeak, "bf16Peak-GFLOP/s")
			}
		})
	}
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
