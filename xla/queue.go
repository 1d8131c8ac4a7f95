package xla

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// ErrClosed is returned for work dispatched to, or still queued on, a closed Runtime.
var ErrClosed = errors.New("xla: runtime is closed")

// QueueDepth is how many dispatched jobs may wait for the executor before Dispatch blocks. It
// bounds what the host runs ahead of the device (and so the device memory held by queued
// inputs); a few steps are enough to hide the host's work between dispatches.
const QueueDepth = 4

// Execution is a unit of device work dispatched to a Runtime: one or more program executions
// that run, in dispatch order, on the runtime's executor goroutine. Its outputs become ready
// when it completes; only waiting for it (Wait, or a Read after it) blocks, and only the waiter.
type Execution struct {
	name    string
	devices []int
	fn      func() error
	read    bool // a host read: waited for by the host, not counted as a program execution

	stream     *Stream
	done       chan struct{}
	err        error
	start, end time.Time
}

// Name is the name the execution was dispatched with ("train step 17").
func (e *Execution) Name() string { return e.name }

// Done is closed when the execution has finished (or was abandoned).
func (e *Execution) Done() <-chan struct{} { return e.done }

// Err is the execution's error once Done is closed.
func (e *Execution) Err() error {
	select {
	case <-e.done:
		return e.err
	default:
		return nil
	}
}

// Times returns when the execution started and finished on the executor (zero until Done).
func (e *Execution) Times() (start, end time.Time) {
	<-e.done
	return e.start, e.end
}

// QueueStats are the runtime's counters since Open.
type QueueStats struct {
	// Executions counts jobs run by the executor that execute programs (Dispatch); Programs the
	// program executions they reported (ReportPrograms), so a train step with 4 accumulation
	// micro-batches is one execution and 4 programs.
	Executions, Programs int64
	// Transfers and TransferBytes count host→device transfers made through Transfer.
	Transfers, TransferBytes int64
	// BlockingReads counts the times the host blocked for the device: Read and Sync.
	BlockingReads int64
	// DeviceBusy and DeviceIdle are, per device, the time spent executing programs and the gaps
	// between the end of one execution and the start of the next on that device (time before a
	// device's first execution is not idle time: nothing had been asked of it).
	DeviceBusy, DeviceIdle []time.Duration
}

// queue is a Runtime's executor: one goroutine, started by Open and stopped by Close, running
// jobs in order. Errors are sticky per Stream until reported: after a job fails, the stream's
// later jobs that execute programs are not run (their inputs may be the failed job's outputs)
// and fail naming it; the stream's next Read or Sync returns the first failure and clears it.
type queue struct {
	delay time.Duration // Config.ExecutionDelay

	jobs    chan *Execution
	stop    chan struct{}
	stopped chan struct{}
	sending sync.WaitGroup // enqueues in progress, so close knows none is still sending

	mu      sync.Mutex
	closed  bool
	stats   QueueStats
	lastEnd []time.Time

	transfers, transferBytes atomic.Int64
}

func newQueue(numDevices int, delay time.Duration) *queue {
	q := &queue{
		delay: delay,
		jobs:  make(chan *Execution, QueueDepth), stop: make(chan struct{}), stopped: make(chan struct{}),
		stats:   QueueStats{DeviceBusy: make([]time.Duration, numDevices), DeviceIdle: make([]time.Duration, numDevices)},
		lastEnd: make([]time.Time, numDevices),
	}
	go q.run()
	return q
}

// run is the executor goroutine; it returns when stop is closed, after the job in flight.
func (q *queue) run() {
	defer close(q.stopped)
	for {
		select {
		case <-q.stop:
			return
		case e := <-q.jobs:
			q.execute(e)
		}
	}
}

func (q *queue) execute(e *Execution) {
	q.mu.Lock()
	failed := e.stream.failure
	q.mu.Unlock()
	if failed != nil && !e.read {
		e.err = fmt.Errorf("%s: not run: %w", e.name, failed)
		close(e.done)
		return
	}
	e.start = time.Now()
	if !e.read && q.delay > 0 {
		time.Sleep(q.delay) // a slow kernel on purpose (Config.ExecutionDelay): busy time
	}
	if e.fn != nil {
		e.err = Call(e.name, e.fn)
		if e.err != nil {
			e.err = fmt.Errorf("%s: %w", e.name, e.err)
		}
	}
	e.end = time.Now()
	q.mu.Lock()
	if !e.read {
		q.stats.Executions++
		for _, d := range e.devices {
			if !q.lastEnd[d].IsZero() && e.start.After(q.lastEnd[d]) {
				q.stats.DeviceIdle[d] += e.start.Sub(q.lastEnd[d])
			}
			q.stats.DeviceBusy[d] += e.end.Sub(e.start)
			q.lastEnd[d] = e.end
		}
		if e.err != nil && e.stream.failure == nil {
			e.stream.failure = e.err
		}
	}
	q.mu.Unlock()
	close(e.done)
}

// enqueue hands e to the executor, blocking while QueueDepth jobs wait.
func (q *queue) enqueue(ctx context.Context, e *Execution) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	q.sending.Add(1)
	q.mu.Unlock()
	defer q.sending.Done()
	select {
	case <-q.stop:
		return ErrClosed
	default:
	}
	select {
	case q.jobs <- e:
		return nil
	case <-q.stop:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops the executor after the job in flight; what is still queued fails with ErrClosed,
// so that no waiter hangs. It is idempotent.
func (q *queue) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	q.mu.Unlock()
	close(q.stop)
	q.sending.Wait() // no enqueue is sending any more: nothing can be added after the drain
	<-q.stopped
	for {
		select {
		case e := <-q.jobs:
			e.err = fmt.Errorf("%s: %w", e.name, ErrClosed)
			close(e.done)
		default:
			return
		}
	}
}

