package step

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/xla"
)

// referenceLogits reads a causal fixture's PyTorch logits (float64 from its float32 weights).
func referenceLogits(t *testing.T, all map[string]json.RawMessage) (flat []float64, shape []int) {
	t.Helper()
	var lg struct {
		Shape  []int `json:"shape"`
		Values any   `json:"values"`
	}
	if err := json.Unmarshal(all["logits"], &lg); err != nil {
		t.Fatal(err)
	}
	var walk func(any)
	walk = func(x any) {
		switch y := x.(type) {
		case []any:
			for _, e := range y {
				walk(e)
			}
		case float64:
			flat = append(flat, y)
		}
	}
	walk(lg.Values)
	if len(flat) != lg.Shape[0]*lg.Shape[1]*lg.Shape[2] {
		t.Fatalf("reference logits: %d values for shape %v", len(flat), lg.Shape)
	}
	return flat, lg.Shape
}

// hfSmoothedLoss is HF Trainer's label-smoothed causal LM loss written from transformers'
// LabelSmoother (shift_labels=True) in float64, over the reference logits [B, T, V] and labels
// [B*T] (-100 ignored): (1-eps)·Σ nll / N + eps·Σ_pos Σ_v -log_softmax / (N·V), N the active
// shifted positions of the whole batch. eps 0 is the plain ForCausalLMLoss.
func hfSmoothedLoss(logits []float64, shape []int, labels []int32, eps float64) float64 {
	B, T, V := shape[0], shape[1], shape[2]
	var nll, smooth float64
	n := 0
	for b := range B {
		for p := range T - 1 {
			y := labels[b*T+p+1]
			if y == data.IgnoreIndex {
				continue
			}
			row := logits[(b*T+p)*V : (b*T+p+1)*V]
			m := math.Inf(-1)
			for _, v := range row {
				m = math.Max(m, v)
			}
			s := 0.0
			for _, v := range row {
				s += math.Exp(v - m)
			}
			lse := m + math.Log(s)
			nll += lse - row[y]
			for _, v := range row {
				smooth += lse - v
			}
			n++
		}
	}
	return (1-eps)*nll/float64(n) + eps*smooth/(float64(n)*float64(V))
}

