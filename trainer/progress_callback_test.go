package trainer

import (
	"bytes"
	"context"
	"log/slog"
	"regexp"
	"strings"
	"testing"
)

// TestProgressCallbackTerminal: on a terminal (forced, on a buffer that both the bar and the
// log lines go to, as stderr and stdout share a terminal) a log line is printed above the bar —
// erase, line, redraw — after the bar is moved to the logged step (the device's completions
// lag the dispatches); an slog record through LogHandler does the same; an evaluation's bar
// takes the line and gives it back; the bar ends at N/N and stays on the screen; HF's keys only.
func TestProgressCallbackTerminal(t *testing.T) {
	var term bytes.Buffer
	args := DefaultTrainingArguments()
	st := NewTrainerState()
	st.MaxSteps = 4
	cb := &ProgressCallback{BarOut: &term, LogOut: &term, MaxStrLen: 100, Terminal: true}
	log := slog.New(cb.LogHandler(slog.NewTextHandler(&term, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		}})))
	ctx := context.Background()
	e := &Event{Args: &args, State: &st, Control: &TrainerControl{}}
	if err := cb.OnTrainBegin(ctx, e); err != nil {
		t.Fatal(err)
	}
	st.GlobalStep, e.CompletedSteps = 2, 1
	cb.OnStepEnd(ctx, e)
	if !strings.Contains(term.String(), " 1/4 [") {
		t.Fatalf("bar not drawn at the completed step: %q", term.String())
	}
	term.Reset()
	e.Logs = NewLogEntry(JSONMember{"loss", JSONFloatValue(2.53125)}, JSONMember{"grad_norm", JSONFloatValue(1.25)},
		JSONMember{"learning_rate", JSONFloatValue(5e-5)}, JSONMember{"step_seconds", JSONFloatValue(0.5)},
		JSONMember{"host_syncs", JSONIntValue(1)}, JSONMember{"epoch", JSONFloatValue(0.5)}, JSONMember{"step", JSONIntValue(2)})
	if err := cb.OnLog(ctx, e); err != nil {
		t.Fatal(err)
	}
	line := "{'loss': '2.531', 'grad_norm': '1.25', 'learning_rate': '5e-05', 'epoch': '0.5'}"
	// The bar moves to 2/4 (a draw, unless the rate limit skips it), is erased, the line
	// printed, the bar redrawn at 2/4.
	want := regexp.MustCompile(`^(\r 50%\|█████     \| 2/4 \[[^\r\n]*\x1b\[K)?\r\x1b\[K` + regexp.QuoteMeta(line) + `\n\r 50%\|█████     \| 2/4 \[[^\r\n]*, loss=2\.531\]\x1b\[K$`)
	if !want.MatchString(term.String()) {
		t.Fatalf("log line and bar:\n%q\nwant the pattern\n%s", term.String(), want)
	}
	term.Reset()
	log.Info("compiled the training step in 9.1 s", "step", 1)
	wantLog := regexp.MustCompile(`^\r\x1b\[Klevel=INFO msg="compiled the training step in 9.1 s" step=1\n\r 50%[^\n]*2/4 \[[^\n]*\x1b\[K$`)
	if !wantLog.MatchString(term.String()) {
		t.Fatalf("slog record and bar:\n%q", term.String())
	}
	// An evaluation of 3 batches: its bar hides the training bar, which comes back after.
	term.Reset()
	e.PredictionSteps = 3
	for range 3 {
		cb.OnPredictionStep(ctx, e)
	}
	cb.OnEvaluate(ctx, e)
	got := term.String()
	if !strings.HasPrefix(got, "\r\x1b[K") || !strings.Contains(got, " 3/3 [") || !strings.HasSuffix(got, "\x1b[K") ||
		!strings.Contains(got[strings.LastIndex(got, " 3/3 ["):], " 2/4 [") {
		t.Fatalf("evaluation bar: %q", got)
	}
	// The end: the bar at 4/4, left on the screen with a newline.
	term.Reset()
	st.GlobalStep, e.CompletedSteps = 4, 3
	cb.OnStepEnd(ctx, e)
	if err := cb.OnTrainEnd(ctx, e); err != nil {
		t.Fatal(err)
	}
	got = term.String()
	t.Logf("end of training on the terminal: %q", got)
	if !regexp.MustCompile(`\r100%\|██████████\| 4/4 \[[^\r\n]*\]\x1b\[K\n$`).MatchString(got) {
		t.Fatalf("final bar: %q", got)
	}
	if err := cb.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestProgressCallbackStoppedShort: a run that stops before max_steps leaves its bar at the
// step where it stopped and says why on the next line.
func TestProgressCallbackStoppedShort(t *testing.T) {
	var term bytes.Buffer
	args := DefaultTrainingArguments()
	st := NewTrainerState()
	st.MaxSteps = 10
	cb := &ProgressCallback{BarOut: &term, LogOut: &term, Terminal: true}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Event{Args: &args, State: &st, Control: &TrainerControl{}}
	cb.OnTrainBegin(ctx, e)
	st.GlobalStep = 7
	cancel()
	if err := cb.OnTrainEnd(ctx, e); err != nil {
		t.Fatal(err)
	}
	if got := term.String(); !strings.Contains(got, " 7/10 [") || !strings.HasSuffix(got, "\ntraining stopped at step 7 of 10 (interrupted)\n") {
		t.Errorf("stopped short: %q", got)
	}
}

// TestConsoleLogsKeys: gotpu's counters and "step" are dropped from the console's entry unless
// log_gotpu_metrics; train_tokens_per_second only with include_tokens_per_second.
func TestConsoleLogsKeys(t *testing.T) {
	e := NewLogEntry(JSONMember{"loss", JSONFloatValue(1)}, JSONMember{"mfu", JSONFloatValue(0.3)},
		JSONMember{"train_tokens_per_second", JSONFloatValue(9)}, JSONMember{"num_input_tokens_seen", JSONIntValue(5)},
		JSONMember{"step", JSONIntValue(3)})
	a := DefaultTrainingArguments()
	if got := strings.Join(ConsoleLogs(e, &a).Keys(), ","); got != "loss,num_input_tokens_seen" {
		t.Errorf("default: %s", got)
	}
	a.IncludeTokensPerSecond = true
	if got := strings.Join(ConsoleLogs(e, &a).Keys(), ","); got != "loss,train_tokens_per_second,num_input_tokens_seen" {
		t.Errorf("include_tokens_per_second: %s", got)
	}
	a.LogGotpuMetrics = true
	if got := strings.Join(ConsoleLogs(e, &a).Keys(), ","); got != "loss,mfu,train_tokens_per_second,num_input_tokens_seen" {
		t.Errorf("log_gotpu_metrics: %s", got)
	}
}