// Stream is an ordered sequence of executions and reads whose errors are its own: a failed
// execution stops the stream's later executions and is reported by the stream's next Read or
// Sync, never by another stream's. All streams of a runtime share its one executor, so their
// executions still run one at a time in dispatch order. A training run uses its own stream, so
// two runs on one runtime (the service's jobs) never see each other's failures. A Stream is
// safe for concurrent use; its failure state is guarded by the queue's lock.
type Stream struct {
	rt      *Runtime
	failure error // first failure not yet reported to a reader (guarded by rt.queue.mu)
}

// NewStream returns a new stream on the runtime.
func (r *Runtime) NewStream() *Stream { return &Stream{rt: r} }

// Dispatch queues fn on the runtime's default stream (Stream.Dispatch).
func (r *Runtime) Dispatch(ctx context.Context, name string, devices []int, fn func() error) (*Execution, error) {
	return r.stream.Dispatch(ctx, name, devices, fn)
}

// Read runs fn after everything dispatched before it, on the runtime's default stream
// (Stream.Read).
func (r *Runtime) Read(ctx context.Context, name string, fn func() error) error {
	return r.stream.Read(ctx, name, fn)
}

// Sync waits for everything dispatched so far, on the runtime's default stream (Stream.Sync).
func (r *Runtime) Sync(ctx context.Context) error { return r.stream.Sync(ctx) }

// Dispatch queues fn as an execution on devices (nil: every device of the runtime) and returns
// at once; fn runs on the runtime's executor goroutine after everything dispatched before it. It
// blocks only while QueueDepth executions are already waiting (or until ctx ends). fn's panics
// are recovered into the execution's error.
func (s *Stream) Dispatch(ctx context.Context, name string, devices []int, fn func() error) (*Execution, error) {
	r := s.rt
	if devices == nil {
		devices = make([]int, r.NumDevices())
		for i := range devices {
			devices[i] = i
		}
	}
	for _, d := range devices {
		if d < 0 || d >= r.NumDevices() {
			return nil, fmt.Errorf("xla.Runtime.Dispatch %s: device %d of %d", name, d, r.NumDevices())
		}
	}
	e := &Execution{name: name, devices: devices, fn: fn, stream: s, done: make(chan struct{})}
	if err := r.queue.enqueue(ctx, e); err != nil {
		return nil, fmt.Errorf("xla.Runtime.Dispatch %s: %w", name, err)
	}
	return e, nil
}

// Read blocks until everything dispatched before it has run, then runs fn (which copies device
// values to the host) on the executor, in order with the executions, and returns its error — or
// the first failure of one of the stream's executions since its last Read or Sync, naming it.
// It counts as one blocking read however much fn copies.
func (s *Stream) Read(ctx context.Context, name string, fn func() error) error {
	q := s.rt.queue
	e := &Execution{name: name, fn: fn, read: true, stream: s, done: make(chan struct{})}
	q.mu.Lock()
	q.stats.BlockingReads++
	q.mu.Unlock()
	if err := q.enqueue(ctx, e); err != nil {
		return fmt.Errorf("xla.Runtime.Read %s: %w", name, err)
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	q.mu.Lock()
	failure := s.failure
	s.failure = nil
	q.mu.Unlock()
	if failure != nil {
		return failure
	}
	return e.err
}

// Sync blocks until everything dispatched so far has run: a Read that copies nothing.
func (s *Stream) Sync(ctx context.Context) error { return s.Read(ctx, "sync", nil) }

// Transfer copies host tensors to device d, so that programs dispatched later find them there
// (torch_xla's MpDeviceLoader puts batches on the device the same way). It may be called from
// any goroutine, concurrently with executions; the bytes are counted in QueueStats.
func (r *Runtime) Transfer(d int, ts ...*tensors.Tensor) (err error) {
	defer Recover(&err, "xla.Runtime.Transfer")
	if d < 0 || d >= r.NumDevices() {
		return fmt.Errorf("xla.Runtime.Transfer: device %d of %d", d, r.NumDevices())
	}
	for _, t := range ts {
		if t.IsOnDevice(backends.DeviceNum(d)) {
			continue
		}
		if err := t.MaterializeOnDevice(r.backend, false, backends.DeviceNum(d)); err != nil {
			return fmt.Errorf("xla.Runtime.Transfer to device %d: %w", d, err)
		}
		r.queue.transfers.Add(1)
		r.queue.transferBytes.Add(int64(t.Memory()))
	}
	return nil
}

// Stats returns the runtime's counters (a copy).
func (r *Runtime) Stats() QueueStats {
	q := r.queue
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.stats
	s.DeviceBusy = append([]time.Duration(nil), s.DeviceBusy...)
	s.DeviceIdle = append([]time.Duration(nil), s.DeviceIdle...)
	s.Transfers, s.TransferBytes = q.transfers.Load(), q.transferBytes.Load()
	return s
}

// ReportPrograms adds n program executions to QueueStats.Programs (an execution's fn calls it).
func (r *Runtime) ReportPrograms(n int) {
	r.queue.mu.Lock()
	r.queue.stats.Programs += int64(n)
	r.queue.mu.Unlock()
}
