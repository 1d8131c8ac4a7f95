package gemma3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gemma3"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/internal/reftest"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// Gemma 3 through the models API, the generator and the trainer.

var _ models.CausalLM = (*gemma3.Model)(nil)

const fixture = "gemma3-tiny"

func openRT(t testing.TB, devices int) *xla.Runtime {
	t.Helper()
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go", NumDevices: devices})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func fixtureDir(t testing.TB) string { return filepath.Join(reftest.Dir(t), fixture) }

func loadLM(t testing.TB, rt *xla.Runtime) models.CausalLM {
	t.Helper()
	m, err := models.Load(context.Background(), rt, fixtureDir(t), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lm, ok := m.(models.CausalLM)
	if !ok || m.Architecture() != gemma3.Architecture {
		t.Fatalf("models.Load gave %T (%s)", m, m.Architecture())
	}
	return lm
}

// EstimateFootprint's parameter count is exact: the sum of Params().
func TestFootprintIsExact(t *testing.T) {
	rt := openRT(t, 1)
	for _, untied := range []bool{false, true} {
		cfg, err := models.ParseConfig(filepath.Join(fixtureDir(t), "config.json"))
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.(*gemma3.Config)
		c.TieWordEmbeddings, c.AttentionBias = !untied, untied
		m, err := models.New(context.Background(), rt, c, models.NewOptions{Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, p := range m.Params() {
			n += int64(p.NumElements())
		}
		fp, err := models.EstimateFootprint(c)
		if err != nil {
			t.Fatal(err)
		}
		if fp.Params != n || fp.MLPMatrices != 3 {
			t.Errorf("untied=%v: footprint %d parameters (%d MLP matrices), model has %d", untied, fp.Params, fp.MLPMatrices, n)
		}
	}
}

// fullArgmax decodes greedily by re-running the whole sequence through Forward at every step,
// with HF's repetition penalty (1: off) applied to the last position's logits.
func fullArgmax(t *testing.T, rt *xla.Runtime, m models.Model, prompt []int, n int, penalty float64) []int {
	t.Helper()
	seq := slices.Clone(prompt)
	var out []int
	for range n {
		ids := make([][]int, 1)
		ids[0] = seq
		res, err := core.Run(rt.Backend(), m.(core.Forwarder), core.Inputs{InputIDs: reftest.Int32(ids)}, false)
		if err != nil {
			t.Fatal(err)
		}
		l := reftest.Float64s(t, res.Logits)
		V := res.Logits.Shape().Dim(2)
		last := slices.Clone(l[(len(seq)-1)*V:])
		if penalty != 1 {
			seen := map[int]bool{}
			for _, id := range seq {
				if !seen[id] {
					seen[id] = true
					if last[id] < 0 {
						last[id] *= penalty
					} else {
						last[id] /= penalty
					}
				}
			}
		}
		best := 0
		for i, v := range last {
			if v > last[best] {
				best = i
			}
		}
		out = append(out, best)
		seq = append(seq, best)
	}
	return out
}

// TestGenerateMatchesFullRecomputePastWindow: greedy decoding with the KV cache equals the
// argmax of full forward passes for 60 tokens (4 + 60 = 64 positions, eight times the fixture's
// sliding window of 8), plain and with a repetition penalty (which keeps this tiny random model
// from repeating one token, so the continuation varies).
func TestGenerateMatchesFullRecomputePastWindow(t *testing.T) {
	rt := openRT(t, 1)
	lm := loadLM(t, rt)
	ref := reftest.Read(t, fixture)
	for _, penalty := range []float64{1, 3} {
		for _, prompt := range [][]int{ref.InputIDs[0][:4], ref.InputIDs[1][:4]} {
			opts := models.DefaultGenerateOptions()
			opts.MaxNewTokens, opts.EOSTokenIDs, opts.RepetitionPenalty = 60, []int{}, penalty
			got, err := models.Generate(context.Background(), rt, lm, prompt, opts)
			if err != nil {
				t.Fatal(err)
			}
			want := fullArgmax(t, rt, lm, prompt, 60, penalty)
			distinct := map[int]bool{}
			for _, id := range got {
				distinct[id] = true
			}
			t.Logf("penalty %g, prompt %v: %d tokens, %d distinct: %v", penalty, prompt, len(got), len(distinct), got)
			if len(got) != 60 || !slices.Equal(got, want) {
				t.Errorf("penalty %g: KV-cache greedy %v\nfull recompute %v", penalty, got, want)
			}
		}
	}
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// randomExamples are n sequences of seq pseudo-random tokens (pad token 0 included).
func randomExamples(n, seq, vocab int) data.SliceDataset {
	var ds data.SliceDataset
	x := uint32(2024)
	for range n {
		ids := make([]int32, seq)
		for j := range ids {
			x = x*1664525 + 1013904223
			ids[j] = int32((x >> 8) % uint32(vocab))
		}
		ds = append(ds, data.Example{InputIDs: ids})
	}
	return ds
}

type stopAfter struct {
	trainer.BaseCallback
	step   int
	cancel context.CancelFunc
}

func (s *stopAfter) OnStepEnd(_ context.Context, e *trainer.Event) error {
	if e.State.GlobalStep == s.step {
		s.cancel()
	}
	return nil
}

type run struct {
	devices, perDevice int
	bf16               bool
}

// train runs the Trainer on the fixture for 6 steps (saving every 3); stop > 0 interrupts it
// after that step, resume continues from the latest checkpoint.
func (r run) train(t *testing.T, out string, stop int, resume bool) *trainer.TrainerState {
	t.Helper()
	rt := openRT(t, r.devices)
	m, err := models.Load(context.Background(), rt, fixtureDir(t), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := trainer.DefaultTrainingArguments()
	a.OutputDir, a.PerDeviceTrainBatchSize, a.LearningRate = out, r.perDevice, 3e-3
	a.MaxSteps, a.SaveSteps, a.LoggingSteps, a.SaveStrategy = 6, 3, 1, "steps"
	a.BF16 = r.bf16
	noBar := true
	a.DisableTqdm = &noBar
	if resume {
		a.ResumeFromCheckpoint = "true"
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var cbs []trainer.Callback
	if stop > 0 {
		cbs = append(cbs, &stopAfter{step: stop, cancel: cancel})
	}
	tr, err := trainer.New(a, m, randomExamples(32, 24, 512), nil, trainer.Options{Runtime: rt, Logger: quiet(), Callbacks: cbs})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Train(ctx)
	if stop > 0 {
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("interrupted run: %v", err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	return tr.State()
}

func losses(st *trainer.TrainerState) []float64 {
	var out []float64
	for _, e := range st.LogHistory {
		if l, ok := e.Loss(); ok {
			out = append(out, l)
		}
	}
	return out
}

// TestTrainerExactResume: with bf16 mixed precision on 2 replicas, 6 steps straight and 3 +
// resume + 3 give bitwise-identical weights, optimizer state and logged losses.
func TestTrainerExactResume(t *testing.T) {
	r := run{devices: 2, perDevice: 2, bf16: true}
	straight, split := t.TempDir(), t.TempDir()
	a := r.train(t, straight, 0, false)
	r.train(t, split, 3, false)
	if l, _ := checkpoint.List(split); len(l) != 1 || l[0].Step != 3 {
		t.Fatalf("after the interrupted run: %v", l)
	}
	b := r.train(t, split, 0, true)
	for _, f := range []string{"model.safetensors", "optimizer.safetensors"} {
		x, err1 := os.ReadFile(filepath.Join(straight, "checkpoint-6", f))
		y, err2 := os.ReadFile(filepath.Join(split, "checkpoint-6", f))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between the straight and the resumed run", f)
		}
	}
	la, lb := losses(a), losses(b)
	t.Logf("losses straight %v, resumed %v", la, lb)
	if len(la) != 6 || !slices.Equal(la[3:], lb[len(lb)-3:]) {
		t.Errorf("logged losses differ: straight %v, resumed %v", la, lb)
	}
}

// TestTrainerReplicasAndBF16: 2 replicas of 2 sequences follow 1 device of 4 (same global batch)
// within float32 rounding; bf16 mixed precision starts within bf16's precision of the float32
// loss and learns.
func TestTrainerReplicasAndBF16(t *testing.T) {
	one := losses(run{devices: 1, perDevice: 4}.train(t, t.TempDir(), 0, false))
	two := losses(run{devices: 2, perDevice: 2}.train(t, t.TempDir(), 0, false))
	bf := losses(run{devices: 1, perDevice: 4, bf16: true}.train(t, t.TempDir(), 0, false))
	t.Logf("1 device %v\n2 replicas %v\nbf16 %v", one, two, bf)
	for i := range one {
		if math.Abs(one[i]-two[i]) > 2e-4 {
			t.Errorf("step %d: 1 device %.4f, 2 replicas %.4f", i+1, one[i], two[i])
		}
	}
	if math.Abs(bf[0]-one[0]) > 1e-2*one[0] || bf[0] == one[0] && bf[1] == one[1] {
		t.Errorf("bf16 first loss %.4f, float32 %.4f", bf[0], one[0])
	}
	if !(one[5] < one[0]) || !(bf[5] < bf[0]) {
		t.Errorf("did not learn: float32 %v, bf16 %v", one, bf)
	}
}

// A bf16 file loads as float32 master weights (default) or as bf16 variables ("auto"), computes
// close to the float32 model, and saves back bit-exactly.
func TestBF16Files(t *testing.T) {
	rt := openRT(t, 1)
	m := loadLM(t, rt)
	ref := reftest.Read(t, fixture)
	logits := func(m models.Model) []float64 {
		res, err := core.Run(rt.Backend(), m.(core.Forwarder), core.Inputs{InputIDs: reftest.Int32(ref.InputIDs)}, false)
		if err != nil {
			t.Fatal(err)
		}
		return reftest.Float64s(t, res.Logits)
	}
	full := logits(m)
	half := t.TempDir()
	if err := m.Save(half, models.SaveOptions{DType: "bfloat16"}); err != nil {
		t.Fatal(err)
	}
	for _, dt := range []string{"", "auto"} {
		hm, err := models.Load(context.Background(), rt, half, models.LoadOptions{DType: dt})
		if err != nil {
			t.Fatal(err)
		}
		d := reftest.MaxAbsDiff(logits(hm), full)
		t.Logf("bf16 file loaded with DType %q: max |logits - float32| %.3g", dt, d)
		if d > 0.25 || d == 0 || math.IsNaN(d) {
			t.Errorf("DType %q: logits differ by %.3g", dt, d)
		}
		back := t.TempDir()
		if err := hm.Save(back, models.SaveOptions{DType: "bfloat16"}); err != nil {
			t.Fatal(err)
		}
		a, _ := os.ReadFile(filepath.Join(half, "model.safetensors"))
		b, _ := os.ReadFile(filepath.Join(back, "model.safetensors"))
		if !bytes.Equal(a, b) {
			t.Errorf("DType %q: bf16 -> load -> bf16 is not bit-exact", dt)
		}
	}
}
