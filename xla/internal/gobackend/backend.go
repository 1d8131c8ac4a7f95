package gobackend

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"

	"github.com/gotpu/gotpu/xla/internal/gemm"
)

// Name is what Backend.Name reports.
const Name = "gotpu (go)"

// fallbackConfig configures the simplego backend that runs the fallback segments (and the shape
// builder). Sequential op execution: simplego's parallel executor deadlocks with several
// DotGenerals ready at once in GoMLX v0.26.0, and fallback segments hold no large products anyway.
const fallbackConfig = "ops_sequential"

// Config configures a Backend.
type Config struct {
	// Threads is the number of goroutines a native matrix product may use; 0 means GOMAXPROCS.
	Threads int
	// Kernel forces a GEMM micro-kernel (tests run every one); the zero value picks the fastest.
	Kernel gemm.Kernel
	// NumDevices is the number of virtual devices (replicas of an SPMD program); 0 means 1. They
	// share the host's cores and memory.
	NumDevices int
	// FallbackBF16 leaves bfloat16 elementwise operations, reductions and transposes, and all
	// comparisons, to simplego, as before they were native. Tests and benchmarks set it: whole
	// programs (a mixed-precision training step) must give bitwise the same results either way.
	FallbackBF16 bool
}

// MaxDevices bounds Config.NumDevices.
const MaxDevices = 1024

// Backend is gotpu's CPU backend: its builders record the graph, and Compile runs DotGeneral on
// gotpu's GEMM and every other operation on simplego (see the package documentation). Buffers are
// simplego's, so data moves between native operations and fallback segments without copies.
//
// It has Config.NumDevices virtual devices. It is safe for concurrent use.
type Backend struct {
	sg         backends.Backend // simplego: storage, fallback segments, shape builders
	cfg        Config
	numDevices int

	// workers are the idle native-op workers (a GEMM pool and packing scratch), by thread count.
	// An execution (one per replica of an SPMD program) takes one (or makes one) and puts it
	// back, so concurrent executions never share buffers and steady state allocates none.
	workerMu sync.Mutex
	workers  map[int][]*worker

	finalizeOnce sync.Once

	// live counts, per device, the bytes of live buffers (DeviceBytes).
	live []atomic.Int64

	// compiles and compileNanos count Builder.Compile calls and their time (CompileStats).
	compiles, compileNanos atomic.Int64
}

// CompileStats returns how many programs the backend has compiled (Builder.Compile: partitioning
// into native operations and fallback segments, fusion planning, buffer planning) and the time
// that took. It is what a persistent compilation cache could save on this backend.
func (b *Backend) CompileStats() (n int, d time.Duration) {
	return int(b.compiles.Load()), time.Duration(b.compileNanos.Load())
}

var _ backends.Backend = (*Backend)(nil)

// New returns a Backend. It fails if cfg asks for a GEMM kernel this CPU does not support.
func New(cfg Config) (*Backend, error) {
	if cfg.NumDevices < 0 || cfg.NumDevices > MaxDevices {
		return nil, fmt.Errorf("gobackend.Config.NumDevices: %d is not in [0, %d]", cfg.NumDevices, MaxDevices)
	}
	if cfg.Threads < 0 {
		return nil, fmt.Errorf("gobackend.Config.Threads: %d is negative", cfg.Threads)
	}
	threads := cfg.Threads
	if threads == 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	// The first worker is made now, so that a bad Config fails here and not at the first product.
	w, err := newWorker(cfg, threads)
	if err != nil {
		return nil, err
	}
	sg, err := simplego.New(fallbackConfig)
	if err != nil {
		return nil, fmt.Errorf("gobackend: simplego fallback: %w", err)
	}
	b := &Backend{sg: sg, cfg: cfg, numDevices: max(cfg.NumDevices, 1), workers: map[int][]*worker{}}
	b.live = make([]atomic.Int64, b.numDevices)
	b.releaseWorker(w)
	return b, nil
}

// threads is the number of goroutines one execution's native operations use: Config.Threads
// (GOMAXPROCS by default), divided among the concurrent replicas of an SPMD execution, which
// share the same cores.
func (b *Backend) threads(replicas int) int {
	t := b.cfg.Threads
	if t == 0 {
		t = runtime.GOMAXPROCS(0)
	}
	return max(1, t/max(replicas, 1))
}

