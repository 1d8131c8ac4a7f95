package gemma3

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/internal/reftest"
	"github.com/gotpu/gotpu/xla"
)

// longSequence is 64 pseudo-random tokens (the fixture's max_position_embeddings, eight windows).
func longSequence(n, vocab int) []int {
	out := make([]int, n)
	x := uint32(7)
	for i := range out {
		x = x*1664525 + 1013904223
		out[i] = int((x >> 8) % uint32(vocab))
	}
	return out
}

func runLogits(t *testing.T, rt *xla.Runtime, m *Model, seq []int) []float64 {
	t.Helper()
	res, err := core.Run(rt.Backend(), m, core.Inputs{InputIDs: reftest.Int32([][]int{seq})}, false)
	if err != nil {
		t.Fatal(err)
	}
	return reftest.Float64s(t, res.Logits)
}

// cachedLogits feeds seq through ForwardCached: a prefill of the first `prefill` tokens, then one
// token at a time, and returns the logits of every position.
func cachedLogits(t *testing.T, rt *xla.Runtime, m *Model, seq []int, prefill int) []float64 {
	t.Helper()
	dims := m.CacheDims()
	L := len(seq)
	exec, err := mlctx.NewExec(rt.Backend(), m.Context(), func(c *mlctx.Context, in []*Node) []*Node {
		n := dims.Layers
		cache := &core.KVCache{K: slices.Clone(in[2 : 2+n]), V: slices.Clone(in[2+n : 2+2*n])}
		logits := m.ForwardCached(c, in[0], in[1], cache)
		return append(append([]*Node{logits}, cache.K...), cache.V...)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	cache := make([]*tensors.Tensor, 2*dims.Layers)
	for i := range cache {
		cache[i] = tensors.FromShape(shapes.Make(dtypes.Float32, 1, L, dims.KVHeads, dims.HeadDim))
	}
	var out []float64
	for pos := 0; pos < L; {
		step := 1
		if pos == 0 {
			step = prefill
		}
		args := []any{reftest.Int32([][]int{seq[pos : pos+step]}), int32(pos)}
		for _, c := range cache {
			args = append(args, c)
		}
		outs, err := exec.Exec(args...)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, reftest.Float64s(t, outs[0])...)
		copy(cache, outs[1:])
		pos += step
	}
	return out
}

// TestCacheRespectsSlidingWindow: decoding 64 tokens with the KV cache gives every position's
// logits of a full forward pass (so the sliding layers of the cached path see exactly the keys
// q - 8 < k <= q), while a model whose sliding layers see everything differs past the window.
func TestCacheRespectsSlidingWindow(t *testing.T) {
	rt := openGoBackend(t, xla.GoBackendGotpu)
	m := loadFixture(t, rt)
	seq := longSequence(m.Cfg.MaxPositionEmbeddings, m.Cfg.VocabSize)
	full := runLogits(t, rt, m, seq)
	cached := cachedLogits(t, rt, m, seq, 5)
	d := reftest.MaxAbsDiff(full, cached)
	t.Logf("64 positions, window %d: max |cached - full| %.3g", m.Cfg.SlidingWindow, d)
	if d > 1e-5 {
		t.Errorf("cached logits differ from the full forward pass by %.3g", d)
	}
	noWindow := *m
	cfg := *m.Cfg
	cfg.SlidingWindow = 1 << 20 // larger than the sequence: sliding layers see every key
	noWindow.Cfg = &cfg
	V := m.Cfg.VocabSize
	other := runLogits(t, rt, &noWindow, seq)
	if dIn := reftest.MaxAbsDiff(full[:8*V], other[:8*V]); dIn > 1e-6 {
		t.Errorf("within the window a larger window changed the logits by %.3g", dIn)
	}
	if dPast := reftest.MaxAbsDiff(full[8*V:], other[8*V:]); dPast < 1e-3 {
		t.Errorf("past the window the window does not matter (%.3g): the test is blind", dPast)
	}
}

// TestPaddingRowGradient: nn.Embedding(padding_idx=0) gives row 0 no gradient from the lookup,
// although token 0 is in the batch. Untied, that row's gradient is exactly zero; tied, it is the
// lm_head part alone, which the untied model's lm_head row 0 gradient equals.
func TestPaddingRowGradient(t *testing.T) {
	rt := openGoBackend(t, xla.GoBackendGotpu)
	fix := loadFixture(t, rt)
	ref := reftest.Read(t, fixture)
	ids := reftest.Int32(ref.InputIDs)
	H := fix.Cfg.HiddenSize
	grads := func(m *Model) map[string][]float64 {
		res, err := core.Run(rt.Backend(), m, core.Inputs{InputIDs: ids, Labels: ids}, true)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][]float64{}
		for k, v := range res.Grads {
			out[k] = reftest.Float64s(t, v)
		}
		return out
	}
	tied := grads(fix)
	if slices.Max(absAll(tied["model.embed_tokens.weight"][:H])) == 0 {
		t.Fatal("tied: row 0 has no gradient at all (the head's part is missing)")
	}
	// The untied copy: lm_head.weight = embed_tokens.weight.
	cfg := *fix.Cfg
	cfg.TieWordEmbeddings = false
	vals := map[string]*tensors.Tensor{}
	for _, p := range Table(&cfg) {
		src := p.Name
		if src == "lm_head.weight" {
			src = "model.embed_tokens.weight"
		}
		v, err := fix.Variable(src)
		if err != nil {
			t.Fatal(err)
		}
		x, _ := v.Value()
		if vals[p.Name], err = x.LocalClone(); err != nil {
			t.Fatal(err)
		}
	}
	untied := &Model{Base: core.NewBase(&cfg, Table(&cfg), rt.Backend(), vals), Cfg: &cfg}
	ug := grads(untied)
	if m := slices.Max(absAll(ug["model.embed_tokens.weight"][:H])); m != 0 {
		t.Errorf("untied: the padding row gets %.3g of lookup gradient, want exactly 0", m)
	}
	if m := slices.Max(absAll(ug["model.embed_tokens.weight"][54*H : 55*H])); m == 0 {
		t.Error("untied: token 54's row gets no gradient")
	}
	d := reftest.MaxAbsDiff(tied["model.embed_tokens.weight"][:H], ug["lm_head.weight"][:H])
	t.Logf("tied row 0 gradient vs the head's part: max diff %.3g", d)
	if d > 1e-7 {
		t.Errorf("tied row 0 gradient differs from the lm_head part by %.3g", d)
	}
	// Without a padding_idx, the lookup does contribute to row 0.
	cfg2 := *fix.Cfg
	cfg2.PadTokenID = nil
	noPad := &Model{Base: fix.Base, Cfg: &cfg2}
	if d := reftest.MaxAbsDiff(grads(noPad)["model.embed_tokens.weight"][:H], tied["model.embed_tokens.weight"][:H]); d == 0 {
		t.Error("pad_token_id null gives row 0 the same gradient: the padding rule is not what the test sees")
	}
}

