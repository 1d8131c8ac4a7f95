package trainer

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/gotpu/gotpu/internal/progress"
)

// ProgressCallback is HF's ProgressCallback and PrinterCallback in one: it draws a tqdm-style
// bar of the updates on BarOut (only if that is a terminal, and not with disable_tqdm), a bar of
// the batches while evaluating (OnPredictionStep), and prints each logged entry to LogOut as
// HF does: str() of the dict with floats formatted "{:.4g}" and total_flos dropped. Only the
// local process zero draws and prints.
//
// What is printed are HF's keys: gotpu's own counters (GotpuLogKeys: step time, throughput,
// MFU, pipeline figures) stay in log_history.jsonl, trainer_state.json and TensorBoard and
// reach the console only with log_gotpu_metrics, so a log line reads like HF's and fits a
// terminal line.
//
// On a terminal each line is printed above the bar (the bar is erased, the line written, the
// bar redrawn: tqdm.write), the bar is moved to the logged step first so the two never
// disagree, and at the end of training the bar is left on the screen at its final count
// (tqdm's leave=True), with a line saying where the run stopped if it stopped short. LogHandler
// routes the run's slog records around the bar the same way. When BarOut is not a terminal
// nothing but plain lines is written.
//
// The hooks run on the training loop's goroutine; LogHandler's records may come from any
// goroutine (the checkpoint writer's), so the bars are guarded by a mutex.
type ProgressCallback struct {
	BaseCallback
	BarOut io.Writer // nil means os.Stderr (tqdm's default)
	LogOut io.Writer // nil means os.Stdout (print and tqdm.write)
	// MaxStrLen: longer string values are replaced by a note (HF's max_str_len, default 100).
	MaxStrLen int
	// Terminal draws the bars even when BarOut is not a terminal (tests); by default they are
	// drawn only on one (progress.IsTerminal).
	Terminal bool

	mu       sync.Mutex
	bar      *progress.Bar // the training bar, from OnTrainBegin to OnTrainEnd
	evalBar  *progress.Bar // an evaluation's bar, from its first batch to OnEvaluate
	training bool
}

// NewProgressCallback returns a ProgressCallback on stderr and stdout.
func NewProgressCallback() *ProgressCallback { return &ProgressCallback{MaxStrLen: 100} }

func (c *ProgressCallback) barOut() io.Writer {
	if c.BarOut == nil {
		return os.Stderr
	}
	return c.BarOut
}

func (c *ProgressCallback) newBar(total, initial int64) *progress.Bar {
	out := c.barOut()
	return progress.NewWithOptions(out, progress.Options{Total: total, Initial: initial,
		Terminal: c.Terminal || progress.IsTerminal(out)})
}

// active is the bar on the screen now: an evaluation's while it runs, else the training bar.
func (c *ProgressCallback) active() *progress.Bar {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.evalBar != nil {
		return c.evalBar
	}
	return c.bar
}

// OnTrainBegin starts the bar at the current global step (a resumed run starts part-way).
func (c *ProgressCallback) OnTrainBegin(_ context.Context, e *Event) error {
	if !e.State.IsLocalProcessZero {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.training = true
	if disableTqdm(e.Args) {
		return nil
	}
	if c.bar != nil {
		c.bar.Close()
	}
	c.bar = c.newBar(int64(e.State.MaxSteps), int64(e.State.GlobalStep))
	return nil
}

// OnStepEnd moves the bar to the steps the device has finished (Event.CompletedSteps), so its
// rate and remaining time follow completions, not dispatches; the global step when the caller
// does not say (CompletedSteps 0).
func (c *ProgressCallback) OnStepEnd(_ context.Context, e *Event) error {
	if bar := c.trainingBar(); bar != nil {
		n := e.State.GlobalStep
		if e.CompletedSteps > 0 {
			n = e.CompletedSteps
		}
		bar.Update(int64(n))
	}
	return nil
}

func (c *ProgressCallback) trainingBar() *progress.Bar {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bar
}

// OnPredictionStep advances the evaluation bar (HF's prediction_bar), made at an evaluation's
// first batch with Event.PredictionSteps as its total. During training it takes the training
// bar's line until OnEvaluate.
func (c *ProgressCallback) OnPredictionStep(_ context.Context, e *Event) error {
	if !e.State.IsLocalProcessZero || disableTqdm(e.Args) {
		return nil
	}
	c.mu.Lock()
	if c.evalBar == nil {
		if c.bar != nil {
			c.bar.SetHidden(true)
		}
		c.evalBar = c.newBar(int64(e.PredictionSteps), 0)
	}
	bar := c.evalBar
	c.mu.Unlock()
	bar.Add(1)
	return nil
}

// OnEvaluate removes the evaluation bar: erased during training (the training bar comes back),
// left on the screen otherwise (HF's leave=training_bar is None).
func (c *ProgressCallback) OnEvaluate(context.Context, *Event) error {
	return c.endEvaluation()
}

func (c *ProgressCallback) endEvaluation() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.evalBar == nil {
		return nil
	}
	var err error
	if c.bar != nil {
		err = c.evalBar.Close()
		c.bar.SetHidden(false)
	} else {
		err = c.evalBar.Leave(c.evalBar.Count(), "")
	}
	c.evalBar = nil
	return err
}

