package trainer

import (
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/gotpu/gotpu/internal/atomicfile"
)

// TrainerState mirrors Hugging Face's TrainerState (transformers/trainer_callback.py), the
// content of trainer_state.json in every checkpoint. Field names in comments are the JSON keys.
//
// Reading accepts every schema from transformers 4.x (before best_global_step, eval_steps,
// logging_steps, save_steps, train_batch_size, num_input_tokens_seen and stateful_callbacks
// existed; missing fields take HF's dataclass defaults) to 5.x. Writing produces the current
// (5.x) schema with HF's layout: json.dumps(asdict(state), indent=2, sort_keys=True) + "\n".
type TrainerState struct {
	BestGlobalStep      *int     // best_global_step (4.5x+), null when no best model is tracked
	BestMetric          *float64 // best_metric
	BestModelCheckpoint *string  // best_model_checkpoint, a path as the writing OS spelled it
	Epoch               *float64 // epoch, fractional; null before training starts
	EvalSteps           int      // eval_steps (resolved absolute interval; HF default 500)
	GlobalStep          int      // global_step: optimizer updates completed
	IsHyperParamSearch  bool     // is_hyper_param_search
	IsLocalProcessZero  bool     // is_local_process_zero
	IsWorldProcessZero  bool     // is_world_process_zero
	LogHistory          []LogEntry
	LoggingSteps        int   // logging_steps (resolved; HF default 500)
	MaxSteps            int   // max_steps
	NumInputTokensSeen  int64 // num_input_tokens_seen
	NumTrainEpochs      int   // num_train_epochs (the loop's epoch count, an int)
	SaveSteps           int   // save_steps (resolved; HF default 500)
	// StatefulCallbacks is stateful_callbacks as read (an object keyed by callback class name;
	// a class registered twice holds a list). Control and EarlyStopping are typed views of two
	// of its entries: when set, they replace those entries on writing.
	StatefulCallbacks JSONValue
	Control           *TrainerControl             // stateful_callbacks.TrainerControl
	EarlyStopping     *EarlyStoppingCallbackState // stateful_callbacks.EarlyStoppingCallback
	TotalFlos         float64                     // total_flos
	TrainBatchSize    *int                        // train_batch_size
	TrialName         *string                     // trial_name
	TrialParams       JSONValue                   // trial_params: null or an object
	// Extra holds top-level keys this version does not know (from a newer transformers); they are
	// written back unchanged.
	Extra []JSONMember
}

// TrainerControl mirrors HF's TrainerControl: the flags callbacks set to steer the loop. It is
// saved in stateful_callbacks.TrainerControl.args.
type TrainerControl struct {
	ShouldTrainingStop bool // should_training_stop
	ShouldEpochStop    bool // should_epoch_stop
	ShouldSave         bool // should_save
	ShouldEvaluate     bool // should_evaluate
	ShouldLog          bool // should_log
}

// EarlyStoppingCallbackState is what HF's EarlyStoppingCallback saves in
// stateful_callbacks.EarlyStoppingCallback.
type EarlyStoppingCallbackState struct {
	Patience        int     // args.early_stopping_patience (HF default 1)
	Threshold       float64 // args.early_stopping_threshold (HF default 0.0)
	PatienceCounter int     // attributes.early_stopping_patience_counter
}

// NewTrainerState returns HF's TrainerState() defaults.
func NewTrainerState() TrainerState {
	return TrainerState{
		EvalSteps:          500,
		LoggingSteps:       500,
		SaveSteps:          500,
		IsLocalProcessZero: true,
		IsWorldProcessZero: true,
		LogHistory:         []LogEntry{},
		StatefulCallbacks:  JSONObjectValue(),
	}
}

// ComputeSteps mirrors TrainerState.compute_steps: logging/eval/save intervals given as a ratio
// (< 1) of the run become ceil(maxSteps × ratio); absolute ones are copied. An unset eval_steps
// leaves EvalSteps unchanged, as HF does.
func (s *TrainerState) ComputeSteps(a *TrainingArguments, maxSteps int) {
	s.MaxSteps = maxSteps
	s.LoggingSteps = resolveSteps(a.LoggingSteps, maxSteps)
	if a.EvalSteps != nil {
		s.EvalSteps = resolveSteps(*a.EvalSteps, maxSteps)
	}
	s.SaveSteps = resolveSteps(a.SaveSteps, maxSteps)
}

