package trainer

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"sort"
	"testing"
)

func TestBatchAndStepArithmetic(t *testing.T) {
	a := DefaultTrainingArguments()
	a.PerDeviceTrainBatchSize, a.GradientAccumulationSteps = 4, 3
	if got := a.GlobalTrainBatchSize(8); got != 96 {
		t.Errorf("global batch = %d, want 4×8×3", got)
	}
	// 1000 examples over 8 devices × 4: 31.25 global micro-batches.
	if got := a.BatchesPerEpoch(1000, 8); got != 32 {
		t.Errorf("batches (keep last) = %d", got)
	}
	a.DataloaderDropLast = true
	if got := a.BatchesPerEpoch(1000, 8); got != 31 {
		t.Errorf("batches (drop last) = %d", got)
	}
	if got := a.BatchesPerEpoch(0, 8); got != 0 {
		t.Errorf("empty dataset: %d", got)
	}
	// 31 batches, accumulation 3: 10 full updates and a partial one (HF ≥ 4.46 counts it).
	if got := a.UpdateStepsPerEpoch(31); got != 11 {
		t.Errorf("updates/epoch = %d", got)
	}
	if got := a.UpdateStepsPerEpoch(2); got != 1 {
		t.Errorf("updates/epoch for fewer batches than accumulation = %d", got)
	}
	for _, tt := range []struct {
		epochs   float64
		maxSteps int
		perEpoch int
		steps    int
		loop     int
	}{
		{3, -1, 11, 33, 3},
		{2.5, -1, 7, 18, 3},   // ceil(17.5); the third epoch is cut short
		{0.3, -1, 10, 3, 1},   // fractional epoch
		{3, 100, 11, 100, 10}, // max_steps wins; 10 epochs reach it
		{3, 22, 11, 22, 2},
	} {
		b := DefaultTrainingArguments()
		b.NumTrainEpochs, b.MaxSteps = tt.epochs, tt.maxSteps
		if got := b.NumTrainingSteps(tt.perEpoch); got != tt.steps {
			t.Errorf("epochs %v max_steps %d: %d steps, want %d", tt.epochs, tt.maxSteps, got, tt.steps)
		}
		if got := b.EpochsToRun(tt.perEpoch); got != tt.loop {
			t.Errorf("epochs %v max_steps %d: loop runs %d epochs, want %d", tt.epochs, tt.maxSteps, got, tt.loop)
		}
	}
}

func TestNumWarmupSteps(t *testing.T) {
	for _, tt := range []struct {
		steps, ratio float64
		total, want  int
	}{
		{0, 0, 100, 0},
		{10, 0, 100, 10},
		{0, 0.1, 100, 10},
		{0, 0.05, 2445, 123},  // ceil(122.25)
		{0, 0.1, 2445, 245},   // the Windows trainer_state run
		{0.1, 0, 2445, 245},   // 5.x: warmup_steps < 1 is a ratio
		{300, 0.5, 1000, 300}, // both set: warmup_steps wins (4.x)
		{2.7, 0, 100, 2},      // int(warmup_steps)
	} {
		a := DefaultTrainingArguments()
		a.WarmupSteps, a.WarmupRatio = tt.steps, tt.ratio
		if got := a.NumWarmupSteps(tt.total); got != tt.want {
			t.Errorf("warmup_steps %v ratio %v of %d: %d, want %d", tt.steps, tt.ratio, tt.total, got, tt.want)
		}
	}
}

func TestFlowSteps(t *testing.T) {
	a := DefaultTrainingArguments()
	a.LoggingSteps, a.LoggingFirstStep = 0.1, true
	a.EvalStrategy, a.EvalSteps, a.EvalDelay = "steps", f64p(4), 6
	a.SaveSteps = 5
	f := a.Flow(20)
	if f.LoggingSteps != 2 || f.EvalSteps != 4 || f.SaveSteps != 5 {
		t.Fatalf("resolved intervals %+v", f)
	}
	var logs, evals, saves []int
	for s := 1; s <= 20; s++ {
		c := f.StepEnd(s)
		if c.ShouldLog {
			logs = append(logs, s)
		}
		if c.ShouldEvaluate {
			evals = append(evals, s)
		}
		if c.ShouldSave {
			saves = append(saves, s)
		}
		if c.ShouldTrainingStop != (s == 20) {
			t.Errorf("step %d: stop = %v", s, c.ShouldTrainingStop)
		}
		if f.ShouldLog(s) != c.ShouldLog || f.ShouldEvaluate(s) != c.ShouldEvaluate || f.ShouldSave(s) != c.ShouldSave {
			t.Errorf("step %d: shortcuts disagree", s)
		}
	}
	for name, got := range map[string][]int{"log": logs, "eval": evals, "save": saves} {
		want := map[string][]int{
			"log":  {1, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20}, // first step, then every ceil(20×0.1)
			"eval": {8, 12, 16, 20},                         // every 4, once eval_delay 6 has passed
			"save": {5, 10, 15, 20},
		}[name]
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s at %v, want %v", name, got, want)
		}
	}
	// The final step saves with the "steps" strategy even off the interval.
	a.SaveSteps = 7
	if f := a.Flow(20); !f.ShouldSave(20) || f.ShouldSave(13) || !f.ShouldSave(14) {
		t.Error("final save")
	}
	// Epoch strategies decide at epoch ends only; "best" and "no" never save on steps.
	e := DefaultTrainingArguments()
	e.LoggingStrategy, e.EvalStrategy, e.SaveStrategy, e.EvalDelay = "epoch", "epoch", "epoch", 2
	fe := e.Flow(30)
	if c := fe.StepEnd(30); c.ShouldLog || c.ShouldEvaluate || c.ShouldSave || !c.ShouldTrainingStop {
		t.Errorf("epoch strategies at a step: %+v", c)
	}
	if c := fe.EpochEnd(1); !c.ShouldLog || c.ShouldEvaluate || !c.ShouldSave {
		t.Errorf("epoch 1 (before eval_delay): %+v", c)
	}
	if c := fe.EpochEnd(2); !c.ShouldEvaluate {
		t.Errorf("epoch 2: %+v", c)
	}
	for _, strategy := range []SaveStrategy{SaveBest, SaveNo} {
		b := DefaultTrainingArguments()
		b.SaveStrategy, b.SaveSteps = strategy, 1
		if fb := b.Flow(5); fb.ShouldSave(5) || fb.ShouldSave(1) || fb.EpochEnd(1).ShouldSave {
			t.Errorf("save_strategy %s saves on a step", strategy)
		}
	}
	if z := a.Flow(0); z.ShouldLog(0) {
		t.Error("a 0-step run logs")
	}
}