func absAll(x []float64) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = math.Abs(v)
	}
	return out
}

// TestSoftcapping: final_logit_softcapping c gives tanh(logits / c) * c (and another loss);
// attn_logit_softcapping changes nothing, as in HF's Gemma 3.
func TestSoftcapping(t *testing.T) {
	rt := openGoBackend(t, xla.GoBackendGotpu)
	m := loadFixture(t, rt)
	ref := reftest.Read(t, fixture)
	seq := ref.InputIDs[0]
	base := runLogits(t, rt, m, seq)
	with := func(f func(c *Config)) *Model {
		cfg := *m.Cfg
		f(&cfg)
		return &Model{Base: m.Base, Cfg: &cfg}
	}
	attn := 0.5
	if d := reftest.MaxAbsDiff(base, runLogits(t, rt, with(func(c *Config) { c.AttnLogitSoftcapping = &attn }), seq)); d != 0 {
		t.Errorf("attn_logit_softcapping 0.5 changed the logits by %.3g; HF's Gemma 3 ignores it", d)
	}
	c := 1.5
	capped := runLogits(t, rt, with(func(cfg *Config) { cfg.FinalLogitSoftcapping = &c }), seq)
	worst := 0.0
	for i, v := range base {
		worst = math.Max(worst, math.Abs(capped[i]-math.Tanh(v/c)*c))
	}
	if worst > 1e-5 || slices.Max(absAll(capped)) >= c {
		t.Errorf("final_logit_softcapping %g: max deviation from tanh(x/c)*c %.3g, max |logit| %.3g", c, worst, slices.Max(absAll(capped)))
	}
}