// OnLog prints the entry (HF's keys; see ProgressCallback) above the bar, after moving the bar
// to the entry's step, and shows its loss in the bar. Log entries come after a sync point, so
// every step up to the global step has finished. Outside training (a standalone Evaluate, as
// `gotpu eval` runs, or one after Train) nothing is printed, as HF's ProgressCallback prints
// only while its training bar exists: the caller reports the metrics (run_clm's log_metrics),
// and stdout stays the command's.
func (c *ProgressCallback) OnLog(_ context.Context, e *Event) error {
	if !e.State.IsLocalProcessZero {
		return nil
	}
	logs := ConsoleLogs(e.Logs, e.Args)
	line := FormatLogsForConsole(logs, c.MaxStrLen)
	c.mu.Lock()
	bar, training := c.bar, c.training
	c.mu.Unlock()
	if !training {
		return nil
	}
	out := c.LogOut
	if out == nil {
		out = os.Stdout
	}
	if bar != nil {
		bar.Update(int64(e.State.GlobalStep))
		if loss, ok := e.Logs.Loss(); ok {
			bar.SetPostfix("loss=" + pyFormatG4(loss))
		}
	}
	if ab := c.active(); ab != nil { // an evaluation's bar holds the line while it runs
		return ab.PrintAbove(out, line)
	}
	_, err := io.WriteString(out, line+"\n")
	return err
}

// OnTrainEnd leaves the bar on the screen at the final global step (every step has been read
// by then), followed by a line saying where and why the run stopped when it stopped before
// max_steps (an interruption, or should_training_stop).
func (c *ProgressCallback) OnTrainEnd(ctx context.Context, e *Event) error {
	err := c.endEvaluation()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.training = false
	if c.bar == nil {
		return err
	}
	note := ""
	if st := e.State; st.GlobalStep < st.MaxSteps {
		why := "should_training_stop"
		if ctx.Err() != nil {
			why = "interrupted"
		}
		note = fmt.Sprintf("training stopped at step %d of %d (%s)", st.GlobalStep, st.MaxSteps, why)
	}
	if lerr := c.bar.Leave(int64(e.State.GlobalStep), note); err == nil {
		err = lerr
	}
	c.bar = nil
	return err
}

// Close erases the bars if drawn; the loop defers it so a failed run does not leave a
// half-drawn line on the terminal.
func (c *ProgressCallback) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var err error
	for _, b := range []*progress.Bar{c.evalBar, c.bar} {
		if b != nil {
			if cerr := b.Close(); err == nil {
				err = cerr
			}
		}
	}
	c.bar, c.evalBar, c.training = nil, nil, false
	return err
}

func disableTqdm(a *TrainingArguments) bool {
	return a != nil && a.DisableTqdm != nil && *a.DisableTqdm
}

// LogHandler wraps h so that each record is written with the bar erased and redrawn after it
// (tqdm's logging_redirect_tqdm): a log record written while the bar is on the terminal
// would otherwise be appended to the bar's line. Without a drawn bar records pass straight
// through.
func (c *ProgressCallback) LogHandler(h slog.Handler) slog.Handler {
	return &aboveBarHandler{c: c, h: h}
}

type aboveBarHandler struct {
	c *ProgressCallback
	h slog.Handler
}

func (a *aboveBarHandler) Enabled(ctx context.Context, l slog.Level) bool { return a.h.Enabled(ctx, l) }

func (a *aboveBarHandler) Handle(ctx context.Context, r slog.Record) error {
	if b := a.c.active(); b != nil {
		return b.Above(func() error { return a.h.Handle(ctx, r) })
	}
	return a.h.Handle(ctx, r)
}

func (a *aboveBarHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &aboveBarHandler{c: a.c, h: a.h.WithAttrs(attrs)}
}

func (a *aboveBarHandler) WithGroup(name string) slog.Handler {
	return &aboveBarHandler{c: a.c, h: a.h.WithGroup(name)}
}

// ConsoleLogs is what the console shows of a log entry: HF's keys only — without "step" (HF's
// on_log never gets it: Trainer.log adds it to the log_history copy), without gotpu's own
// counters (GotpuLogKeys) unless log_gotpu_metrics is set, and without train_tokens_per_second
// unless include_tokens_per_second is (HF computes it only then).
func ConsoleLogs(logs LogEntry, a *TrainingArguments) LogEntry {
	showGotpu := a != nil && a.LogGotpuMetrics
	var keep []JSONMember
	for _, m := range logs.Members() {
		switch {
		case m.Key == "step":
			continue
		case !showGotpu && isGotpuLogKey(m.Key):
			continue
		case m.Key == "train_tokens_per_second" && (a == nil || !a.IncludeTokensPerSecond) && !showGotpu:
			continue
		}
		keep = append(keep, m)
	}
	return NewLogEntry(keep...)
}
