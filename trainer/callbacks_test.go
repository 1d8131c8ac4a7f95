package trainer

import (
	"bytes"
	"context"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/trainer/tensorboard"
)

var (
	_ Callback = BaseCallback{}
	_ Callback = Callbacks{}
	_ Callback = (*TensorBoardCallback)(nil)
	_ Callback = (*ProgressCallback)(nil)

	_ StatefulCallback = (*EarlyStopping)(nil)
)

// hookRecorder records the hooks called on it; failOn makes one hook fail.
type hookRecorder struct {
	BaseCallback
	name   string
	calls  *[]string
	failOn string
	err    error
}

func (r *hookRecorder) rec(hook string) error {
	*r.calls = append(*r.calls, r.name+"."+hook)
	if hook == r.failOn {
		return r.err
	}
	return nil
}

func (r *hookRecorder) OnTrainBegin(context.Context, *Event) error { return r.rec("OnTrainBegin") }
func (r *hookRecorder) OnEpochBegin(context.Context, *Event) error { return r.rec("OnEpochBegin") }
func (r *hookRecorder) OnStepEnd(context.Context, *Event) error    { return r.rec("OnStepEnd") }
func (r *hookRecorder) OnEpochEnd(context.Context, *Event) error   { return r.rec("OnEpochEnd") }
func (r *hookRecorder) OnLog(context.Context, *Event) error        { return r.rec("OnLog") }
func (r *hookRecorder) OnEvaluate(context.Context, *Event) error   { return r.rec("OnEvaluate") }
func (r *hookRecorder) OnSave(context.Context, *Event) error       { return r.rec("OnSave") }
func (r *hookRecorder) OnTrainEnd(context.Context, *Event) error   { return r.rec("OnTrainEnd") }

type hookCase struct {
	name string
	call func(Callback, context.Context, *Event) error
}

var allHooks = []hookCase{
	{"OnTrainBegin", Callback.OnTrainBegin}, {"OnEpochBegin", Callback.OnEpochBegin},
	{"OnStepEnd", Callback.OnStepEnd}, {"OnEpochEnd", Callback.OnEpochEnd},
	{"OnLog", Callback.OnLog}, {"OnEvaluate", Callback.OnEvaluate},
	{"OnSave", Callback.OnSave}, {"OnTrainEnd", Callback.OnTrainEnd},
}

