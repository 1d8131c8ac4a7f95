package trainer

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gotpu/gotpu/trainer/step"
	"github.com/gotpu/gotpu/xla"
)

// Host and device never take turns (docs/pipeline.md).
//
// The loop dispatches each update (step.Stepper.Dispatch) and goes on at once: the runtime's
// executor runs it while the host fetches the next batch — already collated and on the devices,
// the loader's workers having transferred it (step.Stepper.TransferBatch) — and dispatches the
// next. Loss sum, loss-term count, grad norm, the applied flag and the optimizer's counters stay
// on the device; the host reads them (one blocking read for every step since the last) only at
// sync points:
//
//   - a logging step (the log entry needs the losses),
//   - an evaluation (its loss sums; with compute_metrics, each batch's logits),
//   - a save (the state and the results in one read: trainer_state.json needs them),
//   - the end of training (train_loss), and
//   - a window of Config.Window steps without any of these (the window table must be renewed:
//     at most one extra read per step.MaxWindow steps when logging_steps is larger).
//
// Callbacks see the host's state at OnStepEnd (global_step, epoch, control flags) and
// Event.CompletedSteps, the steps the device has finished (completion events, no read); OnLog,
// OnEvaluate and OnSave run after their sync point, so everything they see is read. The
// max_consecutive_nonfinite limit is enforced by the device itself (it applies no update once
// the limit is reached) and reported by the host at the next sync point, at most one logging
// interval (or window) later, naming the step where the limit was reached.

// pendingHost is what the host knows of a dispatched step: its batch counts, for the meter.
type pendingHost struct {
	samples, tokens int
	p               *step.Pending
}

// loopState is the training loop's running totals; sync points fold read results into it.
type loopState struct {
	totalLoss      float64 // sum of step losses (HF's tr_loss over the run)
	intervalLoss   float64
	intervalSteps  int
	lastGradNorm   float64
	nonfinite      int
	lastEnd        time.Time // when the previous read step finished on the device
	pending        []pendingHost
	lastStats      xla.QueueStats // runtime counters at the previous log entry
	lastStatsValid bool
	memStats       xla.MemoryStats // the compiler's figures last logged (logCompiledMemory)
	// flosTokens are this run's non-padding tokens, for total_flos (counted whatever
	// include_num_input_tokens_seen says, and only since this run started: a resumed run's
	// total_flos already holds the earlier ones).
	flosTokens int64
}

// absorb folds read step results, in order, into the totals and the meter, exactly as when
// each step was read as it finished: the loss with logging_nan_inf_filter, the grad norm, the
// consecutive non-finite count (an error naming the step where max_consecutive_nonfinite was
// reached), and honest timing — a step's device time is its execution's, from completion
// events, a compiling step's compilation included (and logged).
func (t *Trainer) absorb(ls *loopState, results []step.Result) error {
	for _, r := range results {
		if len(ls.pending) == 0 || ls.pending[0].p.GlobalStep != r.GlobalStep {
			return fmt.Errorf("trainer: read the result of step %d, but it was not the next dispatched", r.GlobalStep)
		}
		h := ls.pending[0]
		ls.pending = ls.pending[1:]
		// A step's time is its execution's wall time on the device, compilation included: the
		// step package times a program's whole first run as its compile time (tracing,
		// compiling and executing cannot be told apart there), so subtracting it left the
		// first step a few microseconds. Its compilation is logged on its own line and counted
		// in compile_seconds.
		busy := r.End.Sub(r.Start)
		if r.CompileSeconds > 0 {
			d := time.Duration(r.CompileSeconds * float64(time.Second))
			t.meter.AddCompile(d)
			attrs := []any{"step", r.GlobalStep, "note", "first run of a new program shape: included in this step's step_seconds"}
			if c, ok := t.compiles.since(t.rt); ok { // PJRT: from the cache or compiled (compilelog.go)
				attrs = append(attrs, t.compiles.attrs(c)...)
			}
			t.log.Info("compiled the training step in "+formatSeconds(r.CompileSeconds)+" s", attrs...)
			t.logCompiledMemory(ls, r.GlobalStep)
		}
		t.meter.AddStep(int64(h.samples), int64(h.tokens), max(busy, 0))
		ls.lastEnd = r.End
		if r.Skipped {
			ls.nonfinite++
			t.log.Warn("non-finite gradients: update skipped", "step", r.GlobalStep, "consecutive", ls.nonfinite)
			if limit := t.args.MaxConsecutiveNonfinite; limit > 0 && ls.nonfinite >= limit {
				return fmt.Errorf("%w: %d consecutive updates (max_consecutive_nonfinite), limit reached at step %d",
					ErrNonFinite, ls.nonfinite, r.GlobalStep)
			}
		} else {
			ls.nonfinite = 0
		}
		if !math.IsNaN(r.Loss) && !math.IsInf(r.Loss, 0) || !t.args.LoggingNanInfFilter {
			ls.totalLoss += r.Loss
			ls.intervalLoss += r.Loss
		} else { // HF's logging_nan_inf_filter: count the step at the running average instead
			avg := ls.totalLoss / float64(max(r.GlobalStep-1, 1))
			ls.totalLoss += avg
			ls.intervalLoss += avg
		}
		ls.intervalSteps++
		ls.lastGradNorm = r.GradNorm
	}
	return nil
}

