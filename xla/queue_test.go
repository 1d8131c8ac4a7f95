package xla_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/xla"
)

func openQueueRT(t *testing.T, n int, delay time.Duration) *xla.Runtime {
	t.Helper()
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go", NumDevices: n, ExecutionDelay: delay})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// TestDispatchOrderAndReads: executions run in dispatch order on one goroutine, Dispatch returns
// before they run, a Read waits for everything before it and counts once, and idle gaps are
// measured per device between executions.
func TestDispatchOrderAndReads(t *testing.T) {
	rt := openQueueRT(t, 2, 20*time.Millisecond)
	ctx := context.Background()
	var order []int
	var running atomic.Int32
	release := make(chan struct{})
	for i := range 3 {
		if _, err := rt.Dispatch(ctx, "job", nil, func() error {
			if i == 0 {
				<-release // the first execution cannot finish before every Dispatch has returned
			}
			if running.Add(1) != 1 {
				t.Error("two executions ran at once")
			}
			defer running.Add(-1)
			order = append(order, i) // only the executor writes; the Read below orders the test's read
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	close(release) // reached only because Dispatch returned while execution 0 was blocked
	var seen []int
	if err := rt.Read(ctx, "order", func() error { seen = append(seen, order...); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 || seen[0] != 0 || seen[1] != 1 || seen[2] != 2 {
		t.Errorf("executions ran in order %v", seen)
	}
	time.Sleep(30 * time.Millisecond)
	if _, err := rt.Dispatch(ctx, "after a pause", []int{1}, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := rt.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	st := rt.Stats()
	if st.Executions != 4 || st.BlockingReads != 2 {
		t.Errorf("stats %+v: want 4 executions and 2 blocking reads", st)
	}
	// Device 1 waited out the pause: ≥ 30 ms idle; the slow executions count as busy.
	if st.DeviceIdle[1] < 30*time.Millisecond {
		t.Errorf("device idle %v: device 1 sat idle ≥ 30 ms between its executions", st.DeviceIdle)
	}
	if st.DeviceBusy[0] < 60*time.Millisecond || st.DeviceBusy[1] < 80*time.Millisecond {
		t.Errorf("device busy %v: 3 (device 0) and 4 (device 1) executions of ≥ 20 ms", st.DeviceBusy)
	}
	t.Logf("busy %v, idle %v", st.DeviceBusy, st.DeviceIdle)
}

// TestExecutionErrorAtNextRead: a failing execution is reported by the next Read, naming it; the
// executions queued behind it are not run; after the report the queue runs again. A panic in an
// execution is an error, not a crash.
func TestExecutionErrorAtNextRead(t *testing.T) {
	rt := openQueueRT(t, 1, 0)
	ctx := context.Background()
	boom := errors.New("boom")
	var ranAfter atomic.Bool
	if _, err := rt.Dispatch(ctx, "train step 17", nil, func() error { return boom }); err != nil {
		t.Fatal(err)
	}
	e, err := rt.Dispatch(ctx, "train step 18", nil, func() error { ranAfter.Store(true); return nil })
	if err != nil {
		t.Fatal(err)
	}
	err = rt.Sync(ctx)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "train step 17") {
		t.Fatalf("Sync = %v, want the failure of train step 17", err)
	}
	if ranAfter.Load() {
		t.Error("the execution queued behind a failure ran")
	}
	if e.Err() == nil || !strings.Contains(e.Err().Error(), "not run") {
		t.Errorf("step 18: %v", e.Err())
	}
	if _, err := rt.Dispatch(ctx, "panics", nil, func() error { panic("kernel bug") }); err != nil {
		t.Fatal(err)
	}
	if err := rt.Sync(ctx); err == nil || !strings.Contains(err.Error(), "kernel bug") {
		t.Fatalf("a panicking execution: %v", err)
	}
	if _, err := rt.Dispatch(ctx, "fine", nil, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := rt.Sync(ctx); err != nil {
		t.Fatalf("after the report the queue runs again: %v", err)
	}
}

// TestCloseDrainsQueue: Close lets the execution in flight finish, fails the queued ones with
// ErrClosed (their waiters are released), stops the executor goroutine, and refuses new work.
// A Dispatch blocked on a full queue returns when its context ends.
func TestCloseDrainsQueue(t *testing.T) {
	before := runtime.NumGoroutine()
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go", NumDevices: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	release := make(chan struct{})
	var finished atomic.Bool
	inFlight, err := rt.Dispatch(ctx, "in flight", nil, func() error {
		<-release
		finished.Store(true)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var queued []*xla.Execution
	for range xla.QueueDepth {
		e, err := rt.Dispatch(ctx, "queued", nil, func() error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, e)
	}
	// The queue is full: a further Dispatch blocks until its context ends.
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := rt.Dispatch(cctx, "one too many", nil, func() error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Dispatch on a full queue = %v, want the context's error", err)
	}
	closed := make(chan struct{})
	go func() { rt.Close(); close(closed) }()
	time.Sleep(20 * time.Millisecond)
	close(release)
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	<-inFlight.Done()
	if !finished.Load() || inFlight.Err() != nil {
		t.Errorf("the execution in flight: finished %v, err %v", finished.Load(), inFlight.Err())
	}
	for _, e := range queued {
		select {
		case <-e.Done():
			if e.Err() != nil && !errors.Is(e.Err(), xla.ErrClosed) {
				t.Errorf("queued execution: %v", e.Err())
			}
		default:
			t.Error("a queued execution's waiter was never released")
		}
	}
	if _, err := rt.Dispatch(ctx, "late", nil, func() error { return nil }); !errors.Is(err, xla.ErrClosed) {
		t.Errorf("Dispatch after Close = %v", err)
	}
	if err := rt.Read(ctx, "late", nil); !errors.Is(err, xla.ErrClosed) {
		t.Errorf("Read after Close = %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Close, %d before Open", n, before)
	}
}

// TestTransferCounts: Transfer puts tensors on a device once, counting bytes; a tensor already
// there is not sent again; a bad device is an error naming it.
func TestTransferCounts(t *testing.T) {
	rt := openQueueRT(t, 2, 0)
	a := tensors.FromFlatDataAndDimensions([]float32{1, 2, 3, 4}, 2, 2)
	b := tensors.FromFlatDataAndDimensions([]int32{1, 2, 3}, 3)
	if err := rt.Transfer(1, a, b); err != nil {
		t.Fatal(err)
	}
	if err := rt.Transfer(1, a); err != nil {
		t.Fatal(err)
	}
	st := rt.Stats()
	if st.Transfers != 2 || st.TransferBytes != 16+12 {
		t.Errorf("%d transfers of %d bytes, want 2 of 28", st.Transfers, st.TransferBytes)
	}
	if err := rt.Transfer(2, a); err == nil || !strings.Contains(err.Error(), "device 2 of 2") {
		t.Errorf("Transfer to device 2 of 2: %v", err)
	}
}

// TestStreamsKeepTheirFailures: a failure on one stream stops that stream's later executions and
// is reported by its next read only; another stream on the same runtime (another training job)
// runs on and reads no error.
func TestStreamsKeepTheirFailures(t *testing.T) {
	rt := openQueueRT(t, 1, 0)
	ctx := context.Background()
	a, b := rt.NewStream(), rt.NewStream()
	if _, err := a.Dispatch(ctx, "job a step 3", nil, func() error { return errors.New("boom") }); err != nil {
		t.Fatal(err)
	}
	var bRan atomic.Bool
	if _, err := b.Dispatch(ctx, "job b step 1", nil, func() error { bRan.Store(true); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(ctx); err != nil || !bRan.Load() {
		t.Fatalf("stream b: ran %v, read %v: another stream's failure leaked", bRan.Load(), err)
	}
	if err := a.Sync(ctx); err == nil || !strings.Contains(err.Error(), "job a step 3") {
		t.Fatalf("stream a: %v, want its failure", err)
	}
}