func TestCallbacksOrderAndFirstError(t *testing.T) {
	boom := errors.New("boom")
	for _, h := range allHooks {
		var calls []string
		cs := Callbacks{
			&hookRecorder{name: "a", calls: &calls},
			nil, // skipped
			&hookRecorder{name: "b", calls: &calls, failOn: h.name, err: boom},
			&hookRecorder{name: "c", calls: &calls},
		}
		err := h.call(cs, context.Background(), &Event{})
		if !errors.Is(err, boom) {
			t.Fatalf("%s: error %v, want boom", h.name, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "*trainer.hookRecorder") || !strings.Contains(msg, h.name) {
			t.Errorf("%s: error %q should name the callback type and the hook", h.name, msg)
		}
		if want := []string{"a." + h.name, "b." + h.name}; strings.Join(calls, ",") != strings.Join(want, ",") {
			t.Errorf("%s: calls %v, want %v (chain stops at the error)", h.name, calls, want)
		}
		calls = nil
		cs[2].(*hookRecorder).failOn = ""
		if err := h.call(cs, context.Background(), &Event{}); err != nil || len(calls) != 3 {
			t.Errorf("%s: %v, calls %v", h.name, err, calls)
		}
	}
}

// setFlag is a callback that sets every control flag in the hook it is given.
type setFlag struct {
	BaseCallback
	hook string
}

func (s setFlag) set(hook string, e *Event) error {
	if hook == s.hook {
		*e.Control = TrainerControl{true, true, true, true, true}
	}
	return nil
}
func (s setFlag) OnTrainBegin(_ context.Context, e *Event) error { return s.set("OnTrainBegin", e) }
func (s setFlag) OnEpochBegin(_ context.Context, e *Event) error { return s.set("OnEpochBegin", e) }
func (s setFlag) OnLog(_ context.Context, e *Event) error        { return s.set("OnLog", e) }
func (s setFlag) OnEvaluate(_ context.Context, e *Event) error   { return s.set("OnEvaluate", e) }
func (s setFlag) OnSave(_ context.Context, e *Event) error       { return s.set("OnSave", e) }

// The handler clears the flag each hook answers, as HF's CallbackHandler does, before the
// callbacks run (so they can set it again).
func TestCallbacksResetControlFlags(t *testing.T) {
	all := TrainerControl{true, true, true, true, true}
	for _, c := range []struct {
		hook string
		want TrainerControl
	}{
		{"OnTrainBegin", TrainerControl{ShouldTrainingStop: false, ShouldEpochStop: true, ShouldSave: true, ShouldEvaluate: true, ShouldLog: true}},
		{"OnEpochBegin", TrainerControl{ShouldTrainingStop: true, ShouldEpochStop: false, ShouldSave: true, ShouldEvaluate: true, ShouldLog: true}},
		{"OnStepEnd", all},
		{"OnEpochEnd", all},
		{"OnLog", TrainerControl{ShouldTrainingStop: true, ShouldEpochStop: true, ShouldSave: true, ShouldEvaluate: true, ShouldLog: false}},
		{"OnEvaluate", TrainerControl{ShouldTrainingStop: true, ShouldEpochStop: true, ShouldSave: true, ShouldEvaluate: false, ShouldLog: true}},
		{"OnSave", TrainerControl{ShouldTrainingStop: true, ShouldEpochStop: true, ShouldSave: false, ShouldEvaluate: true, ShouldLog: true}},
		{"OnTrainEnd", all},
	} {
		var h hookCase
		for _, x := range allHooks {
			if x.name == c.hook {
				h = x
			}
		}
		ctl := all
		if err := h.call(Callbacks{}, context.Background(), &Event{Control: &ctl}); err != nil {
			t.Fatal(err)
		}
		if ctl != c.want {
			t.Errorf("%s: control %+v, want %+v", c.hook, ctl, c.want)
		}
		ctl = TrainerControl{}
		if err := h.call(Callbacks{setFlag{hook: c.hook}}, context.Background(), &Event{Control: &ctl}); err != nil {
			t.Fatal(err)
		}
		if c.hook != "OnStepEnd" && c.hook != "OnEpochEnd" && c.hook != "OnTrainEnd" && ctl != all {
			t.Errorf("%s: a callback's flags were lost: %+v", c.hook, ctl)
		}
	}
	e := &Event{}
	if err := (Callbacks{}).OnLog(context.Background(), e); err != nil || e.Control == nil {
		t.Errorf("nil Control not replaced: %+v, %v", e, err)
	}
}

func TestCallbacksSaveLoadStates(t *testing.T) {
	es := NewEarlyStopping(3, 0.01)
	es.PatienceCounter = 2
	cs := Callbacks{BaseCallback{}, Callbacks{es}}
	st := NewTrainerState()
	cs.SaveStates(&st)
	if st.EarlyStopping == nil || *st.EarlyStopping != (EarlyStoppingCallbackState{3, 0.01, 2}) {
		t.Fatalf("saved %+v", st.EarlyStopping)
	}
	fresh := NewEarlyStopping(1, 0)
	Callbacks{Callbacks{fresh}}.LoadStates(&st)
	if fresh.State() != *st.EarlyStopping {
		t.Errorf("loaded %+v", fresh.State())
	}
}

func tbArgs(t *testing.T) *TrainingArguments {
	a := DefaultTrainingArguments()
	a.LoggingDir = filepath.Join(t.TempDir(), "runs", "x")
	return &a
}

func readOnlyEventFile(t *testing.T, dir string) []tensorboard.Event {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "events.out.tfevents.*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("event files in %s: %v (%v)", dir, files, err)
	}
	events, err := tensorboard.ReadEvents(files[0])
	if err != nil {
		t.Fatal(err)
	}
	return events
}