// worker is what one execution needs to run native operations.
type worker struct {
	threads int
	pool    *gemm.Pool
	scratch dotScratch
	// regs are the fusion registers of each goroutine a native elementwise or reduction
	// operation splits into (Config.Threads of them); srcs, hsrcs (bfloat16) and bsrcs are the
	// leaf tables of the running fusion.
	regs  []fuseRegs
	srcs  [][]float32
	hsrcs [][]uint16
	bsrcs [][]bool
	// team runs the parts of split fusions, reductions, comparisons and transposes; fuseJob,
	// reduceJob, compareJob and transposeJob are the operation being split, kept here so that
	// splitting allocates nothing.
	team         *team
	fuseJob      fuseJob
	reduceJob    reduceJob
	compareJob   compareJob
	vecJob       vecJob
	transposeJob transposeJob
	// in holds the operands' data of the running native operation; extra and xbufs the data
	// and buffers of a fusion's extra outputs.
	in    []any
	extra [][]float32
	xbufs []backends.Buffer
}

// newWorker makes a worker using threads goroutines, with its GEMM pool.
func newWorker(cfg Config, threads int) (*worker, error) {
	// The GEMM pool runs its second worker on the team's helper, which is already running
	// (polling for its next part) more often than not, instead of a goroutine per product.
	tm := newTeam(threads)
	pool, err := gemm.NewPool(gemm.Config{Threads: threads, Kernel: cfg.Kernel, Runner: &teamRunner{tm: tm}})
	if err != nil {
		tm.stop()
		return nil, fmt.Errorf("gobackend: %w", err)
	}
	return &worker{threads: threads, pool: pool, regs: make([]fuseRegs, threads), team: tm}, nil
}

// acquireWorker returns an idle worker using threads goroutines, creating one if all are busy.
func (b *Backend) acquireWorker(threads int) (*worker, error) {
	b.workerMu.Lock()
	if ws := b.workers[threads]; len(ws) > 0 {
		w := ws[len(ws)-1]
		b.workers[threads] = ws[:len(ws)-1]
		b.workerMu.Unlock()
		return w, nil
	}
	b.workerMu.Unlock()
	return newWorker(b.cfg, threads)
}

// releaseWorker puts w back on the free list, or stops it if the backend was finalized.
func (b *Backend) releaseWorker(w *worker) {
	b.workerMu.Lock()
	defer b.workerMu.Unlock()
	if b.workers == nil {
		w.team.stop()
		return
	}
	b.workers[w.threads] = append(b.workers[w.threads], w)
}

// Kernel reports the GEMM micro-kernel native products use.
func (b *Backend) Kernel() gemm.Kernel {
	w, err := b.acquireWorker(b.threads(1))
	if err != nil {
		return b.cfg.Kernel
	}
	defer b.releaseWorker(w)
	return w.pool.Kernel()
}

func (b *Backend) Name() string   { return Name }
func (b *Backend) String() string { return Name }

func (b *Backend) Description() string {
	return fmt.Sprintf("gotpu CPU backend: GEMM (%s) and float32/bfloat16 elementwise, reductions and comparisons native, other ops on %s", b.Kernel(), b.sg.Description())
}

func (b *Backend) NumDevices() int { return b.numDevices }

func (b *Backend) DeviceDescription(d backends.DeviceNum) string {
	return fmt.Sprintf("virtual device %d of %d on the host CPU (gotpu CPU backend)", d, b.numDevices)
}

// Capabilities are simplego's: every operation either runs natively or falls back to it.
func (b *Backend) Capabilities() backends.Capabilities { return b.sg.Capabilities().Clone() }

// Builder returns a recording builder for one computation.
func (b *Backend) Builder(name string) backends.Builder { return newBuilder(b, name) }

// Finalize releases the fallback backend. Buffers and executables must not be used afterwards.
func (b *Backend) Finalize() {
	b.finalizeOnce.Do(func() {
		b.workerMu.Lock()
		for _, ws := range b.workers {
			for _, w := range ws {
				w.team.stop()
			}
		}
		b.workers = nil
		b.workerMu.Unlock()
		b.sg.Finalize()
	})
}

func (b *Backend) IsFinalized() bool { return b.sg.IsFinalized() }
