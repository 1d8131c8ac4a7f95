package trainer

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gotpu/gotpu/trainer/tensorboard"
)

// Event is what each callback hook receives, HF's (args, state, control, **kwargs). Hooks may
// set fields of Control, Hugging Face's control flags, to steer the loop.
type Event struct {
	Args    *TrainingArguments
	State   *TrainerState
	Control *TrainerControl
	// Logs is the entry being logged (OnLog only).
	Logs LogEntry
	// Metrics are the evaluation results, eval_-prefixed (OnEvaluate only).
	Metrics map[string]float64
	// CheckpointDir is the checkpoint just written (OnSave only).
	CheckpointDir string
	// CompletedSteps is how many steps the device has finished (OnStepEnd: from completion
	// events, no host read; State.GlobalStep counts the steps dispatched, up to xla.QueueDepth
	// ahead).
	CompletedSteps int
	// PredictionSteps is the number of batches of the evaluation under way (OnPredictionStep).
	PredictionSteps int
}

// PredictionStepCallback is a Callback with HF's on_prediction_step hook, called after each
// evaluation batch (Callbacks.OnPredictionStep); ProgressCallback draws the evaluation bar
// from it. It is a separate interface so that existing Callbacks need not implement it.
type PredictionStepCallback interface {
	OnPredictionStep(ctx context.Context, e *Event) error
}

// Callback is Hugging Face's TrainerCallback: hooks the training loop calls at fixed points.
// A hook returning an error stops training with that error (HF callbacks raise). Embed
// BaseCallback to implement only some hooks.
//
// The Trainer calls, in order: OnTrainBegin; per epoch OnEpochBegin, then per optimizer update
// OnStepEnd (followed, as the control flags say, by OnLog, OnEvaluate, OnSave), then
// OnEpochEnd (again followed by any OnLog, OnEvaluate, OnSave); finally OnTrainEnd.
type Callback interface {
	OnTrainBegin(ctx context.Context, e *Event) error
	OnEpochBegin(ctx context.Context, e *Event) error
	OnStepEnd(ctx context.Context, e *Event) error
	OnEpochEnd(ctx context.Context, e *Event) error
	OnLog(ctx context.Context, e *Event) error
	OnEvaluate(ctx context.Context, e *Event) error
	OnSave(ctx context.Context, e *Event) error
	OnTrainEnd(ctx context.Context, e *Event) error
}

// BaseCallback implements every Callback hook as a no-op; embed it.
type BaseCallback struct{}

func (BaseCallback) OnTrainBegin(context.Context, *Event) error { return nil }
func (BaseCallback) OnEpochBegin(context.Context, *Event) error { return nil }
func (BaseCallback) OnStepEnd(context.Context, *Event) error    { return nil }
func (BaseCallback) OnEpochEnd(context.Context, *Event) error   { return nil }
func (BaseCallback) OnLog(context.Context, *Event) error        { return nil }
func (BaseCallback) OnEvaluate(context.Context, *Event) error   { return nil }
func (BaseCallback) OnSave(context.Context, *Event) error       { return nil }
func (BaseCallback) OnTrainEnd(context.Context, *Event) error   { return nil }

// Callbacks is HF's CallbackHandler: each hook calls the callbacks in order (nil entries are
// skipped); the first error stops the chain and is returned wrapped with the callback's type
// and the hook's name. Callbacks is itself a Callback.
//
// Like the CallbackHandler, a hook first resets the control flag it answers, so a callback can
// set it again: OnTrainBegin clears ShouldTrainingStop, OnEpochBegin ShouldEpochStop, OnLog
// ShouldLog, OnEvaluate ShouldEvaluate and OnSave ShouldSave. (HF's on_step_begin, which has no
// hook here, clears ShouldLog, ShouldEvaluate and ShouldSave before each update: the loop does
// that itself.) A nil e.Control is replaced by a new TrainerControl first.
//
// Hooks are called even if ctx is done — OnTrainEnd must still close files — so a callback that
// does slow work should watch ctx itself.
type Callbacks []Callback

