package bert

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

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

func labelsTensor(l []int) *tensors.Tensor {
	flat := make([]int32, len(l))
	for i, v := range l {
		flat[i] = int32(v)
	}
	return tensors.FromFlatDataAndDimensions(flat, len(l))
}

func TestFixtureParity(t *testing.T) {
	for _, backend := range goBackends {
		t.Run(backend, func(t *testing.T) { fixtureParity(t, openGoBackend(t, backend)) })
	}
}

func fixtureParity(t *testing.T, rt *xla.Runtime) {
	const fixture = "bert-tiny"
	ref := reftest.Read(t, fixture)
	m, err := Load(context.Background(), rt, filepath.Join(reftest.Dir(t), fixture), "", core.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in := core.Inputs{
		InputIDs:      reftest.Int32(ref.InputIDs),
		AttentionMask: reftest.Int32(ref.AttentionMask),
		TokenTypeIDs:  reftest.Int32(ref.TokenTypeIDs),
		Labels:        labelsTensor(ref.ClassLabels()),
	}
	res, err := core.Run(rt.Backend(), m, in, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Logits.Shape().Dimensions, ref.Logits.Shape) {
		t.Fatalf("logits shape %v, want %v", res.Logits.Shape(), ref.Logits.Shape)
	}
	logitDiff := reftest.MaxAbsDiff(reftest.Float64s(t, res.Logits), ref.FlatLogits(t))
	loss := reftest.Float64s(t, res.Loss)[0]
	lossDiff := math.Abs(loss - ref.Loss)
	worstRel, worstAbs := reftest.GradCheck(t, ref.GradNorm, res.Grads, func(s string) string { return s }, 1e-4, 1e-6)
	t.Logf("%s: max |logits diff| %.3g, |loss diff| %.3g, max rel grad-norm diff %.3g, key-bias |grad norm| %.3g",
		fixture, logitDiff, lossDiff, worstRel, worstAbs)
	if logitDiff > 1e-4 {
		t.Errorf("max |logits diff| %.3g > 1e-4", logitDiff)
	}
	if lossDiff > 1e-5 {
		t.Errorf("loss %.9g, want %.9g", loss, ref.Loss)
	}

	// Without token_type_ids HF uses zeros.
	in.TokenTypeIDs, in.Labels = nil, nil
	res, err = core.Run(rt.Backend(), m, in, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := reftest.MaxAbsDiff(reftest.Float64s(t, res.Logits), ref.FlatLogitsNoTokenTypes(t)); d > 1e-4 {
		t.Errorf("logits without token_type_ids: max diff %.3g", d)
	}
}

func TestDecayGroupsMatchReference(t *testing.T) {
	ref := reftest.Read(t, "bert-tiny")
	raw, err := core.ReadRawConfig(filepath.Join(reftest.Dir(t), "bert-tiny", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(raw, ForSequenceClassification)
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

// The bare encoder loads from the classifier's file (the head is dropped with a log line) and gives
// HF's last_hidden_state; the classifier's pooler gives pooler_output.
func TestBareEncoderAndPooler(t *testing.T) {
	rt := openGo(t)
	ref := reftest.Read(t, "bert-tiny")
	dir := filepath.Join(reftest.Dir(t), "bert-tiny")
	bare, err := Load(context.Background(), rt, dir, BareModel, core.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if bare.NumLabels() != 0 || bare.Params()[0].Name != "embeddings.word_embeddings.weight" {
		t.Fatalf("bare model: %d labels, first param %s", bare.NumLabels(), bare.Params()[0].Name)
	}
	in := core.Inputs{InputIDs: reftest.Int32(ref.InputIDs), AttentionMask: reftest.Int32(ref.AttentionMask), TokenTypeIDs: reftest.Int32(ref.TokenTypeIDs)}
	res, err := core.Run(rt.Backend(), bare, in, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Logits.Shape().Dimensions, ref.LastHiddenState.Shape) || res.Loss != nil {
		t.Fatalf("last_hidden_state %v, loss %v", res.Logits.Shape(), res.Loss)
	}
	if d := reftest.MaxAbsDiff(reftest.Float64s(t, res.Logits), reftest.Flatten(t, ref.LastHiddenState.Values)); d > 1e-4 {
		t.Errorf("last_hidden_state differs by %.3g", d)
	}
	cls, err := Load(context.Background(), rt, dir, "", core.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	exec, err := mlctx.NewExec(rt.Backend(), cls.Context(), func(c *mlctx.Context, ids, mask, types *graph.Node) *graph.Node {
		_, pooled := cls.Encode(c, core.Batch{InputIDs: ids, AttentionMask: mask, TokenTypeIDs: types})
		return pooled
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	out, err := exec.Exec(in.InputIDs, in.AttentionMask, in.TokenTypeIDs)
	if err != nil {
		t.Fatal(err)
	}
	if d := reftest.MaxAbsDiff(reftest.Float64s(t, out[0]), reftest.Flatten(t, ref.PoolerOutput.Values)); d > 1e-4 {
		t.Errorf("pooler_output differs by %.3g", d)
	}
}