// label_smoothing_factor=0.1 on the GPT-2 fixture: the first step's loss (what the trainer logs)
// and the eval loss are HF's LabelSmoother computed independently from the PyTorch reference
// logits, within 1e-6 (the fixture's own float32-vs-float64 loss difference is 8.1e-7), on both
// pure-Go backends and XLA's CPU plugin; the eval loss moves from the plain one by the formula's
// difference.
func TestLabelSmoothingFixtureLoss(t *testing.T) {
	ctx := context.Background()
	ref, all := readReference(t, "gpt2-tiny")
	logits, shape := referenceLogits(t, all)
	b := ref.hostBatch(t, true)
	const eps = 0.1
	plainRef, smoothRef := hfSmoothedLoss(logits, shape, b.Labels, 0), hfSmoothedLoss(logits, shape, b.Labels, eps)
	var refLoss float64
	if err := json.Unmarshal(all["loss"], &refLoss); err != nil {
		t.Fatal(err)
	}
	if math.Abs(plainRef-refLoss) > 1e-9 {
		t.Fatalf("the float64 formula at factor 0 gives %.12f, the fixture's loss is %.12f", plainRef, refLoss)
	}
	for _, backend := range append(goBackends, "xla-cpu") {
		t.Run(backend, func(t *testing.T) {
			var rt *xla.Runtime
			if backend == "xla-cpu" {
				rt = openXLACPU(t, 1) // the PJRT plugin runs the same graph
			} else {
				rt = openGoBackend(t, backend)
			}
			evalLoss := func(s *Stepper) float64 {
				sum, terms, _, err := s.Evaluate(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				return sum / terms
			}
			plain := newFixtureStepper(t, rt, "gpt2-tiny", Config{Optimizer: fixtureOptimizer(false), NumReplicas: 1})
			s := newFixtureStepper(t, rt, "gpt2-tiny", Config{Optimizer: fixtureOptimizer(false), NumReplicas: 1, LabelSmoothing: eps})
			evalPlain, evalSmooth := evalLoss(plain), evalLoss(s)
			res, err := s.Step(ctx, [][]*data.Batch{{b}}, 1e-3)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("factor %.1f: first step loss %.9f, HF formula %.9f (diff %.2g); eval %.9f (plain %.9f): moved %.9f, formula %.9f",
				eps, res.Loss, smoothRef, res.Loss-smoothRef, evalSmooth, evalPlain, evalSmooth-evalPlain, smoothRef-plainRef)
			if math.Abs(res.Loss-smoothRef) > 1e-6 {
				t.Errorf("first step loss %.9f, HF's label-smoothed loss %.9f", res.Loss, smoothRef)
			}
			if math.Abs(evalSmooth-smoothRef) > 1e-6 {
				t.Errorf("eval loss %.9f, HF's label-smoothed loss %.9f", evalSmooth, smoothRef)
			}
			if d, want := evalSmooth-evalPlain, smoothRef-plainRef; math.Abs(d-want) > 1e-6 {
				t.Errorf("smoothing moved the eval loss by %.9f, the formula by %.9f", d, want)
			}
		})
	}
}

// The step's smoothed loss is the sum of the per-token terms over the global count, however the
// batch is split: one micro-batch, two accumulated micro-batches, or two replicas give HF's loss
// over the whole batch (transformers' LabelSmoother with num_items_in_batch, #47261). The rows'
// active counts differ (row 1 is mostly -100), so a mean of per-micro-batch means — or their sum,
// HF's bug #46731 — would not match.
func TestLabelSmoothingAccumulation(t *testing.T) {
	ctx := context.Background()
	ref, all := readReference(t, "gpt2-tiny")
	logits, shape := referenceLogits(t, all)
	b := ref.hostBatch(t, true)
	T := b.SeqLen
	for p := 2; p < T-1; p++ {
		b.Labels[T+p] = data.IgnoreIndex // row 1 keeps 3 of its 15 shifted targets
	}
	const eps = 0.1
	want := hfSmoothedLoss(logits, shape, b.Labels, eps)
	rt := openGoDevices(t, xla.GoBackendGotpu, 2)
	cfg := func(n int) Config {
		return Config{Optimizer: fixtureOptimizer(false), NumReplicas: n, LabelSmoothing: eps}
	}
	r0, r1 := batchRow(b, 0), batchRow(b, 1)
	layouts := []struct {
		name     string
		replicas int
		micro    [][]*data.Batch
	}{
		{"one micro-batch", 1, [][]*data.Batch{{b}}},
		{"two accumulated micro-batches", 1, [][]*data.Batch{{r0}, {r1}}},
		{"two replicas", 2, [][]*data.Batch{{r0, r1}}},
	}
	var norm0 float64
	for i, l := range layouts {
		s := newFixtureStepper(t, rt, "gpt2-tiny", cfg(l.replicas))
		res, err := s.Step(ctx, l.micro, 1e-3)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: loss %.9f over %g terms (HF formula %.9f), grad norm %.9f", l.name, res.Loss, res.Count, want, res.GradNorm)
		if math.Abs(res.Loss-want) > 1e-6 {
			t.Errorf("%s: loss %.9f, HF's label-smoothed loss over the whole batch %.9f", l.name, res.Loss, want)
		}
		if i == 0 {
			norm0 = res.GradNorm
		} else if math.Abs(res.GradNorm-norm0) > 1e-5*norm0 {
			t.Errorf("%s: grad norm %.9f, one micro-batch %.9f", l.name, res.GradNorm, norm0)
		}
	}
}

// Factor 0 and alpha 0 trace the very programs of a stepper without them (the golden StableHLO
// tests pin those); setting either changes the train program, and only smoothing the eval one.
func TestLossOptionsOffTraceTheSamePrograms(t *testing.T) {
	ctx := context.Background()
	rt := openGo(t)
	shape := BatchShape{Size: 2, SeqLen: 16}
	text := func(cfg Config, p Program) string {
		cfg.Optimizer, cfg.NumReplicas = fixtureOptimizer(false), 2 // the replicated step needs 2; traced, not run
		s := newFixtureStepper(t, rt, "gpt2-tiny", cfg)
		hlo, err := s.StableHLO(ctx, p, shape)
		if err != nil {
			t.Fatal(err)
		}
		return hlo
	}
	for _, p := range []Program{ProgramReplicatedStep, ProgramGradient, ProgramEval} {
		base := text(Config{}, p)
		if text(Config{LabelSmoothing: 0, NEFTuneAlpha: 0}, p) != base {
			t.Errorf("%v: factor 0 and alpha 0 changed the program", p)
		}
		if text(Config{LabelSmoothing: 0.1}, p) == base {
			t.Errorf("%v: label smoothing left the program unchanged", p)
		}
		neftune := text(Config{NEFTuneAlpha: 5}, p)
		if (neftune != base) != (p != ProgramEval) {
			t.Errorf("%v: NEFTune changed the program: %v (only the training program should change)", p, neftune != base)
		}
	}
}

// neftuneRun trains model m (fresh optimizer state, RNG from seed) for steps steps with alpha and
// returns the eval loss sum before training, the first step's loss and the trained parameters.
func neftuneRun(t *testing.T, rt *xla.Runtime, m models.Model, alpha float64, seed int64, steps int, b *data.Batch) (evalSum, loss1 float64, params State) {
	t.Helper()
	ctx := context.Background()
	if err := m.Context().SetRNGStateFromSeed(seed); err != nil {
		t.Fatal(err)
	}
	s, err := New(rt, m, Config{Optimizer: fixtureOptimizer(false), NumReplicas: 1, NEFTuneAlpha: alpha})
	if err != nil {
		t.Fatal(err)
	}
	evalSum, _, _, err = s.Evaluate(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for k := range steps {
		res, err := s.Step(ctx, [][]*data.Batch{{b}}, 1e-3)
		if err != nil {
			t.Fatal(err)
		}
		if k == 0 {
			loss1 = res.Loss
		}
	}
	st, err := s.ExportState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return evalSum, loss1, st
}

// paramsDiffer counts the parameters whose bytes differ between two states.
func paramsDiffer(a, b State) int {
	n := 0
	for i := range a.Params {
		if !bytes.Equal(a.Params[i].Bytes, b.Params[i].Bytes) {
			n++
		}
	}
	return n
}

// neftune_noise_alpha on the GPT-2 fixture (and a LoRA adapter on it, TRL's usual pairing: the
// noise is on the base model's token embedding): two steps train differently from alpha unset,
// the same seed repeats them bit for bit and another seed does not, and evaluation is untouched
// (eval loss bitwise equal); a run resumed from its step-1 state repeats step 2 bit for bit.
func TestNEFTuneTrainsNotEvaluates(t *testing.T) {
	ctx := context.Background()
	rt := openGo(t)
	ref, _ := readReference(t, "gpt2-tiny")
	b := ref.hostBatch(t, true)
	load := func(lora bool) models.Model {
		m, err := models.Load(ctx, rt, fixtureDir("gpt2-tiny"), models.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if lora {
			if m, err = peft.Load(ctx, rt, m, fixtureDir("lora/gpt2-lora-tiny"), peft.Options{}); err != nil {
				t.Fatal(err)
			}
		}
		return m
	}
	for _, lora := range []bool{false, true} {
		name := map[bool]string{false: "full", true: "lora"}[lora]
		t.Run(name, func(t *testing.T) {
			evalOff, lossOff, off := neftuneRun(t, rt, load(lora), 0, 42, 2, b)
			evalOn, lossOn, on := neftuneRun(t, rt, load(lora), 5, 42, 2, b)
			_, _, again := neftuneRun(t, rt, load(lora), 5, 42, 2, b)
			_, _, seed2 := neftuneRun(t, rt, load(lora), 5, 43, 2, b)
			t.Logf("%s: first step loss %.9f with alpha 5, %.9f without; %d/%d parameters differ after 2 steps; eval loss sum %.9f vs %.9f",
				name, lossOn, lossOff, paramsDiffer(on, off), len(on.Params), evalOn, evalOff)
			if math.Float64bits(evalOn) != math.Float64bits(evalOff) {
				t.Errorf("eval loss sum %v with NEFTune, %v without: evaluation must not see the noise", evalOn, evalOff)
			}
			if lossOn == lossOff || paramsDiffer(on, off) == 0 {
				t.Errorf("NEFTune did not change training (loss %v vs %v)", lossOn, lossOff)
			}
			if d := paramsDiffer(on, again); d != 0 {
				t.Errorf("the same seed gave %d different parameters: the noise must come from the seeded RNG", d)
			}
			if paramsDiffer(on, seed2) == 0 {
				t.Errorf("seeds 42 and 43 trained identically: the noise ignores the RNG state")
			}
			// Resume: one step, its state (the RNG's included) into a fresh stepper, one more step.
			_, _, first := neftuneRun(t, rt, load(lora), 5, 42, 1, b)
			s, err := New(rt, load(lora), Config{Optimizer: fixtureOptimizer(false), NumReplicas: 1, NEFTuneAlpha: 5})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.ImportState(first); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Step(ctx, [][]*data.Batch{{b}}, 1e-3); err != nil {
				t.Fatal(err)
			}
			resumed, err := s.ExportState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if d := paramsDiffer(on, resumed); d != 0 {
				t.Errorf("a run resumed after step 1 differs from the uninterrupted one in %d parameters", d)
			}
		})
	}
}

// A smoothing factor or alpha a model cannot honour is refused at New, naming the argument: out
// of range, or a multi-label classifier (HF's LabelSmoother gathers at integer labels).
func TestLossOptionsRefused(t *testing.T) {
	rt := openGo(t)
	m, err := models.Load(context.Background(), rt, fixtureDir("gpt2-tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []Config{{LabelSmoothing: 1}, {LabelSmoothing: math.NaN()}, {NEFTuneAlpha: -1}, {NEFTuneAlpha: math.Inf(1)}} {
		cfg.Optimizer, cfg.NumReplicas = DefaultAdamW(), 1
		_, err := New(rt, m, cfg)
		if err == nil || !(strings.Contains(err.Error(), "label_smoothing_factor") || strings.Contains(err.Error(), "neftune_noise_alpha")) {
			t.Errorf("%+v: %v, want a refusal naming the argument", cfg, err)
		}
	}
	// bert-tiny as a multi-label classifier: its config.json says so, its weights are the same.
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		raw, err := os.ReadFile(filepath.Join(fixtureDir("bert-tiny"), f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "config.json" {
			raw = bytes.Replace(raw, []byte("{"), []byte(`{"problem_type": "multi_label_classification",`), 1)
		}
		if err := os.WriteFile(filepath.Join(dir, f), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cls, err := models.Load(context.Background(), rt, dir, models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = New(rt, cls, Config{Optimizer: DefaultAdamW(), NumReplicas: 1, LabelSmoothing: 0.1})
	t.Logf("multi-label classifier with smoothing: %v", err)
	if err == nil || !strings.Contains(err.Error(), "label_smoothing_factor") || !strings.Contains(err.Error(), "multi_label_classification") {
		t.Errorf("multi-label classifier with label smoothing: %v, want a refusal naming label_smoothing_factor and the problem type", err)
	}
	if _, err := New(rt, cls, Config{Optimizer: DefaultAdamW(), NumReplicas: 1}); err != nil {
		t.Errorf("the same classifier without smoothing: %v", err)
	}
}

// A single-label classifier (bert-tiny, 3 labels) is smoothed without the shift, as HF's
// compute_loss calls the smoother for a model that is not a causal LM: the first step's loss is
// LabelSmoother over the reference logits [4, 3] within 1e-6.
func TestLabelSmoothingClassifier(t *testing.T) {
	ref, all := readReference(t, "bert-tiny")
	var lg struct {
		Values [][]float64 `json:"values"`
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(all["logits"], &raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw["values"], &lg.Values); err != nil {
		t.Fatal(err)
	}
	b := ref.hostBatch(t, false)
	const eps = 0.2
	// One "position" per example: shape [N, 2, V] with the label after it, so the shifted formula
	// scores exactly logits[i] against labels[i].
	var flat []float64
	var labels []int32
	for i, row := range lg.Values {
		flat = append(flat, row...)
		flat = append(flat, make([]float64, len(row))...)
		labels = append(labels, data.IgnoreIndex, b.Labels[i])
	}
	want := hfSmoothedLoss(flat, []int{len(lg.Values), 2, len(lg.Values[0])}, labels, eps)
	s := newFixtureStepper(t, openGo(t), "bert-tiny", Config{Optimizer: fixtureOptimizer(false), NumReplicas: 1, LabelSmoothing: eps})
	res, err := s.Step(context.Background(), [][]*data.Batch{{b}}, 1e-3)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("bert-tiny, factor %.1f: first step loss %.9f, HF formula %.9f (diff %.2g)", eps, res.Loss, want, res.Loss-want)
	if math.Abs(res.Loss-want) > 1e-6 {
		t.Errorf("loss %.9f, HF's label-smoothed loss %.9f", res.Loss, want)
	}
}

// NEFTune on XLA's CPU plugin (the PJRT path): the noise draws from the context's RNG there too,
// changes training and leaves evaluation bitwise alone.
func TestNEFTuneOnXLACPU(t *testing.T) {
	rt := openXLACPU(t, 1)
	ref, _ := readReference(t, "gpt2-tiny")
	b := ref.hostBatch(t, true)
	load := func() models.Model {
		m, err := models.Load(context.Background(), rt, fixtureDir("gpt2-tiny"), models.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	evalOff, lossOff, off := neftuneRun(t, rt, load(), 0, 42, 2, b)
	evalOn, lossOn, on := neftuneRun(t, rt, load(), 5, 42, 2, b)
	t.Logf("xla-cpu: first step loss %.9f with alpha 5, %.9f without; %d/%d parameters differ; eval loss sum %.9f vs %.9f",
		lossOn, lossOff, paramsDiffer(on, off), len(on.Params), evalOn, evalOff)
	if math.Float64bits(evalOn) != math.Float64bits(evalOff) {
		t.Errorf("eval loss sum %v with NEFTune, %v without", evalOn, evalOff)
	}
	if lossOn == lossOff || paramsDiffer(on, off) == 0 {
		t.Errorf("NEFTune did not change training on the plugin")
	}
}
