package trainer

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const stateDir = "../testdata/hf-files/trainer_state"

func readTestFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func loadState(t *testing.T, name string) (*TrainerState, []byte) {
	t.Helper()
	path := filepath.Join(stateDir, name)
	data := readTestFile(t, path)
	s, err := ParseTrainerState(data, path)
	if err != nil {
		t.Fatalf("ParseTrainerState(%s): %v", name, err)
	}
	return s, data
}

func intp(i int) *int         { return &i }
func f64p(f float64) *float64 { return &f }
func strp(s string) *string   { return &s }
func deref[T any](p *T) (T, bool) {
	var z T
	if p == nil {
		return z, false
	}
	return *p, true
}

// TestTrainerStateRealFiles pins what each real trainer_state.json holds.
func TestTrainerStateRealFiles(t *testing.T) {
	tests := []struct {
		file           string
		globalStep     int
		maxSteps       int
		epoch          float64
		bestStep       *int
		bestMetric     *float64
		bestCheckpoint *string
		entries        int
		loggingSteps   int // 500 (HF's default) where the old schema lacks the field
		trainBatchSize *int
		totalFlos      float64
		control        *TrainerControl
		earlyStopping  *EarlyStoppingCallbackState
		byteExact      bool // read → write reproduces the file (LF-normalized)
	}{
		{
			file: "bert_weibo_rumor_old_final_trainer_state.json", globalStep: 25800, maxSteps: 25800, epoch: 100,
			entries: 52, loggingSteps: 500, totalFlos: 1.18478524985856e+17,
			byteExact: false, // old schema: writing adds the fields 4.3x+ introduced
		},
		{
			file: "qwen05_verifier_final_trainer_state.json", globalStep: 120, maxSteps: 120, epoch: 3,
			bestStep: intp(120), bestMetric: f64p(0.049445949494838715),
			bestCheckpoint: strp("/root/autodl-tmp/saves/qwen05-verifier-full/checkpoint-120"),
			entries:        31, loggingSteps: 5, trainBatchSize: intp(8), totalFlos: 597695573409792.0,
			control:   &TrainerControl{ShouldSave: true, ShouldTrainingStop: true},
			byteExact: true,
		},
		{
			file: "sentiment_feedback_windows_path_trainer_state.json", globalStep: 2445, maxSteps: 2445, epoch: 3,
			bestStep: intp(2445), bestMetric: f64p(0.6534430847919005), bestCheckpoint: strp(`./results\checkpoint-2445`),
			entries: 51, loggingSteps: 50, trainBatchSize: intp(16), totalFlos: 970697011983552.0,
			control:   &TrainerControl{ShouldSave: true, ShouldTrainingStop: true},
			byteExact: true,
		},
		{
			file: "tinyllama_sft_checkpoint-2800_trainer_state.json", globalStep: 2800, maxSteps: 2808, epoch: 1.9949220489977728,
			bestStep: intp(2800), bestMetric: f64p(1.1219322681427002), bestCheckpoint: strp("./results/checkpoint-2800"),
			entries: 200, loggingSteps: 15, trainBatchSize: intp(2), totalFlos: 7.124293413922406e+16,
			control:       &TrainerControl{ShouldSave: true},
			earlyStopping: &EarlyStoppingCallbackState{Patience: 4, Threshold: 0, PatienceCounter: 0},
			byteExact:     true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			s, data := loadState(t, tt.file)
			if s.GlobalStep != tt.globalStep || s.MaxSteps != tt.maxSteps {
				t.Errorf("global_step/max_steps = %d/%d, want %d/%d", s.GlobalStep, s.MaxSteps, tt.globalStep, tt.maxSteps)
			}
			if e, ok := deref(s.Epoch); !ok || e != tt.epoch {
				t.Errorf("epoch = %v, want %v", s.Epoch, tt.epoch)
			}
			if !reflect.DeepEqual(s.BestGlobalStep, tt.bestStep) || !reflect.DeepEqual(s.BestMetric, tt.bestMetric) ||
				!reflect.DeepEqual(s.BestModelCheckpoint, tt.bestCheckpoint) {
				t.Errorf("best = %v %v %v", s.BestGlobalStep, s.BestMetric, s.BestModelCheckpoint)
			}
			if len(s.LogHistory) != tt.entries {
				t.Errorf("%d log entries, want %d", len(s.LogHistory), tt.entries)
			}
			if s.LoggingSteps != tt.loggingSteps || !reflect.DeepEqual(s.TrainBatchSize, tt.trainBatchSize) {
				t.Errorf("logging_steps %d train_batch_size %v", s.LoggingSteps, s.TrainBatchSize)
			}
			if s.TotalFlos != tt.totalFlos {
				t.Errorf("total_flos = %v, want %v", s.TotalFlos, tt.totalFlos)
			}
			if !reflect.DeepEqual(s.Control, tt.control) || !reflect.DeepEqual(s.EarlyStopping, tt.earlyStopping) {
				t.Errorf("callbacks: control %+v early stopping %+v", s.Control, s.EarlyStopping)
			}
			if !s.IsLocalProcessZero || !s.IsWorldProcessZero || s.IsHyperParamSearch || s.TrialName != nil || !s.TrialParams.IsNull() {
				t.Errorf("process/trial fields: %+v", s)
			}

			out := s.MarshalHF()
			want := bytes.ReplaceAll(data, []byte("\r\n"), []byte("\n"))
			if tt.byteExact && !bytes.Equal(out, want) {
				i := firstDiff(out, want)
				t.Errorf("rewrite differs at byte %d:\n got …%s…\nwant …%s…", i, around(out, i), around(want, i))
			}
			again, err := ParseTrainerState(out, "rewritten")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(again, s) {
				t.Errorf("read → write → read differs:\n%+v\n%+v", again, s)
			}
			if !bytes.Equal(again.MarshalHF(), out) {
				t.Error("second write differs from the first")
			}
		})
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func around(b []byte, i int) string { return string(b[max(0, i-40):min(len(b), i+40)]) }

// TestTrainerStateOldSchemaDefaults: fields a 4.x file lacks take TrainerState's dataclass
// defaults, and the rewrite is the file plus exactly those fields.
func TestTrainerStateOldSchemaDefaults(t *testing.T) {
	s, data := loadState(t, "bert_weibo_rumor_old_final_trainer_state.json")
	if s.EvalSteps != 500 || s.SaveSteps != 500 || s.LoggingSteps != 500 || s.TrainBatchSize != nil ||
		s.BestGlobalStep != nil || s.NumInputTokensSeen != 0 || s.NumTrainEpochs != 100 {
		t.Errorf("defaults not applied: %+v", s)
	}
	if s.StatefulCallbacks.Kind() != JSONObject || len(s.StatefulCallbacks.Object()) != 0 || s.Control != nil {
		t.Errorf("stateful_callbacks = %v", s.StatefulCallbacks)
	}
	out := string(s.MarshalHF())
	for _, added := range []string{
		`  "best_global_step": null,` + "\n",
		`  "eval_steps": 500,` + "\n",
		`  "logging_steps": 500,` + "\n",
		`  "num_input_tokens_seen": 0,` + "\n",
		`  "save_steps": 500,` + "\n",
		`  "stateful_callbacks": {},` + "\n",
		`  "train_batch_size": null,` + "\n",
	} {
		if !strings.Contains(out, added) {
			t.Fatalf("rewrite lacks %q", added)
		}
		out = strings.Replace(out, added, "", 1)
	}
	if out != string(data) {
		t.Errorf("rewrite minus the new fields differs from the file at byte %d", firstDiff([]byte(out), data))
	}
}

func TestTrainerStateLogHistory(t *testing.T) {
	s, _ := loadState(t, "tinyllama_sft_checkpoint-2800_trainer_state.json")
	first := s.LogHistory[0]
	if got := first.Keys(); !reflect.DeepEqual(got, []string{"epoch", "grad_norm", "learning_rate", "loss", "mean_token_accuracy", "num_tokens", "step"}) {
		t.Errorf("keys = %v", got)
	}
	if loss, ok := first.Loss(); !ok || loss != 2.0762 {
		t.Errorf("loss = %v %v", loss, ok)
	}
	if step, ok := first.Step(); !ok || step != 15 {
		t.Errorf("step = %v", step)
	}
	if lr, ok := first.LearningRate(); !ok || lr != 2.456140350877193e-06 {
		t.Errorf("learning_rate = %v", lr)
	}
	if g, ok := first.GradNorm(); !ok || g != 1.0048305988311768 {
		t.Errorf("grad_norm = %v", g)
	}
	// TRL's float token count stays a float (61440.0), not an int.
	if v, _ := first.Get("num_tokens"); v.Kind() != JSONFloat {
		t.Errorf("num_tokens kind = %v", v.Kind())
	}
	last := s.LogHistory[len(s.LogHistory)-1]
	if l, ok := last.EvalLoss(); !ok || l != 1.1219322681427002 {
		t.Errorf("eval_loss = %v", l)
	}
	if _, ok := last.Loss(); ok {
		t.Error("eval entry has a loss")
	}

	q, _ := loadState(t, "qwen05_verifier_final_trainer_state.json")
	summary := q.LogHistory[len(q.LogHistory)-1]
	if tl, ok := summary.TrainLoss(); !ok || tl != 0.11913943774998188 {
		t.Errorf("train_loss = %v", tl)
	}
	if fl, ok := summary.TotalFlos(); !ok || fl != 597695573409792.0 {
		t.Errorf("total_flos = %v", fl)
	}
	// 5.x logs unrounded losses, whose mean is train_loss.
	var sum float64
	var n int
	for _, e := range q.LogHistory {
		if l, ok := e.Loss(); ok {
			sum += l
			n++
		}
	}
	if mean := sum / float64(n); math.Abs(mean-0.11913943774998188) > 1e-15 {
		t.Errorf("mean logged loss %v != train_loss", mean)
	}

	// With and LogEntry construction.
	e := NewLogEntry(JSONMember{"loss", JSONFloatValue(PyRound(2.67565, 4))}, JSONMember{"step", JSONIntValue(10)})
	e2 := e.With("learning_rate", JSONFloatValue(1e-05))
	if e.Len() != 2 || e2.Len() != 3 {
		t.Errorf("With modified the original: %d %d", e.Len(), e2.Len())
	}
	st := NewTrainerState()
	st.LogHistory = append(st.LogHistory, e2)
	out := string(st.MarshalHF())
	if !strings.Contains(out, "{\n      \"learning_rate\": 1e-05,\n      \"loss\": 2.6757,\n      \"step\": 10\n    }") {
		t.Errorf("log entry not written sorted with Python floats:\n%s", out)
	}
}

func TestTrainerStateWindowsFile(t *testing.T) {
	s, data := loadState(t, "sentiment_feedback_windows_path_trainer_state.json")
	if !bytes.Contains(data, []byte("\r\n")) {
		t.Fatal("test file lost its CRLF line endings")
	}
	if *s.BestModelCheckpoint != "./results\\checkpoint-2445" {
		t.Errorf("best_model_checkpoint = %q", *s.BestModelCheckpoint)
	}
	if !bytes.Contains(s.MarshalHF(), []byte(`"best_model_checkpoint": "./results\\checkpoint-2445"`)) {
		t.Error("backslash not escaped on writing")
	}
	last := s.LogHistory[len(s.LogHistory)-1]
	if acc, ok := last.Float("eval_f1_macro"); !ok || acc != *s.BestMetric {
		t.Errorf("eval_f1_macro %v, best_metric %v", acc, *s.BestMetric)
	}
}

func TestTrainerStateTypedCallbacks(t *testing.T) {
	s, _ := loadState(t, "tinyllama_sft_checkpoint-2800_trainer_state.json")
	s.EarlyStopping.PatienceCounter = 2
	s.Control.ShouldTrainingStop = true
	again, err := ParseTrainerState(s.MarshalHF(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if again.EarlyStopping.PatienceCounter != 2 || again.EarlyStopping.Patience != 4 || !again.Control.ShouldTrainingStop {
		t.Errorf("typed callback changes not written: %+v %+v", again.EarlyStopping, again.Control)
	}
	// A fresh state writes TrainerControl in HF's shape.
	st := NewTrainerState()
	st.Control = &TrainerControl{ShouldLog: true}
	st.EarlyStopping = &EarlyStoppingCallbackState{Patience: 3, Threshold: 0.01}
	out := string(st.MarshalHF())
	for _, want := range []string{
		"\"EarlyStoppingCallback\": {\n      \"args\": {\n        \"early_stopping_patience\": 3,\n        \"early_stopping_threshold\": 0.01\n      },\n      \"attributes\": {\n        \"early_stopping_patience_counter\": 0\n      }\n    },",
		"\"TrainerControl\": {\n      \"args\": {\n        \"should_epoch_stop\": false,\n        \"should_evaluate\": false,\n        \"should_log\": true,\n        \"should_save\": false,\n        \"should_training_stop\": false\n      },\n      \"attributes\": {}\n    }",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	// A callback registered twice is a list: kept raw, no typed view.
	dup := []byte(`{"stateful_callbacks": {"EarlyStoppingCallback": [{"args": {}, "attributes": {}}, {"args": {}, "attributes": {}}]}}`)
	d, err := ParseTrainerState(dup, "dup")
	if err != nil {
		t.Fatal(err)
	}
	if d.EarlyStopping != nil {
		t.Errorf("typed view of a list: %+v", d.EarlyStopping)
	}
	if !bytes.Contains(d.MarshalHF(), []byte("\"EarlyStoppingCallback\": [\n")) {
		t.Error("list entry not kept")
	}
}

func TestTrainerStateUnknownFieldsAndNaN(t *testing.T) {
	in := []byte(`{"global_step": 3, "future_field": {"b": 1, "a": [1.5, NaN]}, "log_history": [{"loss": NaN, "grad_norm": Infinity, "step": 3, "custom": "x\u00e9\ud83d\ude00"}]}`)
	s, err := ParseTrainerState(in, "in")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Extra) != 1 || s.Extra[0].Key != "future_field" {
		t.Fatalf("extra = %v", s.Extra)
	}
	if l, _ := s.LogHistory[0].Loss(); !math.IsNaN(l) {
		t.Errorf("loss = %v", l)
	}
	out := string(s.MarshalHF())
	for _, want := range []string{
		"\"future_field\": {\n    \"a\": [\n      1.5,\n      NaN\n    ],\n    \"b\": 1\n  },",
		`"custom": "x\u00e9\ud83d\ude00",`, `"grad_norm": Infinity,`, `"loss": NaN,`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

func TestTrainerStateErrors(t *testing.T) {
	for _, tt := range []struct {
		name, in, want string
		syntax         bool
	}{
		{"truncated", `{"global_step": 3, "log_history": [`, "line 1 column 36", true},
		{"not an object", `[1, 2]`, "top level is a list", true},
		{"string step", `{"global_step": "3"}`, `trainer.TrainerState.global_step: is a string, want an integer`, false},
		{"fractional step", `{"global_step": 3.5}`, "global_step: is a float, want an integer", false},
		{"bad history", `{"log_history": {}}`, "log_history: is a object, want a list", false},
		{"bad entry", `{"log_history": [1]}`, "log_history[0]: is a int, want an object", false},
		{"bad bool", `{"is_world_process_zero": 1}`, "is_world_process_zero: is a int, want true or false", false},
		{"bad flos", `{"total_flos": "many"}`, "total_flos: is a string, want a number", false},
		{"invalid utf8", "{\"trial_name\": \"\xff\"}", "not valid UTF-8", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTrainerState([]byte(tt.in), "state.json")
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "state.json") {
				t.Fatalf("err = %v, want it to mention %q and the file", err, tt.want)
			}
			if errors.Is(err, ErrJSONSyntax) != tt.syntax {
				t.Errorf("errors.Is(ErrJSONSyntax) = %v", !tt.syntax)
			}
		})
	}
}

func TestTrainerStateSaveLoad(t *testing.T) {
	s, data := loadState(t, "qwen05_verifier_final_trainer_state.json")
	path := filepath.Join(t.TempDir(), "trainer_state.json")
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	if got := readTestFile(t, path); !bytes.Equal(got, data) {
		t.Error("saved file differs from the original")
	}
	back, err := LoadTrainerState(path)
	if err != nil || !reflect.DeepEqual(back, s) {
		t.Errorf("LoadTrainerState: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left: %v", entries)
	}
	if _, err := LoadTrainerState(filepath.Join(t.TempDir(), "missing.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestComputeSteps(t *testing.T) {
	a := DefaultTrainingArguments()
	a.LoggingSteps, a.SaveSteps = 0.1, 200
	a.EvalSteps = f64p(0.25)
	s := NewTrainerState()
	s.ComputeSteps(&a, 1001)
	if s.MaxSteps != 1001 || s.LoggingSteps != 101 || s.EvalSteps != 251 || s.SaveSteps != 200 {
		t.Errorf("compute_steps: %+v", s)
	}
	a.EvalSteps = nil
	s = NewTrainerState()
	s.ComputeSteps(&a, 10)
	if s.EvalSteps != 500 { // unset eval_steps leaves the dataclass default
		t.Errorf("eval_steps = %d", s.EvalSteps)
	}
}

// FuzzParseTrainerState: parsing never panics, and whatever parses writes a canonical form
// that parses back to an equal state and rewrites identically.
func FuzzParseTrainerState(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(stateDir, "*.json"))
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err == nil && len(data) < 12000 {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"log_history": [{"loss": NaN, "x": [1, {"y": -0.0}]}], "epoch": 1e400}`))
	f.Add([]byte(`{"stateful_callbacks": {"TrainerControl": {"args": {"should_log": true}, "attributes": {}}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseTrainerState(data, "fuzz")
		if err != nil {
			return
		}
		out := s.MarshalHF()
		again, err := ParseTrainerState(out, "rewritten")
		if err != nil {
			t.Fatalf("rewrite does not parse: %v\n%s", err, out)
		}
		if out2 := again.MarshalHF(); !bytes.Equal(out, out2) {
			t.Fatalf("rewrite is not stable:\n%s\n%s", out, out2)
		}
	})
}
