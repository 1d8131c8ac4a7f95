package gpt2

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/internal/reftest"
	"github.com/gotpu/gotpu/xla"
)

func openGo(t testing.TB) *xla.Runtime { return openGoBackend(t, xla.GoBackendSimpleGo) }

// goBackends are the pure-Go backends the fixture parity tests run on, with the same tolerances.
var goBackends = []string{xla.GoBackendSimpleGo, xla.GoBackendGotpu}

func openGoBackend(t testing.TB, backend string) *xla.Runtime {
	t.Helper()
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go", GoBackend: backend})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// hubName maps the fixtures' hub naming to gotpu's transformer.-prefixed naming.
func hubName(n string) string { return prefix + n }

func TestFixtureParity(t *testing.T) {
	for _, backend := range goBackends {
		t.Run(backend, func(t *testing.T) { fixtureParity(t, openGoBackend(t, backend)) })
	}
}

func fixtureParity(t *testing.T, rt *xla.Runtime) {
	for _, fixture := range []string{"gpt2-tiny", "gpt2-tiny-affine"} {
		t.Run(fixture, func(t *testing.T) {
			ref := reftest.Read(t, fixture)
			m, err := Load(context.Background(), rt, filepath.Join(reftest.Dir(t), fixture), core.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ids := reftest.Int32(ref.InputIDs)
			res, err := core.Run(rt.Backend(), m, core.Inputs{InputIDs: ids, Labels: ids}, true)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Logits.Shape().Dimensions, ref.Logits.Shape) {
				t.Fatalf("logits shape %v, want %v", res.Logits.Shape(), ref.Logits.Shape)
			}
			logitDiff := reftest.MaxAbsDiff(reftest.Float64s(t, res.Logits), ref.FlatLogits(t))
			loss := reftest.Float64s(t, res.Loss)[0]
			lossDiff := math.Abs(loss - ref.Loss)
			worstRel, _ := reftest.GradCheck(t, ref.GradNorm, res.Grads, hubName, 1e-4, 1e-6)
			t.Logf("%s: max |logits diff| %.3g, |loss diff| %.3g, max rel grad-norm diff %.3g", fixture, logitDiff, lossDiff, worstRel)
			if logitDiff > 1e-4 {
				t.Errorf("max |logits diff| %.3g > 1e-4", logitDiff)
			}
			if lossDiff > 1e-5 {
				t.Errorf("loss %.9g, want %.9g", loss, ref.Loss)
			}
			// The key third of c_attn.bias has an exactly zero true gradient: compare it absolutely.
			E := m.Cfg.NEmbd
			for i := range m.Cfg.NLayer {
				g := reftest.Float64s(t, res.Grads[prefix+"h."+string(rune('0'+i))+".attn.c_attn.bias"])
				k := 0.0
				for _, v := range g[E : 2*E] {
					k += v * v
				}
				if math.Sqrt(k) > 1e-6 {
					t.Errorf("layer %d key-bias gradient norm %.3g, want ~0", i, math.Sqrt(k))
				}
			}
		})
	}
}

func TestDecayGroupsMatchReference(t *testing.T) {
	ref := reftest.Read(t, "gpt2-tiny")
	raw, err := core.ReadRawConfig(filepath.Join(reftest.Dir(t), "gpt2-tiny", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	var decay, noDecay []string
	for _, p := range Table(cfg) {
		n := strings.TrimPrefix(p.Name, prefix)
		if p.NoDecay {
			noDecay = append(noDecay, n)
		} else {
			decay = append(decay, n)
		}
	}
	if !slices.Equal(decay, ref.AdamW.DecayParams) || !slices.Equal(noDecay, ref.AdamW.NoDecayParams) {
		t.Fatalf("decay groups differ:\n got %v / %v\nwant %v / %v", decay, noDecay, ref.AdamW.DecayParams, ref.AdamW.NoDecayParams)
	}
}

// A randomly initialised model at the benchmark shape builds, has HF's parameter count and a loss
// close to ln(vocab) (HF's small-std init gives near-uniform predictions).
func TestNewBenchmarkShape(t *testing.T) {
	rt := openGo(t)
	cfg := DefaultConfig()
	cfg.VocabSize, cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 8192, 256, 4, 4, 128
	m, err := New(context.Background(), rt, cfg, NewOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range m.Params() {
		n += p.NumElements()
	}
	// wte + wpe + 4 blocks (12 E^2 + 13 E) + ln_f.
	want := 8192*256 + 128*256 + 4*(12*256*256+13*256) + 2*256
	if n != want {
		t.Fatalf("%d parameters, want %d", n, want)
	}
	ids := make([]int32, 2*16)
	for i := range ids {
		ids[i] = int32((i * 37) % 8192)
	}
	in := tensors.FromFlatDataAndDimensions(ids, 2, 16)
	res, err := core.Run(rt.Backend(), m, core.Inputs{InputIDs: in, Labels: in}, false)
	if err != nil {
		t.Fatal(err)
	}
	loss := reftest.Float64s(t, res.Loss)[0]
	if math.Abs(loss-math.Log(8192)) > 0.1 {
		t.Fatalf("initial loss %.4f, want about ln(8192) = %.4f", loss, math.Log(8192))
	}
}

// Batch.Training switches dropout on with config.json's probabilities; evaluation is deterministic.
func TestTrainingSwitchesDropout(t *testing.T) {
	rt := openGo(t)
	cfg := DefaultConfig() // resid/embd/attn_pdrop 0.1
	cfg.VocabSize, cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 64, 16, 1, 2, 16
	m, err := New(context.Background(), rt, cfg, NewOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	ids := tensors.FromFlatDataAndDimensions([]int32{1, 2, 3, 4, 5, 6, 7, 8}, 1, 8)
	run := func(training bool) []float64 {
		res, err := core.Run(rt.Backend(), m, core.Inputs{InputIDs: ids, Labels: ids, Training: training}, training)
		if err != nil {
			t.Fatal(err)
		}
		return reftest.Float64s(t, res.Logits)
	}
	e1, e2, tr := run(false), run(false), run(true)
	if !slices.Equal(e1, e2) {
		t.Error("evaluation is not deterministic")
	}
	if reftest.MaxAbsDiff(e1, tr) == 0 {
		t.Error("training mode did not apply dropout")
	}
}
