package llama

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/internal/reftest"
	"github.com/gotpu/gotpu/xla"
)

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

func TestFixtureParity(t *testing.T) {
	for _, backend := range goBackends {
		t.Run(backend, func(t *testing.T) { fixtureParity(t, openGoBackend(t, backend)) })
	}
}

func fixtureParity(t *testing.T, rt *xla.Runtime) {
	const fixture = "llama-tiny"
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
	worstRel, _ := reftest.GradCheck(t, ref.GradNorm, res.Grads, func(s string) string { return s }, 1e-4, 1e-6)
	t.Logf("%s: max |logits diff| %.3g, |loss diff| %.3g, max rel grad-norm diff %.3g", fixture, logitDiff, lossDiff, worstRel)
	if logitDiff > 1e-4 {
		t.Errorf("max |logits diff| %.3g > 1e-4", logitDiff)
	}
	if lossDiff > 1e-5 {
		t.Errorf("loss %.9g, want %.9g", loss, ref.Loss)
	}
}

func TestDecayGroupsMatchReference(t *testing.T) {
	ref := reftest.Read(t, "llama-tiny")
	raw, err := core.ReadRawConfig(filepath.Join(reftest.Dir(t), "llama-tiny", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	var decay, noDecay []string
	for _, p := range Table(cfg) {
		if p.NoDecay {
			noDecay = append(noDecay, p.Name)
		} else {
			decay = append(decay, p.Name)
		}
	}
	if !slices.Equal(decay, ref.AdamW.DecayParams) || !slices.Equal(noDecay, ref.AdamW.NoDecayParams) {
		t.Fatalf("decay groups differ:\n got %v / %v\nwant %v / %v", decay, noDecay, ref.AdamW.DecayParams, ref.AdamW.NoDecayParams)
	}
}
