package trainer

import (
	"encoding/json"
	"errors"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// scheduleVectors: learning rates base_lr × lambda(step) for steps 0, 1, 2…, written from HF's
// definitions in transformers/optimization.py (evaluated with CPython, operation by operation):
//   - linear: _get_linear_schedule_with_warmup_lr_lambda (get_linear_schedule_with_warmup)
//   - cosine: _get_cosine_schedule_with_warmup_lr_lambda (get_cosine_schedule_with_warmup)
//   - cosine_with_restarts: _get_cosine_with_hard_restarts_schedule_with_warmup_lr_lambda
//   - polynomial: _get_polynomial_decay_schedule_with_warmup_lr_lambda
//   - constant / constant_with_warmup: get_constant_schedule / _get_constant_schedule_with_warmup_lr_lambda
//   - inverse_sqrt: _get_inverse_sqrt_schedule_lr_lambda (timescale = warmup or 10_000)
//   - cosine_with_min_lr: get_cosine_with_min_lr_schedule_with_warmup
//   - cosine_warmup_with_min_lr: _get_cosine_with_min_lr_schedule_with_warmup_lr_rate_lambda
//   - warmup_stable_decay: _get_wsd_scheduler_lambda (get_wsd_schedule)
//
// Edge cases: warmup 0, warmup == total, steps beyond total (cosine keeps following the wave
// there, as HF's does), fractional num_cycles.
var scheduleVectors = []struct {
	name        string
	typ         SchedulerType
	lr          float64
	warmup, tot int
	kwargs      string
	want        []float64
}{
	{"linear w2 t10", "linear", 0.001, 2, 10, `{}`, []float64{0.0, 0.0005, 0.001, 0.000875, 0.00075, 0.000625, 0.0005, 0.000375, 0.00025, 0.000125, 0.0, 0.0, 0.0}},
	{"linear w0", "linear", 5e-05, 0, 4, `{}`, []float64{5e-05, 3.7500000000000003e-05, 2.5e-05, 1.25e-05, 0.0, 0.0}},
	{"linear w==t", "linear", 0.001, 3, 3, `{}`, []float64{0.0, 0.0003333333333333333, 0.0006666666666666666, 0.0, 0.0}},
	{"cosine w3 t12", "cosine", 0.0002, 3, 12, `{}`, []float64{0.0, 6.666666666666667e-05, 0.00013333333333333334, 0.0002, 0.00019396926207859084, 0.0001766044443118978, 0.00015000000000000001, 0.00011736481776669306, 8.263518223330697e-05, 5.000000000000002e-05, 2.339555568810221e-05, 6.030737921409169e-06, 0.0, 6.030737921409157e-06}},
	{"cosine nc1.5", "cosine", 0.001, 0, 8, `{"num_cycles": 1.5}`, []float64{0.001, 0.000691341716182545, 0.00014644660940672628, 3.806023374435658e-05, 0.0004999999999999999, 0.0009619397662556432, 0.0008535533905932738, 0.00030865828381745506, 0.0}},
	{"restarts nc2", "cosine_with_restarts", 0.001, 1, 9, `{"num_cycles": 2}`, []float64{0.0, 0.001, 0.0008535533905932737, 0.0005, 0.00014644660940672628, 0.001, 0.0008535533905932737, 0.0005, 0.00014644660940672628, 0.0, 0.0}},
	{"restarts nc1.5 frac", "cosine_with_restarts", 0.001, 0, 8, `{"num_cycles": 1.5}`, []float64{0.001, 0.0009157348061512727, 0.000691341716182545, 0.00040245483899193594, 0.00014644660940672628, 9.607359798384786e-06, 0.0009619397662556434, 0.0007777851165098011, 0.0}},
	{"polynomial default", "polynomial", 0.001, 2, 10, `{}`, []float64{0.0, 0.0005, 0.001, 0.0008750124999999999, 0.000750025, 0.0006250374999999999, 0.0005000499999999999, 0.0003750625, 0.000250075, 0.0001250875, 1e-07, 1e-07}},
	{"polynomial p2", "polynomial", 0.001, 0, 6, `{"power": 2, "lr_end": 1e-5}`, []float64{0.001, 0.0006975000000000001, 0.0004500000000000001, 0.0002575, 0.00012000000000000002, 3.749999999999999e-05, 1e-05, 1e-05}},
	{"constant", "constant", 0.0003, 2, 5, `{}`, []float64{0.0003, 0.0003, 0.0003, 0.0003}},
	{"constant_with_warmup", "constant_with_warmup", 0.0003, 4, 10, `{}`, []float64{0.0, 7.5e-05, 0.00015, 0.000225, 0.0003, 0.0003}},
	{"inverse_sqrt w4", "inverse_sqrt", 0.001, 4, 100, `{}`, []float64{0.0, 0.00025, 0.0005, 0.00075, 0.001, 0.0008944271909999159, 0.0008164965809277262, 0.0007559289460184544, 0.0007071067811865475}},
	{"inverse_sqrt w0", "inverse_sqrt", 0.001, 0, 100, `{}`, []float64{0.001, 0.0009999500037496877, 0.0009999000149975006}},
	{"cosine_with_min_lr rate", "cosine_with_min_lr", 0.001, 2, 10, `{"min_lr_rate": 0.1}`, []float64{0.0, 0.0005, 0.001, 0.000965745789630079, 0.0008681980515339464, 0.0007222075445642904, 0.00055, 0.0003777924554357096, 0.00023180194846605365, 0.00013425421036992097, 0.0001, 0.0001342542103699209}},
	{"cosine_with_min_lr abs", "cosine_with_min_lr", 0.002, 0, 6, `{"min_lr": 1e-4}`, []float64{0.002, 0.001872724133595217, 0.0015249999999999999, 0.0010500000000000002, 0.0005750000000000002, 0.00022727586640478324, 0.0001, 0.00022727586640478335}},
	{"cosine_warmup_with_min_lr", "cosine_warmup_with_min_lr", 0.001, 3, 10, `{"min_lr_rate": 0.05}`, []float64{0.0003333333333333333, 0.0006666666666666666, 0.001, 0.000952960212253649, 0.0008211576558828984, 0.0006306974436292493, 0.00041930255637075066, 0.00022884234411710158, 9.703978774635096e-05, 5e-05, 9.703978774635091e-05, 0.00022884234411710147}},
	{"cosine_warmup_with_min_lr wlr", "cosine_warmup_with_min_lr", 0.001, 4, 10, `{"min_lr_rate": 0.05, "warmup_lr_rate": 0.1}`, []float64{0.0001, 0.0004, 0.0007, 0.001, 0.0009363620667976085, 0.0007624999999999999, 0.0005250000000000001, 0.0002875000000000001, 0.00011363793320239162, 5e-05, 0.00011363793320239167}},
	{"wsd default", "warmup_stable_decay", 0.001, 2, 10, `{"num_decay_steps": 4}`, []float64{0.0, 0.0005, 0.001, 0.001, 0.001, 0.001, 0.001, 0.0008535533905932737, 0.0005, 0.00014644660940672628, 0.0, 0.0}},
	{"wsd stable linear 1-sqrt min", "warmup_stable_decay", 0.001, 3, 20, `{"num_decay_steps": 4, "num_stable_steps": 2, "warmup_type": "1-sqrt", "decay_type": "linear", "min_lr_ratio": 0.1}`, []float64{0.0001, 0.00026515307716504656, 0.0004803847577293368, 0.001, 0.001, 0.001, 0.0007750000000000001, 0.00055, 0.00032500000000000004, 0.0001, 0.0001}},
	{"wsd cosine warmup 1-sqrt decay", "warmup_stable_decay", 0.001, 4, 12, `{"num_decay_steps": 5, "warmup_type": "cosine", "decay_type": "1-sqrt"}`, []float64{0.0, 0.00014644660940672623, 0.0004999999999999999, 0.0008535533905932737, 0.001, 0.001, 0.001, 0.001, 0.0005527864045000422, 0.00036754446796632414, 0.0002254033307585166, 0.00010557280900008415, 0.0}},
}

func TestScheduleVectors(t *testing.T) {
	for _, v := range scheduleVectors {
		t.Run(v.name, func(t *testing.T) {
			var kw map[string]any
			if err := json.Unmarshal([]byte(v.kwargs), &kw); err != nil {
				t.Fatal(err)
			}
			s, err := NewScheduleFromKwargs(v.typ, v.lr, v.warmup, v.tot, kw)
			if err != nil {
				t.Fatal(err)
			}
			for step, want := range v.want {
				if got := s.LR(step); got != want { // bit for bit
					t.Errorf("LR(%d) = %v, HF gives %v", step, got, want)
				}
			}
		})
	}
}

// TestScheduleFixtureLinearWarmup: the shared fixtures trained with HF's linear schedule, warmup
// 1 of 3 steps, lr 1e-3: the updates ran at 0, 1e-3, 5e-4 and the rate after the last
// scheduler step is 0.
func TestScheduleFixtureLinearWarmup(t *testing.T) {
	for _, model := range []string{"gpt2-tiny-affine", "llama-tiny", "bert-tiny", "qwen3-tiny"} {
		var ref struct {
			Warmup struct {
				LRPerStep []float64 `json:"lr_per_step"`
				LRAfter   float64   `json:"lr_after_last_scheduler_step"`
			} `json:"adamw_linear_warmup"`
		}
		if err := json.Unmarshal(readTestFile(t, filepath.Join("../testdata/models", model, "reference.json")), &ref); err != nil {
			t.Fatal(err)
		}
		if len(ref.Warmup.LRPerStep) != 3 {
			t.Fatalf("%s: lr_per_step = %v", model, ref.Warmup.LRPerStep)
		}
		a := DefaultTrainingArguments()
		a.LearningRate, a.WarmupSteps = 1e-3, 1
		s, err := a.Schedule(3)
		if err != nil {
			t.Fatal(err)
		}
		for k, want := range []float64{0, 1e-3, 5e-4} {
			if got := s.LR(k); got != want || got != ref.Warmup.LRPerStep[k] {
				t.Errorf("%s: update %d runs at %v, want %v (fixture %v)", model, k+1, got, want, ref.Warmup.LRPerStep[k])
			}
		}
		if got := s.LastLR(3); got != 0 || got != ref.Warmup.LRAfter {
			t.Errorf("%s: rate after 3 scheduler steps = %v", model, got)
		}
	}
}

// TestScheduleReproducesRealLogs: the learning_rate values in real trainer_state.json files are
// LoggedLR(step) of the schedule their run used, bit for bit. (HF ≥ 4.46 logs the rate of the
// update that completed the step: base × lambda(step-1).)
func TestScheduleReproducesRealLogs(t *testing.T) {
	for _, tt := range []struct {
		file        string
		typ         SchedulerType
		lr          float64
		warmupRatio float64
		total       int
		upToStep    int // entries after it are skipped (see below)
	}{
		// transformers 5.12, linear, lr 2e-5, warmup_ratio 0.1 of 2445 steps (245).
		{"sentiment_feedback_windows_path_trainer_state.json", "linear", 2e-5, 0.1, 2445, math.MaxInt},
		// transformers 5.8, cosine, lr 1e-5, warmup_ratio 0.05 of 120 steps (6).
		{"qwen05_verifier_final_trainer_state.json", "cosine", 1e-5, 0.05, 120, math.MaxInt},
		// TRL on transformers 4.5x, cosine, lr 1e-5, warmup_ratio 0.02 of 2808 steps (57). From
		// step 2040 on, the scheduler is one more step behind: one optimizer step was skipped
		// (as an fp16 GradScaler overflow does), so the logged rates are LoggedLR(step-1).
		{"tinyllama_sft_checkpoint-2800_trainer_state.json", "cosine", 1e-5, 0.02, 2808, 2039},
	} {
		st, _ := loadState(t, tt.file)
		a := DefaultTrainingArguments()
		a.LRSchedulerType, a.LearningRate, a.WarmupRatio = tt.typ, tt.lr, tt.warmupRatio
		s, err := a.Schedule(tt.total)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, e := range st.LogHistory {
			lr, ok1 := e.LearningRate()
			step, ok2 := e.Step()
			if !ok1 || !ok2 || step > tt.upToStep {
				continue
			}
			checked++
			if got := s.LoggedLR(step); got != lr {
				t.Errorf("%s step %d: LoggedLR = %v, file has %v (LastLR %v)", tt.file, step, got, lr, s.LastLR(step))
			}
		}
		if checked < 24 {
			t.Errorf("%s: only %d entries checked", tt.file, checked)
		}
	}
}

func TestScheduleSpecDefaultsAndErrors(t *testing.T) {
	s, err := NewSchedule(ScheduleSpec{Type: "cosine_with_restarts", BaseLR: 1, TrainingSteps: 10})
	if err != nil || *s.Spec().NumCycles != 1 {
		t.Errorf("restarts default num_cycles: %v %v", s.Spec().NumCycles, err)
	}
	s, err = NewSchedule(ScheduleSpec{Type: "inverse_sqrt", BaseLR: 1})
	if err != nil || *s.Spec().Timescale != 10_000 {
		t.Errorf("inverse_sqrt default timescale: %v", err)
	}
	s, err = NewSchedule(ScheduleSpec{Type: "inverse_sqrt", BaseLR: 1, WarmupSteps: 2, Timescale: intp(8)})
	if err != nil || s.Lambda(4) != 1/math.Sqrt(10.0/8) {
		t.Errorf("inverse_sqrt with timescale 8: lambda(4) = %v (%v)", s.Lambda(4), err)
	}
	s, err = NewSchedule(ScheduleSpec{Type: "polynomial", BaseLR: 1e-3, WarmupSteps: 4, TrainingSteps: 4})
	if err != nil || s.LR(4) != 1e-3*(1e-7/1e-3) {
		t.Errorf("polynomial warmup == total: LR(4) = %v (%v)", s.LR(4), err)
	}
	if s.Lambda(-3) != 0 {
		t.Errorf("negative step: %v", s.Lambda(-3))
	}
	for _, tt := range []struct {
		spec ScheduleSpec
		want string
	}{
		{ScheduleSpec{Type: "polynomial", BaseLR: 1e-7}, "lr_end"},
		{ScheduleSpec{Type: "cosine_with_min_lr", BaseLR: 1}, "one of min_lr or min_lr_rate"},
		{ScheduleSpec{Type: "cosine_with_min_lr", BaseLR: 1, MinLR: f64p(0.1), MinLRRate: f64p(0.1)}, "only one"},
		{ScheduleSpec{Type: "cosine_with_min_lr", BaseLR: 0, MinLR: f64p(0.1)}, "non-zero learning rate"},
		{ScheduleSpec{Type: "warmup_stable_decay", BaseLR: 1}, "num_decay_steps"},
		{ScheduleSpec{Type: "warmup_stable_decay", BaseLR: 1, NumDecaySteps: intp(1), DecayType: "exp"}, "decay_type"},
		{ScheduleSpec{Type: "inverse_sqrt", BaseLR: 1, Timescale: intp(0)}, "timescale"},
		{ScheduleSpec{Type: "reduce_lr_on_plateau", BaseLR: 1}, "not supported"},
		{ScheduleSpec{Type: "cosine_annealing", BaseLR: 1}, "unknown schedule"},
		{ScheduleSpec{Type: "linear", BaseLR: -1}, "non-negative"},
		{ScheduleSpec{Type: "linear", BaseLR: 1, WarmupSteps: -1}, "negative"},
	} {
		_, err := NewSchedule(tt.spec)
		if err == nil || !errors.Is(err, ErrSchedule) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewSchedule(%+v) = %v, want an ErrSchedule about %q", tt.spec, err, tt.want)
		}
	}
}