// TestEmbedScaleRounding: sqrt(hidden_size) rounded to the weights' dtype, as HF's float32 buffer
// cast with .to(weight.dtype).
func TestEmbedScaleRounding(t *testing.T) {
	for _, c := range []struct {
		h    int
		dt   dtypes.DType
		want float32
	}{{64, dtypes.Float32, 8}, {1152, dtypes.Float32, float32(math.Sqrt(1152))}, {1152, dtypes.BFloat16, 34},
		{640, dtypes.BFloat16, 25.25}, {2560, dtypes.Float16, 50.59375}} {
		if got := EmbedScale(c.h, c.dt); got != c.want {
			t.Errorf("EmbedScale(%d, %s) = %v, want %v", c.h, c.dt, got, c.want)
		}
	}
}

// TestNewModelRuns: a randomly initialised model (HF's init: norms 0, padding row 0) runs, and
// its config writes back and parses to the same model.
func TestNewModelRuns(t *testing.T) {
	rt := openGoBackend(t, xla.GoBackendGotpu)
	cfg := DefaultConfig()
	cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers = 96, 32, 64, 7
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim, cfg.SlidingWindow, cfg.MaxPositionEmbeddings = 4, 1, 8, 3, 32
	cfg.LayerTypes = nil // derived from the default pattern 6
	m, err := New(context.Background(), rt, cfg, NewOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if want := DerivedLayerTypes(7, 6); !slices.Equal(cfg.LayerTypes, want) || cfg.LayerTypes[5] != FullAttention || cfg.LayerTypes[6] != SlidingAttention {
		t.Errorf("layer types %v", cfg.LayerTypes)
	}
	for _, p := range m.Params() {
		v, _ := m.Variable(p.Name)
		x, _ := v.Value()
		vals := reftest.Float64s(t, x)
		switch {
		case p.NoDecay && slices.Max(absAll(vals)) != 0:
			t.Errorf("%s initialised non-zero", p.Name)
		case p.Name == "model.embed_tokens.weight" && slices.Max(absAll(vals[:32])) != 0:
			t.Error("padding row not zero at init")
		}
	}
	logits := runLogits(t, rt, m, []int{2, 5, 9, 0, 4, 7})
	for _, v := range logits {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatal("non-finite logits")
		}
	}
	b, err := cfg.JSON()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := core.ParseRawConfig("config.json", b)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(raw)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if !slices.Equal(back.LayerTypes, cfg.LayerTypes) || back.HeadDim != 8 || back.RopeGlobal != cfg.RopeGlobal ||
		back.RopeLocal != cfg.RopeLocal || back.SlidingWindow != 3 || *back.PadTokenID != 0 || back.QueryPreAttnScalar != 256 {
		t.Errorf("written config parses to %+v\n%s", back, b)
	}
	b2, _ := back.JSON()
	if string(b2) != string(b) {
		t.Errorf("config not stable:\n%s\n%s", b, b2)
	}
}

// TestPaddingMask: a right-padded row with its attention_mask gives the unpadded row's logits at
// the real positions (padding keys are masked in sliding and full layers alike).
func TestPaddingMask(t *testing.T) {
	rt := openGoBackend(t, xla.GoBackendGotpu)
	m := loadFixture(t, rt)
	seq := longSequence(20, m.Cfg.VocabSize)
	alone := runLogits(t, rt, m, seq[:13])
	ids, mask := slices.Clone(seq), make([]int, len(seq))
	for i := range mask {
		if i < 13 {
			mask[i] = 1
		} else {
			ids[i] = 0
		}
	}
	res, err := core.Run(rt.Backend(), m, core.Inputs{InputIDs: reftest.Int32([][]int{ids}), AttentionMask: reftest.Int32([][]int{mask})}, false)
	if err != nil {
		t.Fatal(err)
	}
	padded := reftest.Float64s(t, res.Logits)[:13*m.Cfg.VocabSize]
	if d := reftest.MaxAbsDiff(alone, padded); d > 1e-5 {
		t.Errorf("padded row differs from the unpadded one by %.3g", d)
	}
}
