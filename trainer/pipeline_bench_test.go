package trainer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// sleepyCollator waits like I/O (not CPU) before collating each batch.
type sleepyCollator struct {
	data.CausalLMCollator
	wait time.Duration
}

func (c sleepyCollator) Collate(ex []data.Example) (*data.Batch, error) {
	time.Sleep(c.wait)
	return c.CausalLMCollator.Collate(ex)
}

// pipelineRun trains steps steps with every execution taking at least stepTime on the device
// and each batch waiting collateWait to be read, and returns the wall time of Train.
//
// device is "go" (gotpu's backend) or "cpu" (XLA's CPU PJRT plugin, where go-xla's execute blocks
// the runtime's executor goroutine, not the training loop).
func pipelineRun(b *testing.B, device string, steps int, stepTime, collateWait time.Duration, lockstep bool) time.Duration {
	rt, err := xla.Open(context.Background(), xla.Config{Device: device, NumDevices: 1, ExecutionDelay: stepTime})
	if errors.Is(err, xla.ErrPluginNotFound) {
		b.Skipf("no XLA CPU plugin (bash scripts/install-xla-cpu.sh): %v", err)
	}
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	a := trainer.DefaultTrainingArguments()
	a.OutputDir = b.TempDir()
	a.PerDeviceTrainBatchSize, a.MaxSteps, a.LoggingSteps, a.SaveStrategy = 4, steps, float64(steps), "no"
	noBar := true
	a.DisableTqdm = &noBar
	m := tinyGPT2(b, rt)
	tr, err := trainer.New(a, m, counting(256, 0), nil, trainer.Options{Runtime: rt, Logger: quiet(),
		Collator: sleepyCollator{data.CausalLMCollator{BlockSize: 16}, collateWait}, Lockstep: lockstep})
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if _, err := tr.Train(context.Background()); err != nil {
		b.Fatal(err)
	}
	elapsed := time.Since(start)
	// XLA's compile (seconds on 2 cores, varying with the load) is not part of the steady state
	// the difference of two runs is after: take out what the log says it cost.
	for _, e := range tr.State().LogHistory {
		if c, ok := e.Float("compile_seconds"); ok {
			elapsed -= time.Duration(c * float64(time.Second))
		}
	}
	return elapsed
}

// steadyStep is the time per step once compiled and warmed: the difference of a long and a short
// run, divided by the difference in steps.
func steadyStep(b *testing.B, device string, stepTime, collateWait time.Duration, lockstep bool) time.Duration {
	const short, long = 4, 24
	d := pipelineRun(b, device, long, stepTime, collateWait, lockstep) - pipelineRun(b, device, short, stepTime, collateWait, lockstep)
	return d / (long - short)
}

// BenchmarkPipelineOverlap is issue #15's overlap figure: a collator that waits 30 ms per batch
// (I/O-like) in front of a step of ~100 ms on the device. With the device stage and asynchronous
// dispatch the steady-state time per step is the step alone (ratio ≈ 1.0, goal ≤ 1.05); in
// lockstep (Options.Lockstep: no prefetch, a read after every step) host and device take turns
// (≈ 1.3). All three run in one process: the ratios are to the step alone measured here. It runs
// on gotpu's backend ("go") and on XLA's CPU PJRT plugin ("xla-cpu"), whose real executions run
// on the runtime's executor goroutine.
func BenchmarkPipelineOverlap(b *testing.B) {
	for _, dev := range []struct{ name, device string }{{"go", xla.DeviceGo}, {"xla-cpu", xla.DeviceCPU}} {
		b.Run(dev.name, func(b *testing.B) { pipelineOverlap(b, dev.device) })
	}
}

func pipelineOverlap(b *testing.B, device string) {
	const stepTime, wait = 100 * time.Millisecond, 30 * time.Millisecond
	for range b.N {
		alone := steadyStep(b, device, stepTime, 0, false)
		piped := steadyStep(b, device, stepTime, wait, false)
		lock := steadyStep(b, device, stepTime, wait, true)
		b.ReportMetric(float64(alone.Microseconds())/1e3, "ms/step-alone")
		b.ReportMetric(float64(piped.Microseconds())/1e3, "ms/step-pipelined")
		b.ReportMetric(float64(lock.Microseconds())/1e3, "ms/step-lockstep")
		b.ReportMetric(piped.Seconds()/alone.Seconds(), "pipelined/alone")
		b.ReportMetric(lock.Seconds()/alone.Seconds(), "lockstep/alone")
		b.Logf("step alone %s, with a 30 ms collator: pipelined %s (%.3fx), lockstep %s (%.3fx)",
			alone, piped, piped.Seconds()/alone.Seconds(), lock, lock.Seconds()/alone.Seconds())
	}
}
