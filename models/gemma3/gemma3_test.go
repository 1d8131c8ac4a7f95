package gemma3

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

const fixture = "gemma3-tiny"

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

func fixtureDir(t testing.TB) string { return filepath.Join(reftest.Dir(t), fixture) }

func loadFixture(t testing.TB, rt *xla.Runtime) *Model {
	t.Helper()
	m, err := Load(context.Background(), rt, fixtureDir(t), core.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFixtureParity: logits, loss and every gradient norm of the PyTorch reference (float64 from
// the stored float32 weights), on both pure-Go backends.
func TestFixtureParity(t *testing.T) {
	for _, backend := range goBackends {
		t.Run(backend, func(t *testing.T) { fixtureParity(t, openGoBackend(t, backend)) })
	}
}

func fixtureParity(t *testing.T, rt *xla.Runtime) {
	ref := reftest.Read(t, fixture)
	m := loadFixture(t, rt)
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

// TestDecayGroupsMatchReference: no weight decay on any norm weight (the four per-layer norms,
// q_norm/k_norm and the final norm), exactly the reference's groups in state-dict order.
func TestDecayGroupsMatchReference(t *testing.T) {
	ref := reftest.Read(t, fixture)
	raw, err := core.ReadRawConfig(filepath.Join(fixtureDir(t), "config.json"))
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
	if len(noDecay) != 13 {
		t.Errorf("%d no-decay parameters, want 13 (6 norms per layer x 2 + model.norm)", len(noDecay))
	}
}
