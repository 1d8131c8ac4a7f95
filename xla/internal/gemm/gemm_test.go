package gemm

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// shapes covers sizes that are not multiples of any tile or vector width,
// k = 1, large k, and degenerate dimensions.
var shapes = [][3]int{ // M, N, K
	{1, 1, 1}, {7, 7, 7}, {1, 129, 1}, {129, 1, 7}, {13, 33, 1}, {129, 129, 129},
	{5, 3, 1000}, {24, 64, 256}, {31, 47, 300}, {100, 130, 17}, {3, 0, 4}, {4, 5, 0},
}

// TestFloat32 runs every kernel, 1 and 2 threads, default and tiny blocking,
// over the shapes, all four transpose combinations, tight and padded strides,
// and overwrite/accumulate, against the float64 reference.
func TestFloat32(t *testing.T) {
	ctx := context.Background()
	for _, k := range allKernels {
		for _, threads := range []int{1, 2} {
			for _, tiny := range []bool{false, true} {
				t.Run(kernelName(k, threads, tiny), func(t *testing.T) {
					p := newTestPool(t, k, threads, tiny)
					rng := rand.New(rand.NewPCG(1, uint64(k)))
					for _, s := range shapes {
						for variant := 0; variant < 8; variant++ {
							op := Op{M: s[0], N: s[1], K: s[2], TransA: variant&1 != 0, TransB: variant&2 != 0, Accumulate: variant&4 != 0}
							pad := rng.IntN(3) * (variant / 2 % 2) // padded strides on half the cases
							tc := newCase(rng, op, Batch{}, pad, 2*pad, pad+1, false)
							if err := p.Float32(ctx, tc.op, tc.a, tc.b, tc.c); err != nil {
								t.Fatalf("%+v: %v", tc.op, err)
							}
							tc.check(t, tc.c, 0)
						}
					}
				})
			}
		}
	}
}

// TestLarge checks one 1000-sized product per kernel (multi-block in every
// dimension with the default blocking, both threads).
func TestLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	for _, k := range allKernels {
		t.Run(k.String(), func(t *testing.T) {
			p := newTestPool(t, k, 2, false)
			rng := rand.New(rand.NewPCG(2, 3))
			tc := newCase(rng, Op{M: 1000, N: 1030, K: 600, TransB: true, Accumulate: true}, Batch{}, 1, 0, 3, false)
			if err := p.Float32(context.Background(), tc.op, tc.a, tc.b, tc.c); err != nil {
				t.Fatal(err)
			}
			tc.check(t, tc.c, 0)
		})
	}
}

// TestBatched covers batch counts below, at and above the thread count (the
// per-item split and the by-item split), broadcast operands (stride 0) and
// gapped output strides, in float32 and bfloat16.
func TestBatched(t *testing.T) {
	ctx := context.Background()
	for _, k := range allKernels {
		t.Run(k.String(), func(t *testing.T) {
			p := newTestPool(t, k, 2, false)
			rng := rand.New(rand.NewPCG(4, 5))
			for _, count := range []int{1, 2, 3, 5} {
				for _, bc := range []struct{ sa, sb, sc int }{{-1, -1, 0}, {0, -1, 7}, {-1, 0, 0}} {
					for _, s := range [][3]int{{7, 9, 5}, {65, 70, 80}, {128, 64, 129}} {
						op := Op{M: s[0], N: s[1], K: s[2], TransA: count%2 == 0, TransB: bc.sc == 7, Accumulate: count == 3}
						b := Batch{Count: count, StrideA: bc.sa, StrideB: bc.sb, StrideC: bc.sc}
						tc := newCase(rng, op, b, 1, 0, 2, true)
						if err := p.Float32Batched(ctx, tc.op, tc.batch, tc.a, tc.b, tc.c); err != nil {
							t.Fatalf("%+v %+v: %v", tc.op, tc.batch, err)
						}
						tc.check(t, tc.c, 0)

						got := append([]float32(nil), tc.cOld...)
						if err := p.BFloat16Batched(ctx, tc.op, tc.batch, toBF16(tc.a), toBF16(tc.b), got); err != nil {
							t.Fatalf("bf16 %+v %+v: %v", tc.op, tc.batch, err)
						}
						tc.check(t, got, 0)
					}
				}
			}
		})
	}
}

