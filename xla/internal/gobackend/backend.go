package gobackend

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/shapes"

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
}

// Backend is gotpu's CPU backend: its builders record the graph, and Compile runs DotGeneral on
// gotpu's GEMM and every other operation on simplego (see the package documentation). Buffers are
// simplego's, so data moves between native operations and fallback segments without copies.
//
// It has one device. It is safe for concurrent use.
type Backend struct {
	sg  backends.Backend // simplego: buffers, fallback segments, shape builders
	cfg Config

	// workers are the idle native-op workers (a GEMM pool and packing scratch). An execution
	// takes one (or makes one) and puts it back, so concurrent executions never share buffers and
	// steady state allocates none.
	workerMu sync.Mutex
	workers  []*worker

	finalizeOnce sync.Once
}

var _ backends.Backend = (*Backend)(nil)

// New returns a Backend. It fails if cfg asks for a GEMM kernel this CPU does not support.
func New(cfg Config) (*Backend, error) {
	// The first worker is made now, so that a bad Config fails here and not at the first product.
	w, err := newWorker(cfg)
	if err != nil {
		return nil, err
	}
	sg, err := simplego.New(fallbackConfig)
	if err != nil {
		return nil, fmt.Errorf("gobackend: simplego fallback: %w", err)
	}
	return &Backend{sg: sg, cfg: cfg, workers: []*worker{w}}, nil
}

// worker is what one execution needs to run native operations.
type worker struct {
	pool    *gemm.Pool
	scratch dotScratch
	// regs are the fusion registers of each goroutine a native elementwise or reduction
	// operation splits into (Config.Threads of them); srcs and bsrcs are the leaf
	// tables of the running fusion.
	regs  []fuseRegs
	srcs  [][]float32
	bsrcs [][]bool
}

// newWorker makes a worker with its GEMM pool.
func newWorker(cfg Config) (*worker, error) {
	pool, err := gemm.NewPool(gemm.Config{Threads: cfg.Threads, Kernel: cfg.Kernel})
	if err != nil {
		return nil, fmt.Errorf("gobackend: %w", err)
	}
	threads := cfg.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	return &worker{pool: pool, regs: make([]fuseRegs, threads)}, nil
}

// acquireWorker returns an idle worker, creating one if all are busy.
func (b *Backend) acquireWorker() (*worker, error) {
	b.workerMu.Lock()
	if n := len(b.workers); n > 0 {
		w := b.workers[n-1]
		b.workers = b.workers[:n-1]
		b.workerMu.Unlock()
		return w, nil
	}
	b.workerMu.Unlock()
	return newWorker(b.cfg)
}

func (b *Backend) releaseWorker(w *worker) {
	b.workerMu.Lock()
	b.workers = append(b.workers, w)
	b.workerMu.Unlock()
}

// Kernel reports the GEMM micro-kernel native products use.
func (b *Backend) Kernel() gemm.Kernel {
	w, err := b.acquireWorker()
	if err != nil {
		return b.cfg.Kernel
	}
	defer b.releaseWorker(w)
	return w.pool.Kernel()
}

func (b *Backend) Name() string   { return Name }
func (b *Backend) String() string { return Name }

func (b *Backend) Description() string {
	return fmt.Sprintf("gotpu CPU backend: GEMM (%s) and float32 elementwise/reductions native, other ops on %s", b.Kernel(), b.sg.Description())
}

func (b *Backend) NumDevices() int { return 1 }

func (b *Backend) DeviceDescription(d backends.DeviceNum) string {
	return fmt.Sprintf("host CPU %d (gotpu CPU backend)", d)
}

// Capabilities are simplego's: every operation either runs natively or falls back to it.
func (b *Backend) Capabilities() backends.Capabilities { return b.sg.Capabilities().Clone() }

// Builder returns a recording builder for one computation.
func (b *Backend) Builder(name string) backends.Builder { return newBuilder(b, name) }

// Finalize releases the fallback backend. Buffers and executables must not be used afterwards.
func (b *Backend) Finalize() {
	b.finalizeOnce.Do(func() {
		b.workerMu.Lock()
		b.workers = nil
		b.workerMu.Unlock()
		b.sg.Finalize()
	})
}

func (b *Backend) IsFinalized() bool { return b.sg.IsFinalized() }

// The data interface is simplego's: gotpu's native operations read and write simplego buffers
// through their shared slices.

func (b *Backend) BufferFinalize(buf backends.Buffer) error { return b.sg.BufferFinalize(buf) }
func (b *Backend) BufferShape(buf backends.Buffer) (shapes.Shape, error) {
	return b.sg.BufferShape(buf)
}
func (b *Backend) BufferDeviceNum(buf backends.Buffer) (backends.DeviceNum, error) {
	return b.sg.BufferDeviceNum(buf)
}
func (b *Backend) BufferToFlatData(buf backends.Buffer, flat any) error {
	return b.sg.BufferToFlatData(buf, flat)
}
func (b *Backend) BufferFromFlatData(d backends.DeviceNum, flat any, s shapes.Shape) (backends.Buffer, error) {
	return b.sg.BufferFromFlatData(d, flat, s)
}
func (b *Backend) HasSharedBuffers() bool { return true }
func (b *Backend) NewSharedBuffer(d backends.DeviceNum, s shapes.Shape) (backends.Buffer, any, error) {
	return b.sg.NewSharedBuffer(d, s)
}
func (b *Backend) BufferData(buf backends.Buffer) (any, error) { return b.sg.BufferData(buf) }
func (b *Backend) BufferCopyToDevice(src backends.Buffer, d backends.DeviceNum) (backends.Buffer, error) {
	return b.sg.BufferCopyToDevice(src, d)
}