func (cs Callbacks) OnTrainBegin(ctx context.Context, e *Event) error {
	control(e).ShouldTrainingStop = false
	return cs.call("OnTrainBegin", func(c Callback) error { return c.OnTrainBegin(ctx, e) })
}

func (cs Callbacks) OnEpochBegin(ctx context.Context, e *Event) error {
	control(e).ShouldEpochStop = false
	return cs.call("OnEpochBegin", func(c Callback) error { return c.OnEpochBegin(ctx, e) })
}

func (cs Callbacks) OnStepEnd(ctx context.Context, e *Event) error {
	control(e)
	return cs.call("OnStepEnd", func(c Callback) error { return c.OnStepEnd(ctx, e) })
}

func (cs Callbacks) OnEpochEnd(ctx context.Context, e *Event) error {
	control(e)
	return cs.call("OnEpochEnd", func(c Callback) error { return c.OnEpochEnd(ctx, e) })
}

func (cs Callbacks) OnLog(ctx context.Context, e *Event) error {
	control(e).ShouldLog = false
	return cs.call("OnLog", func(c Callback) error { return c.OnLog(ctx, e) })
}

func (cs Callbacks) OnEvaluate(ctx context.Context, e *Event) error {
	control(e).ShouldEvaluate = false
	return cs.call("OnEvaluate", func(c Callback) error { return c.OnEvaluate(ctx, e) })
}

func (cs Callbacks) OnSave(ctx context.Context, e *Event) error {
	control(e).ShouldSave = false
	return cs.call("OnSave", func(c Callback) error { return c.OnSave(ctx, e) })
}

func (cs Callbacks) OnTrainEnd(ctx context.Context, e *Event) error {
	control(e)
	return cs.call("OnTrainEnd", func(c Callback) error { return c.OnTrainEnd(ctx, e) })
}

// OnPredictionStep calls the callbacks that implement PredictionStepCallback (nested Callbacks
// included), after each evaluation batch.
func (cs Callbacks) OnPredictionStep(ctx context.Context, e *Event) error {
	control(e)
	return cs.call("OnPredictionStep", func(c Callback) error {
		if p, ok := c.(PredictionStepCallback); ok {
			return p.OnPredictionStep(ctx, e)
		}
		return nil
	})
}

func control(e *Event) *TrainerControl {
	if e.Control == nil {
		e.Control = &TrainerControl{}
	}
	return e.Control
}

func (cs Callbacks) call(hook string, f func(Callback) error) error {
	for _, c := range cs {
		if c == nil {
			continue
		}
		if err := f(c); err != nil {
			return fmt.Errorf("trainer: callback %T.%s: %w", c, hook, err)
		}
	}
	return nil
}

// StatefulCallback is a callback whose state is saved in trainer_state.json's
// stateful_callbacks (HF's ExportableState), so a resumed run can continue it.
type StatefulCallback interface {
	Callback
	// SaveState records the callback's state in st.
	SaveState(st *TrainerState)
	// LoadState restores the callback's state from st; false if st holds none for it.
	LoadState(st *TrainerState) bool
}

// SaveStates calls SaveState on every StatefulCallback (nested Callbacks included); the
// Trainer calls it before writing trainer_state.json, as HF's _save_checkpoint does.
func (cs Callbacks) SaveStates(st *TrainerState) {
	for _, c := range cs {
		switch c := c.(type) {
		case Callbacks:
			c.SaveStates(st)
		case StatefulCallback:
			c.SaveState(st)
		}
	}
}

// LoadStates calls LoadState on every StatefulCallback (nested Callbacks included), as HF's
// _load_callback_state does when resuming with restore_callback_states_from_checkpoint.
func (cs Callbacks) LoadStates(st *TrainerState) {
	for _, c := range cs {
		switch c := c.(type) {
		case Callbacks:
			c.LoadStates(st)
		case StatefulCallback:
			c.LoadState(st)
		}
	}
}