// bf16Shapes adds, for the bfloat16 paths, the sizes around the BF16
// kernel's pairs and tile (2, 31, 33, 13 rows, 1000) with odd and even K,
// K = 1 and 2 (a single pair, padded or not), and K just past a default kc
// block (513 = 512 + a lone odd value).
var bf16Shapes = [][3]int{ // M, N, K
	{2, 2, 2}, {2, 7, 1}, {31, 33, 2}, {33, 31, 33}, {13, 2, 31}, {1, 1000, 2},
	{1000, 13, 33}, {12, 32, 64}, {33, 129, 65}, {33, 13, 1000}, {13, 33, 513},
}

// TestBFloat16 checks bfloat16 inputs with float32 and bfloat16 outputs on
// every kernel: the AVX512-BF16 kernel and the widening path of each float32
// kernel (those this CPU lacks skip). The inputs are bfloat16-exact, so the
// float64 reference is exact on them; a bfloat16 C adds one rounding (2^-8
// relative) and its old value is rounded too, which the test mirrors by
// rounding cOld first.
func TestBFloat16(t *testing.T) {
	ctx := context.Background()
	for _, k := range allKernels {
		for _, tiny := range []bool{false, true} {
			t.Run(kernelName(k, 2, tiny), func(t *testing.T) {
				p := newTestPool(t, k, 2, tiny)
				rng := rand.New(rand.NewPCG(6, 7))
				for _, s := range append(slices.Clip(shapes), bf16Shapes...) {
					for variant := 0; variant < 8; variant++ {
						op := Op{M: s[0], N: s[1], K: s[2], TransA: variant&1 != 0, TransB: variant&2 != 0, Accumulate: variant&4 != 0}
						tc := newCase(rng, op, Batch{}, variant%3, 1, variant%2, true)
						a16, b16 := toBF16(tc.a), toBF16(tc.b)

						c32 := append([]float32(nil), tc.c...)
						if err := p.BFloat16(ctx, tc.op, a16, b16, c32); err != nil {
							t.Fatalf("%+v: %v", tc.op, err)
						}
						tc.check(t, c32, 0)

						// bfloat16 C: the old C (and the sentinel) must be
						// bfloat16-representable for the comparison to be exact.
						for i := range tc.c {
							tc.c[i] = BF16ToFloat32(Float32ToBF16(tc.c[i]))
						}
						tc.cOld = append(tc.cOld[:0], tc.c...)
						c16 := toBF16(tc.c)
						if err := p.BFloat16Out(ctx, tc.op, a16, b16, c16); err != nil {
							t.Fatalf("%+v: %v", tc.op, err)
						}
						tc.check(t, fromBF16(c16), 1.0/256)
					}
				}
			})
		}
	}
}

func TestBF16Conversion(t *testing.T) {
	for _, c := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3f80}, {-2, 0xc000}, {0, 0}, {1 + 1.0/256, 0x3f80}, // tie → even (down)
		{1 + 3.0/256, 0x3f82}, // tie → even (up)
		{1 + 1.0/128 + 1.0/1024, 0x3f81},
		{3.4e38, 0x7f80}, // rounds up to +Inf
	} {
		if got := Float32ToBF16(c.in); got != c.want {
			t.Errorf("Float32ToBF16(%v) = %#04x, want %#04x", c.in, got, c.want)
		}
	}
	nan := Float32ToBF16(BF16ToFloat32(0x7f81)) // payload only in the low bits after truncation
	if v := BF16ToFloat32(nan); v == v {
		t.Errorf("NaN converted to %v", v)
	}
}