func TestScheduleKwargs(t *testing.T) {
	for _, tt := range []struct {
		typ    SchedulerType
		kwargs map[string]any
		want   string // "" = accepted
	}{
		{"cosine", map[string]any{"num_cycles": int64(2)}, ""},
		{"linear", map[string]any{"num_cycles": 2.0}, `linear takes no keyword "num_cycles" (it takes: none)`},
		{"cosine", map[string]any{"power": 2.0}, "it takes: num_cycles"},
		{"constant", map[string]any{"num_cycles": 1.0}, "ignores lr_scheduler_kwargs for constant"},
		{"inverse_sqrt", map[string]any{"timescale": int64(100)}, "ignores lr_scheduler_kwargs for inverse_sqrt"},
		{"cosine", map[string]any{"num_cycles": "half"}, "want a number"},
		{"warmup_stable_decay", map[string]any{"num_decay_steps": 2.5}, "not an integer"},
		{"warmup_stable_decay", map[string]any{"num_decay_steps": int64(2), "decay_type": 1.0}, "want a string"},
		{"reduce_lr_on_plateau", nil, "not supported"},
	} {
		_, err := ScheduleSpecFromKwargs(tt.typ, 1e-3, 1, 10, tt.kwargs)
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s %v: err = %v, want %q", tt.typ, tt.kwargs, err, tt.want)
		}
	}
}

// TestScheduleConcurrent: a Schedule is immutable; concurrent readers are race-free (go test -race).
func TestScheduleConcurrent(t *testing.T) {
	s, err := NewScheduleFromKwargs("cosine", 1e-3, 10, 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 100 {
				if s.LR(k) < 0 {
					t.Errorf("goroutine %d: negative lr", g)
				}
			}
		}()
	}
	wg.Wait()
}

const argsDir = "../testdata/hf-files/training_args"