// TensorBoardCallback is HF's TensorBoardCallback (report_to "tensorboard"): it writes every
// logged number as a scalar, tagged as HF's rewrite_logs does (loss → train/loss, eval_loss →
// eval/loss; see tensorboard.RewriteTag), at the current global step, and the arguments as text
// at the start. Only the world process zero writes. It is not safe for concurrent use (the loop
// calls hooks from one goroutine).
type TensorBoardCallback struct {
	BaseCallback
	// LogDir is where the event file goes; "" means args.logging_dir (a trial subdirectory of it
	// during a hyperparameter search, as HF does).
	LogDir string
	// Now stamps the events; nil means time.Now (HF: time.time() at each add_scalar).
	Now func() time.Time

	w *tensorboard.Writer
}

// NewTensorBoardCallback returns a TensorBoardCallback writing under args.logging_dir.
func NewTensorBoardCallback() *TensorBoardCallback { return &TensorBoardCallback{} }

func (c *TensorBoardCallback) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *TensorBoardCallback) open(e *Event, trial bool) error {
	if c.w != nil {
		return nil
	}
	dir := c.LogDir
	if dir == "" {
		dir = e.Args.LoggingDir
		if trial && e.State.IsHyperParamSearch && e.State.TrialName != nil {
			// The one place a path is built from trial_name. A resumed state has none (resume
			// drops it); one set in Go must still name a subdirectory, not "/x" or "../x",
			// which os.path.join semantics would follow out of logging_dir.
			name := *e.State.TrialName
			if !filepath.IsLocal(name) || strings.ContainsAny(name, `/\`) {
				return fmt.Errorf("trainer: TensorBoardCallback: trainer.TrainerState.trial_name %q is not a plain directory name", name)
			}
			dir = pyPathJoin(dir, name)
		}
	}
	if dir == "" {
		return errors.New("trainer: TensorBoardCallback: trainer.TrainingArguments.logging_dir is empty (Finalize sets HF's default)")
	}
	w, err := tensorboard.NewWriter(dir)
	if err != nil {
		return err
	}
	c.w = w
	return nil
}

// OnTrainBegin opens the event file and writes the arguments (HF: add_text("args",
// args.to_json_string())).
func (c *TensorBoardCallback) OnTrainBegin(_ context.Context, e *Event) error {
	if !e.State.IsWorldProcessZero {
		return nil
	}
	if err := c.open(e, true); err != nil {
		return err
	}
	if err := c.w.AddText(0, c.now(), "args", string(e.Args.ToJSON())); err != nil {
		return err
	}
	return c.w.Flush()
}

// OnLog writes the entry's numbers (ints, floats and bools, as Python's isinstance(v, (int,
// float)) accepts) as scalars and its strings as text; other values are skipped, as HF skips them
// with a warning.
func (c *TensorBoardCallback) OnLog(_ context.Context, e *Event) error {
	if !e.State.IsWorldProcessZero {
		return nil
	}
	if err := c.open(e, false); err != nil {
		return err
	}
	step, now := int64(e.State.GlobalStep), c.now()
	scalars := map[string]float64{}
	for _, m := range e.Logs.Members() {
		tag := tensorboard.RewriteTag(m.Key)
		switch m.Value.Kind() {
		case JSONInt, JSONFloat:
			scalars[tag], _ = m.Value.Float()
		case JSONBool:
			if b, _ := m.Value.Bool(); b {
				scalars[tag] = 1
			} else {
				scalars[tag] = 0
			}
		case JSONString:
			s, _ := m.Value.Str()
			if err := c.w.AddText(step, now, tag, s); err != nil {
				return err
			}
		}
	}
	if err := c.w.AddScalars(step, now, scalars); err != nil {
		return err
	}
	return c.w.Flush()
}

// OnTrainEnd closes the event file.
func (c *TensorBoardCallback) OnTrainEnd(context.Context, *Event) error { return c.Close() }

// Close closes the event file if one is open; the loop defers it so a failed run still leaves a
// complete file.
func (c *TensorBoardCallback) Close() error {
	if c.w == nil {
		return nil
	}
	err := c.w.Close()
	c.w = nil
	return err
}

// FormatLogsForConsole formats a log entry as HF's ProgressCallback and PrinterCallback print
// it (transformers ≥ 4.5x): Python's str() of the dict, floats as f"{v:.4g}" strings,
// total_flos dropped, and strings longer than maxStrLen (if > 0) replaced by a note.
func FormatLogsForConsole(logs LogEntry, maxStrLen int) string {
	var sb strings.Builder
	sb.WriteByte('{')
	first := true
	for _, m := range logs.Members() {
		if m.Key == "total_flos" {
			continue
		}
		if !first {
			sb.WriteString(", ")
		}
		first = false
		sb.WriteString(pyStrRepr(m.Key))
		sb.WriteString(": ")
		v := m.Value
		switch v.Kind() {
		case JSONFloat:
			f, _ := v.Float()
			sb.WriteString(pyStrRepr(pyFormatG4(f)))
		case JSONString:
			s, _ := v.Str()
			if n := utf8.RuneCountInString(s); maxStrLen > 0 && n > maxStrLen {
				s = fmt.Sprintf("[String too long to display, length: %d > %d. Consider increasing `max_str_len` if needed.]", n, maxStrLen)
			}
			sb.WriteString(pyStrRepr(s))
		default:
			sb.WriteString(pyRepr(v))
		}
	}
	sb.WriteByte('}')
	return sb.String()
}

// pyFormatG4 is Python's f"{v:.4g}". Go's 'g' format with precision 4 chooses the same
// notation and digits (two-digit exponents, trailing zeros removed); only the spelling of the
// non-finite values differs.
func pyFormatG4(v float64) string {
	switch {
	case math.IsNaN(v):
		return "nan"
	case math.IsInf(v, 1):
		return "inf"
	case math.IsInf(v, -1):
		return "-inf"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// pyRepr is Python's repr() of a JSON value as the json module loads it.
func pyRepr(v JSONValue) string {
	switch v.Kind() {
	case JSONNull:
		return "None"
	case JSONBool:
		if b, _ := v.Bool(); b {
			return "True"
		}
		return "False"
	case JSONInt:
		s, _ := v.IntLiteral()
		return s
	case JSONFloat:
		f, _ := v.Float()
		return PyFloatRepr(f)
	case JSONString:
		s, _ := v.Str()
		return pyStrRepr(s)
	case JSONArray:
		parts := make([]string, len(v.Array()))
		for i, x := range v.Array() {
			parts[i] = pyRepr(x)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case JSONObject:
		parts := make([]string, len(v.Object()))
		for i, m := range v.Object() {
			parts[i] = pyStrRepr(m.Key) + ": " + pyRepr(m.Value)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return "None"
}

// pyStrRepr is Python 3's repr(str): single quotes unless the string holds a single quote and
// no double quote; \\, \n, \r, \t and the quote escaped; other non-printable characters as \xhh,
// \uhhhh or \Uhhhhhhhh.
func pyStrRepr(s string) string {
	quote := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		quote = '"'
	}
	var sb strings.Builder
	sb.WriteByte(quote)
	for _, r := range s {
		switch {
		case r == '\\' || r == rune(quote):
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r < 0x80 && (r < 0x20 || r == 0x7f):
			fmt.Fprintf(&sb, `\x%02x`, r)
		case r < 0x80 || unicode.IsPrint(r):
			sb.WriteRune(r)
		case r < 0x100:
			fmt.Fprintf(&sb, `\x%02x`, r)
		case r < 0x10000:
			fmt.Fprintf(&sb, `\u%04x`, r)
		default:
			fmt.Fprintf(&sb, `\U%08x`, r)
		}
	}
	sb.WriteByte(quote)
	return sb.String()
}