// TestValidation checks that bad input is an error naming the field, never a
// panic or a silent partial result.
func TestValidation(t *testing.T) {
	ctx := context.Background()
	p := newTestPool(t, KernelAuto, 2, false)
	a, b, c := make([]float32, 12), make([]float32, 12), make([]float32, 9)
	cases := []struct {
		op    Op
		batch Batch
		a, b  []float32
		c     []float32
		want  string
	}{
		{Op{M: -1, N: 3, K: 4}, Batch{Count: 1}, a, b, c, "negative dimension"},
		{Op{M: 3, N: 3, K: 4, LDA: 3}, Batch{Count: 1}, a, b, c, "Op.LDA = 3"},
		{Op{M: 3, N: 3, K: 4, LDB: 2}, Batch{Count: 1}, a, b, c, "Op.LDB = 2"},
		{Op{M: 3, N: 3, K: 4, LDC: -1}, Batch{Count: 1}, a, b, c, "Op.LDC = -1"},
		{Op{M: 3, N: 3, K: 4}, Batch{Count: 1}, a[:11], b, c, "A has 11 elements, need 12"},
		{Op{M: 3, N: 3, K: 4, TransB: true}, Batch{Count: 1}, a, b[:10], c, "B has 10 elements, need 12"},
		{Op{M: 3, N: 3, K: 4, LDC: 4}, Batch{Count: 1}, a, b, c, "C has 9 elements, need 11"},
		{Op{M: 3, N: 3, K: 4}, Batch{Count: 2, StrideC: 5}, a, b, c, "Batch.StrideC = 5"},
		// Side by side: each item's 3 columns must fit, StrideC apart, within LDC.
		{Op{M: 3, N: 3, K: 4, LDC: 6}, Batch{Count: 2, StrideC: 2}, a, b, make([]float32, 20), "Batch.StrideC = 2"},
		{Op{M: 3, N: 3, K: 4, LDC: 6}, Batch{Count: 3, StrideC: 3}, a, b, make([]float32, 20), "Batch.StrideC = 3"},
		{Op{M: 3, N: 3, K: 4}, Batch{Count: -1}, a, b, c, "Batch.Count = -1"},
		{Op{M: 3, N: 3, K: 4}, Batch{Count: 2, StrideA: -3}, a, b, c, "negative batch stride"},
		{Op{M: 3, N: 3, K: 4}, Batch{Count: 2, StrideA: 12, StrideC: 9}, a, b, make([]float32, 18), "A has 12 elements, need 24"},
		{Op{M: 3, N: 3, K: 4, LDA: 1 << 62}, Batch{Count: 1}, a, b, c, "overflows"},
		{Op{M: 3, N: 3, K: 3}, Batch{Count: 1}, a, b, a[3:], "C overlaps A"},
	}
	for _, tc := range cases {
		err := p.Float32Batched(ctx, tc.op, tc.batch, tc.a, tc.b, tc.c)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v %+v: err = %v, want it to contain %q", tc.op, tc.batch, err, tc.want)
		}
	}
	if _, err := NewPool(Config{Threads: -1}); err == nil || !strings.Contains(err.Error(), "Config.Threads") {
		t.Errorf("NewPool(Threads: -1): err = %v", err)
	}
	if _, err := NewPool(Config{Kernel: Kernel(99)}); err == nil || !strings.Contains(err.Error(), "Kernel(99)") {
		t.Errorf("NewPool(Kernel: 99): err = %v", err)
	}
	u := make([]uint16, 12)
	if err := p.BFloat16Out(ctx, Op{M: 3, N: 3, K: 4}, u, u[:4], u[3:]); err == nil || !strings.Contains(err.Error(), "B has 4") {
		t.Errorf("BFloat16Out short B: err = %v", err)
	}
}

