package gemm

import (
	"context"
	"fmt"
	"runtime"
	"sync"
)

// Op describes one matrix product C (=|+=) op(A)·op(B) with op(A) of shape M×K,
// op(B) of shape K×N and C of shape M×N, all row-major.
//
// A is stored M×K (TransA false) or K×M (TransA true) with rows LDA elements
// apart; likewise B is stored K×N or N×K with stride LDB, and C is stored M×N
// with stride LDC. A zero LD means "tightly packed" (the stored row length);
// otherwise it must be at least the stored row length.
type Op struct {
	M, N, K        int
	TransA, TransB bool
	LDA, LDB, LDC  int
	// Accumulate adds the product into C instead of overwriting it.
	Accumulate bool
}

// Batch describes Count independent products of the same Op, item i reading
// A[i*StrideA:], B[i*StrideB:] and writing C[i*StrideC:] (strides in elements).
// StrideA or StrideB may be 0 to broadcast one operand; StrideC must keep the
// outputs disjoint: each after the last, or side by side in the same rows
// (StrideC ≥ N and (Count-1)·StrideC + N ≤ LDC).
type Batch struct {
	Count                     int
	StrideA, StrideB, StrideC int
}

// Config configures a Pool.
type Config struct {
	// Threads is the number of goroutines a call may use; 0 means
	// runtime.GOMAXPROCS(0).
	Threads int
	// Kernel selects the micro-kernel; KernelAuto picks the fastest supported.
	Kernel Kernel
	// Runner, when set, runs a call's workers on the caller's own goroutines
	// instead of goroutines the Pool starts per call (see Runner).
	Runner Runner
}

// Runner runs the parts of a call: Run(n, part) calls part(0), ...,
// part(n-1), each once, concurrently, and returns when all have returned.
// n is at most Config.Threads. part never panics (a worker's panic is turned
// into the call's error). A runner whose goroutines live across calls and
// poll briefly for the next part (gobackend's team) starts the second worker
// within microseconds, where starting a goroutine on an idle core takes tens
// of microseconds: the time the OS takes to wake the core's thread.
type Runner interface {
	Run(n int, part func(w int))
}

// Pool runs GEMMs with a fixed kernel and thread count and owns the packing
// buffers they reuse, so that after the first call of a given size a call
// allocates nothing. A Pool serialises its calls (they share the buffers); use
// one Pool per concurrent caller for parallel independent GEMMs.
type Pool struct {
	mu      sync.Mutex
	spec    kernelSpec
	threads int
	workers []worker
	// runner runs the workers of a call: Config.Runner, or goroutines of the
	// Pool's own. part is a worker's body, built once, so handing it over
	// allocates nothing.
	runner Runner
	part   func(w int)
	job    job
}

// NewPool returns a Pool for cfg. It fails if cfg.Kernel is not supported by
// this CPU or build, or cfg.Threads is negative.
func NewPool(cfg Config) (*Pool, error) {
	if cfg.Threads < 0 {
		return nil, fmt.Errorf("gemm: Config.Threads = %d, must be >= 0", cfg.Threads)
	}
	spec, err := lookupKernel(cfg.Kernel)
	if err != nil {
		return nil, err
	}
	threads := cfg.Threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{spec: spec, threads: threads, workers: make([]worker, threads)}
	p.part = func(w int) { p.workers[w].err = p.runWorker(w) }
	p.runner = cfg.Runner
	if p.runner == nil {
		p.runner = newOwnGoroutines(threads)
	}
	return p, nil
}

// ownGoroutines is the default Runner: part 0 on the caller, the others on
// goroutines started for the call and joined before Run returns.
type ownGoroutines struct {
	wg   sync.WaitGroup
	part func(w int)
	// starts[w] is worker w's goroutine body, built once: starting a goroutine
	// from a cached func value allocates nothing, while `go f(args)` would
	// allocate a closure on every call.
	starts []func()
}

func newOwnGoroutines(threads int) *ownGoroutines {
	g := &ownGoroutines{starts: make([]func(), threads)}
	for w := range g.starts {
		g.starts[w] = func() {
			defer g.wg.Done()
			g.part(w)
		}
	}
	return g
}

func (g *ownGoroutines) Run(n int, part func(w int)) {
	g.part = part
	g.wg.Add(n - 1)
	for w := 1; w < n; w++ {
		go g.starts[w]()
	}
	part(0)
	g.wg.Wait()
	g.part = nil
}

// Kernel returns the micro-kernel this Pool runs.
func (p *Pool) Kernel() Kernel { return p.spec.kind }

// Threads returns the maximum number of goroutines a call uses.
func (p *Pool) Threads() int { return p.threads }

// Float32 computes C (=|+=) op(A)·op(B) in float32.
func (p *Pool) Float32(ctx context.Context, op Op, a, b, c []float32) error {
	return p.Float32Batched(ctx, op, Batch{Count: 1}, a, b, c)
}

// Float32Batched computes batch.Count independent float32 products.
func (p *Pool) Float32Batched(ctx context.Context, op Op, batch Batch, a, b, c []float32) error {
	in := inputs{a: operand{f32: a}, b: operand{f32: b}, cf32: c}
	if err := validate(&op, batch, len(a), len(b), len(c)); err != nil {
		return err
	}
	if err := checkOverlapF32(a, b, c); err != nil {
		return err
	}
	return p.run(ctx, op, batch, in)
}

// BFloat16 computes C (=|+=) op(A)·op(B) with A and B in bfloat16 storage
// (uint16 bit patterns), float32 accumulation and a float32 C.
func (p *Pool) BFloat16(ctx context.Context, op Op, a, b []uint16, c []float32) error {
	return p.BFloat16Batched(ctx, op, Batch{Count: 1}, a, b, c)
}

// BFloat16Batched is the batched form of BFloat16.
func (p *Pool) BFloat16Batched(ctx context.Context, op Op, batch Batch, a, b []uint16, c []float32) error {
	in := inputs{a: operand{bf16: a}, b: operand{bf16: b}, cf32: c}
	if err := validate(&op, batch, len(a), len(b), len(c)); err != nil {
		return err
	}
	return p.run(ctx, op, batch, in)
}

// BFloat16Out is BFloat16 with a bfloat16 C: the product is accumulated in
// float32 over the whole K and rounded once (with Accumulate, C's old value is
// added in float32 before that single rounding).
func (p *Pool) BFloat16Out(ctx context.Context, op Op, a, b, c []uint16) error {
	return p.BFloat16OutBatched(ctx, op, Batch{Count: 1}, a, b, c)
}

// BFloat16OutBatched is the batched form of BFloat16Out.
func (p *Pool) BFloat16OutBatched(ctx context.Context, op Op, batch Batch, a, b, c []uint16) error {
	in := inputs{a: operand{bf16: a}, b: operand{bf16: b}, cbf16: c, bf16Out: true}
	if err := validate(&op, batch, len(a), len(b), len(c)); err != nil {
		return err
	}
	if err := checkOverlapU16(a, b, c); err != nil {
		return err
	}
	return p.run(ctx, op, batch, in)
}
