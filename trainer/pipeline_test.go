package trainer_test

import (
	"context"
	"testing"
	"time"

	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// stepWatch records, at every OnStepEnd, how many blocking reads the runtime has made and how
// many steps the device has finished.
type stepWatch struct {
	trainer.BaseCallback
	rt        *xla.Runtime
	reads     []int64
	completed []int
}

func (w *stepWatch) OnStepEnd(_ context.Context, e *trainer.Event) error {
	w.reads = append(w.reads, w.rt.Stats().BlockingReads)
	w.completed = append(w.completed, e.CompletedSteps)
	return nil
}

// TestHostSyncsOnlyAtSyncPoints is issue #15's count: on gotpu's backend with 2 virtual devices,
// logging every 10 of 50 steps, evaluating every 25 and saving every 30, the host blocks on the
// device exactly once per logging point (5), evaluation (2), save (2: step 30, and the last step,
// where HF's flow always saves) and at the end (1) — never once per step — and each training log
// entry reports its interval's reads and idle fraction.
func TestHostSyncsOnlyAtSyncPoints(t *testing.T) { hostSyncsOnlyAtSyncPoints(t, openRT(t, 2)) }

// hostSyncsOnlyAtSyncPoints is the check of TestHostSyncsOnlyAtSyncPoints on any runtime (the XLA
// CPU plugin's in pipeline_xlacpu_test.go): the counts depend on the trainer, not the backend.
func hostSyncsOnlyAtSyncPoints(t *testing.T, rt *xla.Runtime) {
	a := baseArgs(t)
	a.MaxSteps, a.LoggingSteps, a.PerDeviceTrainBatchSize = 50, 10, 2
	evalSteps := 25.0
	a.EvalStrategy, a.EvalSteps = "steps", &evalSteps
	a.SaveStrategy, a.SaveSteps = "steps", 30 // and at step 50, the last
	w := &stepWatch{rt: rt}
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(64, 0), noise(8), trainer.Options{Runtime: rt, Logger: quiet(),
		Callbacks: []trainer.Callback{w}})
	if err != nil {
		t.Fatal(err)
	}
	before := rt.Stats()
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	after := rt.Stats()
	reads := after.BlockingReads - before.BlockingReads
	const want = 5 + 2 + 2 + 1
	t.Logf("50 steps: %d blocking reads (want %d), %d executions, %d programs, %d transfers (%d bytes)",
		reads, want, after.Executions-before.Executions, after.Programs-before.Programs,
		after.Transfers-before.Transfers, after.TransferBytes-before.TransferBytes)
	t.Logf("reads at each OnStepEnd: %v", w.reads)
	if reads != want {
		t.Errorf("%d blocking reads, want %d (5 logging points, 2 evaluations, 2 saves, the end)", reads, want)
	}
	// Between sync points a step adds no read: steps 1-9 all see the count of the start.
	for i := 1; i < 9; i++ {
		if w.reads[i] != w.reads[0] {
			t.Errorf("step %d: %d blocking reads so far, step 1 saw %d: a read between logging points", i+1, w.reads[i], w.reads[0])
		}
	}
	var logged, syncs int64
	for _, e := range tr.State().LogHistory {
		n, ok := e.Int("host_syncs")
		if !ok {
			continue
		}
		logged++
		syncs += n
		f, ok := e.Float("device_idle_fraction")
		if !ok || f < 0 || f > 1 {
			t.Errorf("entry %v: device_idle_fraction %v", e, f)
		}
	}
	if logged != 5 {
		t.Errorf("%d training entries carry host_syncs, want 5", logged)
	}
	// The entries count the reads up to and including their own; the save at 30 is counted in
	// the entry at 40, the evaluation at 25 in the one at 30; the evaluation and save at 50 and
	// the end come after the last entry.
	if syncs != want-3 {
		t.Errorf("log entries report %d host syncs in all, want %d (all but the evaluation and save at 50 and the end)", syncs, want-3)
	}
	for i, c := range w.completed {
		if c < 0 || c > i+1 {
			t.Errorf("step %d: %d steps reported complete", i+1, c)
		}
	}
}

// TestStepReturnsBeforeDevice: with every execution made slow on purpose (300 ms), the training
// loop dispatches steps without waiting for them: OnStepEnd of the early steps runs while the
// device has finished none of them, and the run's blocking reads are its sync points only.
func TestStepReturnsBeforeDevice(t *testing.T) {
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go", NumDevices: 1, ExecutionDelay: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	a := baseArgs(t)
	a.MaxSteps, a.LoggingSteps, a.SaveStrategy = 4, 4, "no"
	w := &stepWatch{rt: rt}
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(32, 0), nil, trainer.Options{Runtime: rt, Logger: quiet(),
		Callbacks: []trainer.Callback{w}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Logf("completed steps seen at OnStepEnd of steps 1..4: %v", w.completed)
	for i := range 3 { // the queue holds xla.QueueDepth steps: the first ones cannot have finished
		if w.completed[i] != 0 {
			t.Errorf("step %d: OnStepEnd ran after %d steps finished on the device; the loop waited for it", i+1, w.completed[i])
		}
	}
}