// TestCanceled checks that a cancelled context stops a call with its error,
// on the single- and multi-goroutine paths.
func TestCanceled(t *testing.T) {
	p := newTestPool(t, KernelAuto, 2, false)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := 300
	a, b, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
	if err := p.Float32(ctx, Op{M: n, N: n, K: n}, a, b, c); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// cancelAfter is a context whose Err reports cancellation from its n-th call
// on, to cancel a call in the middle of its blocks deterministically.
type cancelAfter struct {
	context.Context
	n atomic.Int64
}

func (c *cancelAfter) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

// TestCanceledMidway cancels after a few kc blocks: both workers must stop and
// the call must return context.Canceled exactly once.
func TestCanceledMidway(t *testing.T) {
	for _, threads := range []int{1, 2} {
		p := newTestPool(t, KernelAuto, threads, true)
		ctx := &cancelAfter{Context: context.Background()}
		ctx.n.Store(4)
		n := 200
		a, b, c := make([]float32, n*n), make([]float32, n*n), make([]float32, n*n)
		err := p.Float32(ctx, Op{M: n, N: n, K: n}, a, b, c)
		if !errors.Is(err, context.Canceled) || err.Error() != context.Canceled.Error() {
			t.Fatalf("threads=%d: err = %v, want context.Canceled", threads, err)
		}
	}
}

// TestAvailable checks that dispatch picks the best kernel this CPU has and
// that every listed kernel constructs.
func TestAvailable(t *testing.T) {
	av := Available()
	t.Logf("available kernels on %s: %v", runtime.GOARCH, av)
	if av[len(av)-1] != KernelGeneric {
		t.Fatalf("generic kernel not last in %v", av)
	}
	p, err := NewPool(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Kernel() != av[0] {
		t.Errorf("auto picked %v, want %v", p.Kernel(), av[0])
	}
	if p.Threads() != runtime.GOMAXPROCS(0) {
		t.Errorf("Threads() = %d, want GOMAXPROCS %d", p.Threads(), runtime.GOMAXPROCS(0))
	}
}

// TestNoAllocs checks that steady-state calls allocate nothing, with two
// goroutines, for float32, batched and bfloat16 calls (on the AVX512-BF16
// kernel where the CPU has it).
func TestNoAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	ctx := context.Background()
	p := newTestPool(t, KernelAuto, 2, false)
	n := 160
	a, b, c := make([]float32, n*n*2), make([]float32, n*n*2), make([]float32, n*n*2)
	a16, b16, c16 := make([]uint16, n*n), make([]uint16, n*n), make([]uint16, n*n)
	op := Op{M: n, N: n, K: n, TransB: true}
	for name, f := range map[string]func(){
		"float32": func() { _ = p.Float32(ctx, op, a, b, c) },
		"batched": func() {
			_ = p.Float32Batched(ctx, op, Batch{Count: 2, StrideA: n * n, StrideB: n * n, StrideC: n * n}, a, b, c)
		},
		"bf16":    func() { _ = p.BFloat16(ctx, op, a16, b16, c[:n*n]) },
		"bf16out": func() { _ = p.BFloat16Out(ctx, op, a16, b16, c16) },
	} {
		f() // warm-up grows the buffers
		if allocs := testing.AllocsPerRun(20, f); allocs != 0 {
			t.Errorf("%s: %v allocs per call, want 0", name, allocs)
		}
	}
}

// TestSideBySideOutputs checks batch items written side by side in the same rows (attention's
// heads into [seq, heads·dim]): every item equals its own product, bit for bit, on 1 and 2
// threads and with the operands read in place or packed, and the columns between and after the
// items keep their sentinel.
func TestSideBySideOutputs(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	for _, threads := range []int{1, 2} {
		for _, s := range [][3]int{{5, 6, 7}, {40, 64, 300}, {100, 33, 20}} {
			m, n, k := s[0], s[1], s[2]
			const count, gap = 3, 2
			ldc := count*(n+gap) + 1
			p := newTestPool(t, KernelAuto, threads, false)
			a, b := randSlice(count*m*k, rng), randSlice(count*k*n, rng)
			c := make([]float32, m*ldc)
			for i := range c {
				c[i] = cSentinel
			}
			op := Op{M: m, N: n, K: k, LDC: ldc}
			if err := p.Float32Batched(ctx, op, Batch{Count: count, StrideA: m * k, StrideB: k * n, StrideC: n + gap}, a, b, c); err != nil {
				t.Fatal(err)
			}
			for it := range count {
				want := make([]float32, m*n)
				if err := p.Float32(ctx, Op{M: m, N: n, K: k}, a[it*m*k:], b[it*k*n:], want); err != nil {
					t.Fatal(err)
				}
				for r := range m {
					for x := range n {
						if got := c[r*ldc+it*(n+gap)+x]; math.Float32bits(got) != math.Float32bits(want[r*n+x]) {
							t.Fatalf("threads=%d %v: item %d (%d, %d) is %v, alone %v", threads, s, it, r, x, got, want[r*n+x])
						}
					}
				}
			}
			for r := range m {
				for it := range count {
					for x := it*(n+gap) + n; x < min((it+1)*(n+gap), ldc); x++ {
						if c[r*ldc+x] != cSentinel {
							t.Fatalf("threads=%d %v: (%d, %d) between items was written", threads, s, r, x)
						}
					}
				}
				if c[r*ldc+ldc-1] != cSentinel {
					t.Fatalf("threads=%d %v: row %d's last column was written", threads, s, r)
				}
			}
		}
	}
}