// resolveSteps is compute_steps for one interval: a value below 1 is a fraction of maxSteps.
func resolveSteps(v float64, maxSteps int) int {
	if v < 1 {
		return int(math.Ceil(float64(maxSteps) * v))
	}
	return int(v)
}

// LoadTrainerState reads a trainer_state.json file.
func LoadTrainerState(path string) (*TrainerState, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("trainer: reading trainer state: %w", err)
	}
	return ParseTrainerState(data, path)
}

// ParseTrainerState parses the content of a trainer_state.json; source names it in errors.
func ParseTrainerState(data []byte, source string) (*TrainerState, error) {
	root, err := parsePyJSON(data)
	if err != nil {
		return nil, fmt.Errorf("trainer: %s: %w", source, err)
	}
	if root.Kind() != JSONObject {
		return nil, fmt.Errorf("trainer: %s: %w: top level is a %s, want an object", source, ErrJSONSyntax, root.Kind())
	}
	s := NewTrainerState()
	d := stateDecoder{source: source}
	for _, m := range root.Object() {
		v := m.Value
		switch m.Key {
		case "best_global_step":
			s.BestGlobalStep = d.optInt(m.Key, v)
		case "best_metric":
			s.BestMetric = d.optFloat(m.Key, v)
		case "best_model_checkpoint":
			s.BestModelCheckpoint = d.optString(m.Key, v)
		case "epoch":
			s.Epoch = d.optFloat(m.Key, v)
		case "eval_steps":
			s.EvalSteps = d.int(m.Key, v)
		case "global_step":
			s.GlobalStep = d.int(m.Key, v)
		case "is_hyper_param_search":
			s.IsHyperParamSearch = d.bool(m.Key, v)
		case "is_local_process_zero":
			s.IsLocalProcessZero = d.bool(m.Key, v)
		case "is_world_process_zero":
			s.IsWorldProcessZero = d.bool(m.Key, v)
		case "log_history":
			s.LogHistory = d.logHistory(v)
		case "logging_steps":
			s.LoggingSteps = d.int(m.Key, v)
		case "max_steps":
			s.MaxSteps = d.int(m.Key, v)
		case "num_input_tokens_seen":
			s.NumInputTokensSeen = int64(d.int(m.Key, v))
		case "num_train_epochs":
			s.NumTrainEpochs = d.int(m.Key, v)
		case "save_steps":
			s.SaveSteps = d.int(m.Key, v)
		case "stateful_callbacks":
			s.StatefulCallbacks = d.callbacks(v)
		case "total_flos":
			if f := d.optFloat(m.Key, v); f != nil {
				s.TotalFlos = *f
			}
		case "train_batch_size":
			s.TrainBatchSize = d.optInt(m.Key, v)
		case "trial_name":
			s.TrialName = d.optString(m.Key, v)
		case "trial_params":
			if v.Kind() != JSONNull && v.Kind() != JSONObject {
				d.fail(m.Key, "is a %s, want an object or null", v.Kind())
			}
			s.TrialParams = v
		default:
			s.Extra = append(s.Extra, m)
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	s.Control, s.EarlyStopping = parseTypedCallbacks(s.StatefulCallbacks)
	return &s, nil
}

// stateDecoder converts JSON values to TrainerState fields, keeping the first error.
type stateDecoder struct {
	source string
	err    error
}

func (d *stateDecoder) fail(key, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("trainer: %s: trainer.TrainerState.%s: %s", d.source, key, fmt.Sprintf(format, args...))
	}
}

func (d *stateDecoder) int(key string, v JSONValue) int {
	i, ok := v.Int()
	if !ok || i != int64(int(i)) {
		d.fail(key, "is a %s, want an integer", v.Kind())
		return 0
	}
	return int(i)
}

func (d *stateDecoder) optInt(key string, v JSONValue) *int {
	if v.IsNull() {
		return nil
	}
	i := d.int(key, v)
	return &i
}

func (d *stateDecoder) optFloat(key string, v JSONValue) *float64 {
	if v.IsNull() {
		return nil
	}
	f, ok := v.Float()
	if !ok {
		d.fail(key, "is a %s, want a number", v.Kind())
		return nil
	}
	return &f
}

func (d *stateDecoder) optString(key string, v JSONValue) *string {
	if v.IsNull() {
		return nil
	}
	s, ok := v.Str()
	if !ok {
		d.fail(key, "is a %s, want a string", v.Kind())
		return nil
	}
	return &s
}

func (d *stateDecoder) bool(key string, v JSONValue) bool {
	b, ok := v.Bool()
	if !ok {
		d.fail(key, "is a %s, want true or false", v.Kind())
	}
	return b
}

func (d *stateDecoder) logHistory(v JSONValue) []LogEntry {
	if v.Kind() != JSONArray {
		d.fail("log_history", "is a %s, want a list", v.Kind())
		return nil
	}
	out := make([]LogEntry, 0, len(v.Array()))
	for i, item := range v.Array() {
		if item.Kind() != JSONObject {
			d.fail(fmt.Sprintf("log_history[%d]", i), "is a %s, want an object", item.Kind())
			return nil
		}
		out = append(out, LogEntry{fields: append([]JSONMember(nil), item.Object()...)})
	}
	return out
}

func (d *stateDecoder) callbacks(v JSONValue) JSONValue {
	switch v.Kind() {
	case JSONNull: // HF's __post_init__ turns None into {}
		return JSONObjectValue()
	case JSONObject:
		return v
	}
	d.fail("stateful_callbacks", "is a %s, want an object", v.Kind())
	return JSONObjectValue()
}

// parseTypedCallbacks extracts the typed views; an entry with an unexpected shape (for example a
// list, when a callback class was registered twice) yields nil and stays available raw.
func parseTypedCallbacks(cb JSONValue) (*TrainerControl, *EarlyStoppingCallbackState) {
	var ctl *TrainerControl
	var es *EarlyStoppingCallbackState
	if v, ok := cb.Get("TrainerControl"); ok {
		ctl = trainerControlFromJSON(v)
	}
	if v, ok := cb.Get("EarlyStoppingCallback"); ok {
		es = earlyStoppingFromJSON(v)
	}
	return ctl, es
}

func trainerControlFromJSON(v JSONValue) *TrainerControl {
	args, ok := v.Get("args")
	if !ok || args.Kind() != JSONObject {
		return nil
	}
	var c TrainerControl
	for _, f := range []struct {
		key string
		dst *bool
	}{
		{"should_training_stop", &c.ShouldTrainingStop},
		{"should_epoch_stop", &c.ShouldEpochStop},
		{"should_save", &c.ShouldSave},
		{"should_evaluate", &c.ShouldEvaluate},
		{"should_log", &c.ShouldLog},
	} {
		if fv, ok := args.Get(f.key); ok {
			if *f.dst, ok = fv.Bool(); !ok {
				return nil
			}
		}
	}
	return &c
}

func (c TrainerControl) toJSON() JSONValue {
	return JSONObjectValue(
		JSONMember{"args", JSONObjectValue(
			JSONMember{"should_training_stop", JSONBoolValue(c.ShouldTrainingStop)},
			JSONMember{"should_epoch_stop", JSONBoolValue(c.ShouldEpochStop)},
			JSONMember{"should_save", JSONBoolValue(c.ShouldSave)},
			JSONMember{"should_evaluate", JSONBoolValue(c.ShouldEvaluate)},
			JSONMember{"should_log", JSONBoolValue(c.ShouldLog)},
		)},
		JSONMember{"attributes", JSONObjectValue()},
	)
}

func earlyStoppingFromJSON(v JSONValue) *EarlyStoppingCallbackState {
	args, ok1 := v.Get("args")
	attrs, ok2 := v.Get("attributes")
	if !ok1 || !ok2 || args.Kind() != JSONObject || attrs.Kind() != JSONObject {
		return nil
	}
	es := EarlyStoppingCallbackState{Patience: 1} // HF's __init__ defaults
	if p, ok := args.Get("early_stopping_patience"); ok {
		i, ok := p.Int()
		if !ok {
			return nil
		}
		es.Patience = int(i)
	}
	if t, ok := args.Get("early_stopping_threshold"); ok && !t.IsNull() {
		f, ok := t.Float()
		if !ok {
			return nil
		}
		es.Threshold = f
	}
	if c, ok := attrs.Get("early_stopping_patience_counter"); ok {
		i, ok := c.Int()
		if !ok {
			return nil
		}
		es.PatienceCounter = int(i)
	}
	return &es
}

func (e EarlyStoppingCallbackState) toJSON() JSONValue {
	return JSONObjectValue(
		JSONMember{"args", JSONObjectValue(
			JSONMember{"early_stopping_patience", JSONIntValue(int64(e.Patience))},
			JSONMember{"early_stopping_threshold", JSONFloatValue(e.Threshold)},
		)},
		JSONMember{"attributes", JSONObjectValue(
			JSONMember{"early_stopping_patience_counter", JSONIntValue(int64(e.PatienceCounter))},
		)},
	)
}

// statefulCallbacksJSON merges the typed views into the raw entries. An entry whose typed view
// still equals what the raw entry says is kept raw, so its formatting (and any extra keys a
// newer transformers wrote) survives a read/write cycle.
func (s *TrainerState) statefulCallbacksJSON() JSONValue {
	cb := s.StatefulCallbacks
	if cb.Kind() != JSONObject {
		cb = JSONObjectValue()
	}
	if s.Control != nil {
		old, ok := cb.Get("TrainerControl")
		if prev := trainerControlFromJSON(old); !ok || prev == nil || *prev != *s.Control {
			cb = cb.With("TrainerControl", s.Control.toJSON())
		}
	}
	if s.EarlyStopping != nil {
		old, ok := cb.Get("EarlyStoppingCallback")
		if prev := earlyStoppingFromJSON(old); !ok || prev == nil || *prev != *s.EarlyStopping {
			cb = cb.With("EarlyStoppingCallback", s.EarlyStopping.toJSON())
		}
	}
	return cb
}

// toJSON returns the state as HF's dataclasses.asdict(state) would hold it.
func (s *TrainerState) toJSON() JSONValue {
	optInt := func(p *int) JSONValue {
		if p == nil {
			return JSONNullValue()
		}
		return JSONIntValue(int64(*p))
	}
	optFloat := func(p *float64) JSONValue {
		if p == nil {
			return JSONNullValue()
		}
		return JSONFloatValue(*p)
	}
	optString := func(p *string) JSONValue {
		if p == nil {
			return JSONNullValue()
		}
		return JSONStringValue(*p)
	}
	history := make([]JSONValue, len(s.LogHistory))
	for i, e := range s.LogHistory {
		history[i] = JSONValue{kind: JSONObject, obj: e.fields}
		if history[i].obj == nil {
			history[i].obj = []JSONMember{}
		}
	}
	trial := s.TrialParams
	members := []JSONMember{
		{"best_global_step", optInt(s.BestGlobalStep)},
		{"best_metric", optFloat(s.BestMetric)},
		{"best_model_checkpoint", optString(s.BestModelCheckpoint)},
		{"epoch", optFloat(s.Epoch)},
		{"eval_steps", JSONIntValue(int64(s.EvalSteps))},
		{"global_step", JSONIntValue(int64(s.GlobalStep))},
		{"is_hyper_param_search", JSONBoolValue(s.IsHyperParamSearch)},
		{"is_local_process_zero", JSONBoolValue(s.IsLocalProcessZero)},
		{"is_world_process_zero", JSONBoolValue(s.IsWorldProcessZero)},
		{"log_history", JSONValue{kind: JSONArray, arr: history}},
		{"logging_steps", JSONIntValue(int64(s.LoggingSteps))},
		{"max_steps", JSONIntValue(int64(s.MaxSteps))},
		{"num_input_tokens_seen", JSONIntValue(s.NumInputTokensSeen)},
		{"num_train_epochs", JSONIntValue(int64(s.NumTrainEpochs))},
		{"save_steps", JSONIntValue(int64(s.SaveSteps))},
		{"stateful_callbacks", s.statefulCallbacksJSON()},
		{"total_flos", JSONFloatValue(s.TotalFlos)},
		{"train_batch_size", optInt(s.TrainBatchSize)},
		{"trial_name", optString(s.TrialName)},
		{"trial_params", trial},
	}
	for _, m := range s.Extra {
		members = setMember(members, m.Key, m.Value)
	}
	return JSONValue{kind: JSONObject, obj: members}
}

// MarshalHF returns the bytes TrainerState.save_to_json writes: json.dumps(indent=2,
// sort_keys=True) plus a newline, with Python's float formatting. Line endings are LF; HF on
// Windows writes CRLF (text mode), which readers here accept too.
func (s *TrainerState) MarshalHF() []byte {
	out := appendPyJSON(nil, s.toJSON(), pyJSONStyle{indent: 2, sortKeys: true}, 0)
	return append(out, '\n')
}

// Save writes the state to path as MarshalHF does, with internal/atomicfile's policy (the one of
// models and checkpoints): through a temporary file in the same directory, fsynced and renamed
// over path, then the directory fsynced, so a crash never leaves a truncated trainer_state.json;
// mode 0666 less the umask.
func (s *TrainerState) Save(path string) error {
	if err := atomicfile.WriteFileBytes(path, s.MarshalHF()); err != nil {
		return fmt.Errorf("trainer: saving trainer state: %w", err)
	}
	return nil
}

// LogEntry is one element of log_history: metric names and values in the order they were
// logged. Unknown keys (custom metrics, TRL's mean_token_accuracy…) are kept with their exact
// JSON type, so an entry survives a read/write cycle unchanged. The zero value is empty.
type LogEntry struct {
	fields []JSONMember
}

// NewLogEntry returns an entry holding the given members in order.
func NewLogEntry(members ...JSONMember) LogEntry {
	return LogEntry{fields: JSONObjectValue(members...).obj}
}

// Len returns the number of keys.
func (e LogEntry) Len() int { return len(e.fields) }

// Keys returns the keys in order.
func (e LogEntry) Keys() []string {
	keys := make([]string, len(e.fields))
	for i, f := range e.fields {
		keys[i] = f.Key
	}
	return keys
}

// Members returns a copy of the key/value pairs in order.
func (e LogEntry) Members() []JSONMember { return append([]JSONMember(nil), e.fields...) }

// Get returns the value of key.
func (e LogEntry) Get(key string) (JSONValue, bool) {
	return JSONValue{kind: JSONObject, obj: e.fields}.Get(key)
}

// Float returns a numeric value as float64 (false if absent or not a number).
func (e LogEntry) Float(key string) (float64, bool) {
	v, ok := e.Get(key)
	if !ok {
		return 0, false
	}
	return v.Float()
}

// Int returns an integral value (false if absent, not a number, or not integral).
func (e LogEntry) Int(key string) (int64, bool) {
	v, ok := e.Get(key)
	if !ok {
		return 0, false
	}
	return v.Int()
}

// With returns a copy of e with key set to v (appended if new; e is unchanged).
func (e LogEntry) With(key string, v JSONValue) LogEntry {
	out := append(make([]JSONMember, 0, len(e.fields)+1), e.fields...)
	return LogEntry{fields: setMember(out, key, v)}
}

// Loss returns "loss", the mean training loss since the previous log (rounded to 4 decimals
// by transformers 4.x, see PyRound; unrounded in 5.x).
func (e LogEntry) Loss() (float64, bool) { return e.Float("loss") }

// GradNorm returns "grad_norm", the global gradient norm before clipping at the logged step.
func (e LogEntry) GradNorm() (float64, bool) { return e.Float("grad_norm") }

// LearningRate returns "learning_rate" (see Schedule.LoggedLR for which step's rate it is).
func (e LogEntry) LearningRate() (float64, bool) { return e.Float("learning_rate") }

// Epoch returns "epoch", the fractional epoch at the logged step.
func (e LogEntry) Epoch() (float64, bool) { return e.Float("epoch") }

// EvalLoss returns "eval_loss", present in evaluation entries.
func (e LogEntry) EvalLoss() (float64, bool) { return e.Float("eval_loss") }

// TrainLoss returns "train_loss", present in the final summary entry.
func (e LogEntry) TrainLoss() (float64, bool) { return e.Float("train_loss") }

// TotalFlos returns "total_flos", present in the final summary entry.
func (e LogEntry) TotalFlos() (float64, bool) { return e.Float("total_flos") }

// Step returns the global step the entry was logged at.
func (e LogEntry) Step() (int, bool) {
	i, ok := e.Int("step")
	return int(i), ok
}

// SortedKeys returns the keys in the order HF writes them (sort_keys=True).
func (e LogEntry) SortedKeys() []string {
	keys := e.Keys()
	sort.Strings(keys)
	return keys
}