// logCompiledMemory logs the XLA compiler's memory figures of the train program once it has been
// compiled (again when a new batch shape compiles a program with other figures). On the pure-Go
// backend there are none: a debug line says why.
func (t *Trainer) logCompiledMemory(ls *loopState, globalStep int) {
	m, err := t.stepper.MemoryStats()
	if err != nil {
		t.log.Debug("compiled train step: no compiler memory figures", "step", globalStep, "reason", err)
		return
	}
	if m == ls.memStats {
		return
	}
	ls.memStats = m
	t.log.Info("compiled train step: XLA memory per device", "step", globalStep, "devices", t.replicas,
		"argument_bytes", m.Argument, "output_bytes", m.Output, "alias_bytes", m.Alias, "temp_bytes", m.Temp,
		"code_bytes", m.GeneratedCode, "total_bytes", m.Total())
}

// sync is a sync point's read: every dispatched step's results, folded into ls.
func (t *Trainer) sync(ctx context.Context, ls *loopState) error {
	res, err := t.stepper.Collect(ctx)
	if err != nil {
		return err
	}
	return t.absorb(ls, res)
}

// completed counts the dispatched steps the device has finished, from completion events (no
// read): what the progress bar shows.
func (ls *loopState) completed(globalStep int) int {
	n := globalStep - len(ls.pending)
	for _, h := range ls.pending {
		select {
		case <-h.p.Done():
			n++
		default:
			return n // steps finish in order
		}
	}
	return n
}

// pipelineMembers are the log entry's pipeline figures for the interval since the previous
// entry: host_syncs (blocking device→host reads) and device_idle_fraction (the devices' gaps
// between executions over their busy plus idle time).
func (t *Trainer) pipelineMembers(ls *loopState) []JSONMember {
	st := t.rt.Stats()
	prev := ls.lastStats
	if !ls.lastStatsValid {
		prev = xla.QueueStats{DeviceBusy: make([]time.Duration, len(st.DeviceBusy)), DeviceIdle: make([]time.Duration, len(st.DeviceIdle))}
	}
	ls.lastStats, ls.lastStatsValid = st, true
	var busy, idle time.Duration
	for d := range st.DeviceBusy {
		busy += st.DeviceBusy[d] - prev.DeviceBusy[d]
		idle += st.DeviceIdle[d] - prev.DeviceIdle[d]
	}
	frac := 0.0
	if busy+idle > 0 {
		frac = idle.Seconds() / (busy + idle).Seconds()
	}
	return []JSONMember{
		{"host_syncs", JSONIntValue(st.BlockingReads - prev.BlockingReads)},
		{"device_idle_fraction", JSONFloatValue(frac)},
	}
}