// TestFlowReproducesRealLogs: the steps at which real runs logged and evaluated are the ones
// DefaultFlowCallback (Flow) picks for their arguments.
func TestFlowReproducesRealLogs(t *testing.T) {
	for _, tt := range []struct {
		file       string
		eval       IntervalStrategy
		epochSteps int // steps per epoch, for epoch evaluation
	}{
		{"qwen05_verifier_final_trainer_state.json", "steps", 0},
		{"tinyllama_sft_checkpoint-2800_trainer_state.json", "steps", 0},
		{"sentiment_feedback_windows_path_trainer_state.json", "epoch", 815},
		{"bert_weibo_rumor_old_final_trainer_state.json", "no", 0},
	} {
		st, _ := loadState(t, tt.file)
		a := DefaultTrainingArguments()
		a.LoggingSteps, a.SaveSteps, a.EvalStrategy = float64(st.LoggingSteps), float64(st.SaveSteps), tt.eval
		if tt.eval == "steps" {
			a.EvalSteps = f64p(float64(st.EvalSteps))
		}
		f := a.Flow(st.MaxSteps)
		var wantLogs, wantEvals, gotLogs, gotEvals []int
		for _, e := range st.LogHistory {
			step, _ := e.Step()
			if _, ok := e.Loss(); ok {
				wantLogs = append(wantLogs, step)
			}
			if _, ok := e.EvalLoss(); ok {
				wantEvals = append(wantEvals, step)
			}
		}
		for s := 1; s <= st.GlobalStep; s++ {
			c := f.StepEnd(s)
			if tt.epochSteps > 0 && s%tt.epochSteps == 0 {
				c.ShouldEvaluate = c.ShouldEvaluate || f.EpochEnd(float64(s/tt.epochSteps)).ShouldEvaluate
			}
			if c.ShouldLog {
				gotLogs = append(gotLogs, s)
			}
			if c.ShouldEvaluate {
				gotEvals = append(gotEvals, s)
			}
		}
		sort.Ints(wantEvals)
		if !reflect.DeepEqual(gotLogs, wantLogs) || !reflect.DeepEqual(gotEvals, wantEvals) {
			t.Errorf("%s:\nlogs  %v\nwant  %v\nevals %v\nwant  %v", tt.file, gotLogs, wantLogs, gotEvals, wantEvals)
		}
	}
}

// TestIsDecayParameterFixtures: the decay groups HF's Trainer formed for the GPT-2, Llama and
// BERT fixtures (reference.json lists them).
func TestIsDecayParameterFixtures(t *testing.T) {
	for _, model := range []string{"gpt2-tiny", "gpt2-tiny-affine", "llama-tiny", "bert-tiny", "qwen3-tiny"} {
		var ref struct {
			AdamW struct {
				Decay   []string `json:"decay_params"`
				NoDecay []string `json:"no_decay_params"`
			} `json:"adamw"`
		}
		if err := json.Unmarshal(readTestFile(t, filepath.Join("../testdata/models", model, "reference.json")), &ref); err != nil {
			t.Fatal(err)
		}
		if len(ref.AdamW.Decay) == 0 || len(ref.AdamW.NoDecay) == 0 {
			t.Fatalf("%s: no decay groups in reference.json", model)
		}
		for _, name := range ref.AdamW.Decay {
			if !IsDecayParameter(name) {
				t.Errorf("%s: %s should decay", model, name)
			}
		}
		for _, name := range ref.AdamW.NoDecay {
			if IsDecayParameter(name) {
				t.Errorf("%s: %s should not decay", model, name)
			}
		}
	}
	// Other HF naming schemes.
	for name, want := range map[string]bool{
		"lm_head.weight": true, "transformer.wte.weight": true, "model.layers.3.mlp.gate_proj.weight": true,
		"model.layers.0.self_attn.q_norm.weight": false, "encoder.block.0.layer.0.layer_norm.weight": false,
		"decoder.final_layer_norm.weight": false, "transformer.ln_f.weight": false, "h.0.ln_attn.bias": false,
		"model.decoder.layers.0.self_attn_layer_norm.weight": false, "transformer.h.0.mlp.c_proj.weight": true,
		"model.norm_proj.weight": true, "vit.layernorm_before.weight": false, "model.rmsnorm.weight": false,
	} {
		if got := IsDecayParameter(name); got != want {
			t.Errorf("IsDecayParameter(%s) = %v, want %v", name, got, want)
		}
	}
}