func TestTensorBoardCallback(t *testing.T) {
	args := tbArgs(t)
	st := NewTrainerState()
	when := time.Unix(1_700_000_000, 0)
	cb := &TensorBoardCallback{Now: func() time.Time { return when }}
	ctx := context.Background()
	e := &Event{Args: args, State: &st, Control: &TrainerControl{}}
	if err := cb.OnTrainBegin(ctx, e); err != nil {
		t.Fatal(err)
	}
	st.GlobalStep = 10
	e.Logs = NewLogEntry(
		JSONMember{"loss", JSONFloatValue(2.5)},
		JSONMember{"grad_norm", JSONFloatValue(1.25)},
		JSONMember{"learning_rate", JSONFloatValue(5e-5)},
		JSONMember{"epoch", JSONFloatValue(0.25)},
		JSONMember{"step", JSONIntValue(10)},
		JSONMember{"flag", JSONBoolValue(true)},
		JSONMember{"note", JSONStringValue("hi")},
		JSONMember{"nothing", JSONNullValue()},
	)
	if err := cb.OnLog(ctx, e); err != nil {
		t.Fatal(err)
	}
	st.GlobalStep = 20
	e.Logs = NewLogEntry(JSONMember{"eval_loss", JSONFloatValue(2.0)}, JSONMember{"test_acc", JSONFloatValue(0.5)})
	if err := cb.OnLog(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := cb.OnTrainEnd(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := cb.Close(); err != nil { // idempotent after OnTrainEnd
		t.Fatal(err)
	}
	events := readOnlyEventFile(t, args.LoggingDir)
	type scalar struct {
		step int64
		v    float32
	}
	scalars := map[string]scalar{}
	texts := map[string]string{}
	for _, ev := range events[1:] {
		if ev.WallTime != 1_700_000_000 {
			t.Errorf("wall time %v", ev.WallTime)
		}
		for _, v := range ev.Values {
			switch v.Kind {
			case tensorboard.KindScalar:
				scalars[v.Tag] = scalar{ev.Step, v.Scalar}
			case tensorboard.KindText:
				texts[v.Tag] = v.Text
			}
		}
	}
	want := map[string]scalar{
		"train/loss": {10, 2.5}, "train/grad_norm": {10, 1.25}, "train/learning_rate": {10, float32(5e-5)},
		"train/epoch": {10, 0.25}, "train/step": {10, 10}, "train/flag": {10, 1},
		"eval/loss": {20, 2}, "test/acc": {20, 0.5},
	}
	if len(scalars) != len(want) {
		t.Errorf("scalars %v, want %v", scalars, want)
	}
	for k, w := range want {
		if scalars[k] != w {
			t.Errorf("%s = %+v, want %+v", k, scalars[k], w)
		}
	}
	if texts["train/note/text_summary"] != "hi" || !strings.Contains(texts["args/text_summary"], `"learning_rate": 5e-05`) {
		t.Errorf("texts %q", texts)
	}
}

func TestTensorBoardCallbackOnlyWorldZeroAndTrials(t *testing.T) {
	args := tbArgs(t)
	st := NewTrainerState()
	st.IsWorldProcessZero = false
	cb := NewTensorBoardCallback()
	e := &Event{Args: args, State: &st, Control: &TrainerControl{}, Logs: NewLogEntry(JSONMember{"loss", JSONFloatValue(1)})}
	if err := cb.OnTrainBegin(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if err := cb.OnLog(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if files, _ := filepath.Glob(filepath.Join(args.LoggingDir, "*")); len(files) != 0 {
		t.Errorf("a non-zero process wrote %v", files)
	}
	st.IsWorldProcessZero, st.IsHyperParamSearch = true, true
	trial := "trial-7"
	st.TrialName = &trial
	if err := cb.OnTrainBegin(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	cb.OnTrainEnd(context.Background(), e)
	readOnlyEventFile(t, filepath.Join(args.LoggingDir, trial))

	args.LoggingDir = ""
	if err := NewTensorBoardCallback().OnLog(context.Background(), e); err == nil || !strings.Contains(err.Error(), "logging_dir") {
		t.Errorf("empty logging_dir: %v", err)
	}
}

func TestProgressCallbackPrintsLogs(t *testing.T) {
	for _, disable := range []bool{false, true} {
		var bar, logs bytes.Buffer
		args := DefaultTrainingArguments()
		args.DisableTqdm = &disable
		st := NewTrainerState()
		st.MaxSteps = 100
		cb := &ProgressCallback{BarOut: &bar, LogOut: &logs, MaxStrLen: 100}
		ctx := context.Background()
		e := &Event{Args: &args, State: &st, Control: &TrainerControl{}}
		if err := cb.OnTrainBegin(ctx, e); err != nil {
			t.Fatal(err)
		}
		st.GlobalStep = 10
		cb.OnStepEnd(ctx, e)
		e.Logs = NewLogEntry(
			JSONMember{"loss", JSONFloatValue(2.53125)},
			JSONMember{"learning_rate", JSONFloatValue(5e-5)},
			JSONMember{"epoch", JSONFloatValue(0.25)},
			JSONMember{"total_flos", JSONFloatValue(1e15)},
			JSONMember{"step", JSONIntValue(10)},
		)
		if err := cb.OnLog(ctx, e); err != nil {
			t.Fatal(err)
		}
		if err := cb.OnTrainEnd(ctx, e); err != nil {
			t.Fatal(err)
		}
		if want := "{'loss': '2.531', 'learning_rate': '5e-05', 'epoch': '0.25'}\n"; logs.String() != want { // HF's on_log never sees step
			t.Errorf("disable_tqdm=%v: printed %q, want %q", disable, logs.String(), want)
		}
		if bar.Len() != 0 {
			t.Errorf("bar drawn on a buffer: %q", bar.String())
		}
	}
	// Only the local process zero prints.
	var logs bytes.Buffer
	st := NewTrainerState()
	st.IsLocalProcessZero = false
	args := DefaultTrainingArguments()
	cb := &ProgressCallback{BarOut: &logs, LogOut: &logs}
	e := &Event{Args: &args, State: &st, Logs: NewLogEntry(JSONMember{"loss", JSONFloatValue(1)})}
	cb.OnTrainBegin(context.Background(), e)
	cb.OnLog(context.Background(), e)
	if logs.Len() != 0 {
		t.Errorf("process %v printed %q", st.IsLocalProcessZero, logs.String())
	}
}

func TestFormatLogsForConsole(t *testing.T) {
	long := strings.Repeat("é", 101)
	for _, c := range []struct {
		logs LogEntry
		max  int
		want string
	}{
		{NewLogEntry(), 100, "{}"},
		{NewLogEntry(JSONMember{"total_flos", JSONFloatValue(1)}), 100, "{}"},
		{NewLogEntry(JSONMember{"a", JSONFloatValue(3.14159265)}, JSONMember{"b", JSONFloatValue(123456789)}), 100,
			"{'a': '3.142', 'b': '1.235e+08'}"},
		{NewLogEntry(JSONMember{"n", JSONFloatValue(math.NaN())}, JSONMember{"i", JSONFloatValue(math.Inf(-1))}), 100,
			"{'n': 'nan', 'i': '-inf'}"},
		{NewLogEntry(JSONMember{"ok", JSONBoolValue(true)}, JSONMember{"none", JSONNullValue()},
			JSONMember{"list", JSONArrayValue(JSONIntValue(1), JSONFloatValue(2), JSONStringValue("x"))}), 100,
			"{'ok': True, 'none': None, 'list': [1, 2.0, 'x']}"},
		{NewLogEntry(JSONMember{"s", JSONStringValue(long)}), 100,
			"{'s': '[String too long to display, length: 101 > 100. Consider increasing `max_str_len` if needed.]'}"},
		{NewLogEntry(JSONMember{"s", JSONStringValue(long)}), 0, "{'s': '" + long + "'}"},
		{NewLogEntry(JSONMember{"it's", JSONStringValue(`a"b'c`)}), 100, `{"it's": 'a"b\'c'}`},
	} {
		if got := FormatLogsForConsole(c.logs, c.max); got != c.want {
			t.Errorf("FormatLogsForConsole(%v)\n got %s\nwant %s", c.logs.Keys(), got, c.want)
		}
	}
}

// Expected values are Python 3's repr().
func TestPyStrRepr(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "''",
		"plain":                "'plain'",
		"it's":                 `"it's"`,
		`a"b'c`:                `'a"b\'c'`,
		"\u200b\u00a0\x7f\x00": `'\u200b\xa0\x7f\x00'`,
		"é\n\t\\":              `'é\n\t\\'`,
		"😀":                    "'😀'",
		"\U000e0001":           `'\U000e0001'`,
	} {
		if got := pyStrRepr(in); got != want {
			t.Errorf("pyStrRepr(%q) = %s, want %s", in, got, want)
		}
	}
}
