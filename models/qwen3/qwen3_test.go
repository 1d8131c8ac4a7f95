package qwen3

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/internal/reftest"
	"github.com/gotpu/gotpu/xla"
)

const fixture = "qwen3-tiny"

// goBackends are the pure-Go backends the fixture parity test runs on, with the same tolerances.
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

// The fixture's logits, loss and every gradient norm, on both pure-Go backends.
func TestFixtureParity(t *testing.T) {
	for _, backend := range goBackends {
		t.Run(backend, func(t *testing.T) {
			rt := openGoBackend(t, backend)
			ref := reftest.Read(t, fixture)
			m, err := Load(context.Background(), rt, fixtureDir(t), core.LoadOptions{})
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
		})
	}
}

// Params' NoDecay is exactly the reference's HF Trainer decay grouping (q_norm/k_norm included),
// and the table is the file's tensors in named_parameters order.
func TestDecayGroupsMatchReference(t *testing.T) {
	ref := reftest.Read(t, fixture)
	cfg := parseFile(t, filepath.Join(fixtureDir(t), "config.json"))
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
	for _, n := range noDecay {
		if !strings.HasSuffix(n, "norm.weight") {
			t.Errorf("%s has no decay but is not a norm weight", n)
		}
	}
	var names, refNames []string
	for _, p := range Table(cfg) {
		names = append(names, p.Name)
	}
	for n := range ref.GradNorm {
		refNames = append(refNames, n)
	}
	slices.Sort(names)
	slices.Sort(refNames)
	if !slices.Equal(names, refNames) {
		t.Fatalf("table %v, reference parameters %v", names, refNames)
	}
}

// The reference's derived facts: head_dim 32 (not hidden/heads = 16), the attention scale and the
// rotary inverse frequencies.
func TestDerivedFacts(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(fixtureDir(t), "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Derived struct {
			HeadDim        int       `json:"head_dim"`
			AttentionScale float64   `json:"attention_scale"`
			InvFreq        []float64 `json:"rope_inv_freq"`
			LayerTypes     []string  `json:"layer_types"`
		} `json:"derived"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	cfg := parseFile(t, filepath.Join(fixtureDir(t), "config.json"))
	if cfg.HeadDim != ref.Derived.HeadDim || cfg.HeadDim == cfg.HiddenSize/cfg.NumAttentionHeads {
		t.Errorf("head_dim %d, want %d", cfg.HeadDim, ref.Derived.HeadDim)
	}
	if d := math.Abs(math.Pow(float64(cfg.HeadDim), -0.5) - ref.Derived.AttentionScale); d > 1e-15 {
		t.Errorf("attention scale differs by %g", d)
	}
	inv := InvFreq(cfg)
	if len(inv) != len(ref.Derived.InvFreq) {
		t.Fatalf("%d inverse frequencies, want %d", len(inv), len(ref.Derived.InvFreq))
	}
	for i := range inv {
		if math.Abs(inv[i]-ref.Derived.InvFreq[i]) > 1e-14*ref.Derived.InvFreq[i] {
			t.Errorf("inv_freq[%d] = %g, want %g", i, inv[i], ref.Derived.InvFreq[i])
		}
	}
	if !slices.Equal(cfg.resolvedLayerTypes(), ref.Derived.LayerTypes) || slices.Max(cfg.LayerWindows()) != 0 {
		t.Errorf("layer types %v windows %v, want %v", cfg.resolvedLayerTypes(), cfg.LayerWindows(), ref.Derived.LayerTypes)
	}
}

func parseFile(t testing.TB, path string) *Config {
	t.Helper()
	raw, err := core.ReadRawConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ParseConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func parseJSON(t testing.TB, js string) (*Config, error) {
	t.Helper()
	raw, err := core.ParseRawConfig("/x/config.json", []byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return ParseConfig(raw)
}

// fixtureJSON is the fixture's config.json with keys replaced ("null" values included) or removed
// (a nil value).
func fixtureJSON(t testing.TB, edits map[string]any) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir(t), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range edits {
		if v == nil {
			delete(m, k)
		} else if v == "null" {
			m[k] = nil
		} else {
			m[k] = v
		}
	}
	out, _ := json.Marshal(m)
	return string(out)
}

// transformers 4.5x and 5.x spellings of the same model parse to the same config and are written
// back in their own spelling.
func TestConfigForms(t *testing.T) {
	v4 := parseFile(t, filepath.Join(fixtureDir(t), "config.json"))
	if v4.HeadDim != 32 || v4.NumKeyValueHeads != 2 || v4.Rope.Theta != 1e6 || v4.Rope.Type != "default" ||
		v4.RMSNormEps != 1e-6 || v4.TieWordEmbeddings || v4.AttentionBias || v4.UseSlidingWindow || v4.DTypeKey != "dtype" ||
		!slices.Equal(v4.BOSTokenID, []int{1}) || !slices.Equal(v4.EOSTokenID, []int{2}) || v4.PadTokenID != nil {
		t.Errorf("4.57 file: %+v", v4)
	}
	// transformers 5: rope_parameters instead of rope_theta / rope_scaling.
	v5js := fixtureJSON(t, map[string]any{"rope_theta": nil, "rope_scaling": nil, "transformers_version": "5.0.0",
		"rope_parameters": map[string]any{"rope_theta": 1e6, "rope_type": "default"}})
	v5, err := parseJSON(t, v5js)
	if err != nil {
		t.Fatal(err)
	}
	if v5.Rope != v4.Rope || v5.HeadDim != v4.HeadDim {
		t.Errorf("5.x file: rope %+v head_dim %d, want %+v %d", v5.Rope, v5.HeadDim, v4.Rope, v4.HeadDim)
	}
	out, err := v5.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if _, ok := back["rope_theta"]; ok {
		t.Errorf("5.x file written back with rope_theta: %s", out)
	}
	if rp, _ := back["rope_parameters"].(map[string]any); rp["rope_theta"] != 1e6 || rp["rope_type"] != "default" {
		t.Errorf("rope_parameters written as %v", back["rope_parameters"])
	}
	// torch_dtype (transformers < 4.56) is read and written under its own key.
	old, err := parseJSON(t, fixtureJSON(t, map[string]any{"dtype": nil, "torch_dtype": "bfloat16", "layer_types": nil}))
	if err != nil {
		t.Fatal(err)
	}
	if old.DTypeKey != "torch_dtype" || old.DType != "bfloat16" || !slices.Equal(old.resolvedLayerTypes(), v4.resolvedLayerTypes()) {
		t.Errorf("4.51 file: %+v", old)
	}

	// Class defaults: head_dim 128 (not hidden/heads), num_key_value_heads 32 when absent and the
	// head count when null.
	noHD, err := parseJSON(t, fixtureJSON(t, map[string]any{"head_dim": nil}))
	if err != nil {
		t.Fatal(err)
	}
	if noHD.HeadDim != 128 {
		t.Errorf("head_dim absent: %d, want Qwen3Config's 128", noHD.HeadDim)
	}
	if out, _ := noHD.JSON(); !strings.Contains(string(out), `"head_dim": 128`) {
		t.Errorf("head_dim default not written: %s", out)
	}
	nullKV, err := parseJSON(t, fixtureJSON(t, map[string]any{"num_key_value_heads": "null"}))
	if err != nil || nullKV.NumKeyValueHeads != 4 {
		t.Errorf("num_key_value_heads null: %v, %v", nullKV, err)
	}
	absentKV, err := parseJSON(t, fixtureJSON(t, map[string]any{"num_key_value_heads": nil, "num_attention_heads": 64}))
	if err != nil || absentKV.NumKeyValueHeads != 32 {
		t.Errorf("num_key_value_heads absent: %v, %v", absentKV, err)
	}

	// rope_scaling linear, in both spellings: the inverse frequencies are divided by the factor.
	for _, js := range []string{
		fixtureJSON(t, map[string]any{"rope_scaling": map[string]any{"type": "linear", "factor": 4.0}}),
		fixtureJSON(t, map[string]any{"rope_theta": nil, "rope_scaling": nil,
			"rope_parameters": map[string]any{"rope_theta": 1e6, "rope_type": "linear", "factor": 4.0}}),
	} {
		lin, err := parseJSON(t, js)
		if err != nil {
			t.Fatal(err)
		}
		if lin.Rope != (Rope{Theta: 1e6, Type: "linear", Factor: 4}) {
			t.Errorf("linear rope: %+v", lin.Rope)
		}
		a, b := InvFreq(lin), InvFreq(v4)
		for i := range a {
			if math.Abs(a[i]-b[i]/4) > 1e-15*b[i] {
				t.Errorf("linear inv_freq[%d] = %g, want %g", i, a[i], b[i]/4)
			}
		}
		out, err := lin.JSON()
		if err != nil {
			t.Fatal(err)
		}
		again, err := parseJSON(t, string(out))
		if err != nil || again.Rope != lin.Rope {
			t.Errorf("linear rope written as %s: %+v, %v", out, again, err)
		}
	}

	// Sliding window: only with use_sliding_window, from max_window_layers on (or layer_types).
	sw, err := parseJSON(t, fixtureJSON(t, map[string]any{"use_sliding_window": true, "sliding_window": 8,
		"max_window_layers": 1, "layer_types": nil}))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(sw.LayerWindows(), []int{0, 8}) || !slices.Equal(sw.resolvedLayerTypes(), []string{FullAttention, SlidingAttention}) {
		t.Errorf("sliding window: windows %v types %v", sw.LayerWindows(), sw.resolvedLayerTypes())
	}
	off, err := parseJSON(t, fixtureJSON(t, map[string]any{"use_sliding_window": false, "sliding_window": 8,
		"max_window_layers": 0, "layer_types": nil}))
	if err != nil || slices.Max(off.LayerWindows()) != 0 {
		t.Errorf("use_sliding_window false: windows %v, %v", off.LayerWindows(), err)
	}
	explicit, err := parseJSON(t, fixtureJSON(t, map[string]any{"use_sliding_window": true, "sliding_window": 5,
		"layer_types": []string{SlidingAttention, FullAttention}}))
	if err != nil || !slices.Equal(explicit.LayerWindows(), []int{5, 0}) {
		t.Errorf("explicit layer_types: windows %v, %v", explicit.LayerWindows(), err)
	}
}

// Bad configs are errors naming the file and field.
func TestConfigErrors(t *testing.T) {
	for _, c := range []struct {
		name  string
		edits map[string]any
		want  []string
	}{
		{"unknown layer type", map[string]any{"layer_types": []string{"full_attention", "chunked_attention"}},
			[]string{`field "layer_types"`, `"chunked_attention"`, "layer 1"}},
		{"layer_types length", map[string]any{"layer_types": []string{"full_attention"}},
			[]string{`field "layer_types"`, "1 entries", "num_hidden_layers 2"}},
		{"sliding layer without window", map[string]any{"layer_types": []string{"full_attention", "sliding_attention"}},
			[]string{`field "layer_types"`, "layer 1 is sliding_attention", "use_sliding_window is false"}},
		{"non-positive window", map[string]any{"use_sliding_window": true, "sliding_window": 0},
			[]string{`field "sliding_window"`, "must be positive"}},
		{"head_dim null", map[string]any{"head_dim": "null"}, []string{`field "head_dim"`, "null", "128"}},
		{"head_dim odd", map[string]any{"head_dim": 31}, []string{`field "head_dim"`, "even"}},
		{"kv heads not dividing", map[string]any{"num_key_value_heads": 3}, []string{`field "num_key_value_heads"`, "multiple"}},
		{"kv heads default", map[string]any{"num_key_value_heads": nil}, []string{`field "num_key_value_heads"`, "default 32"}},
		{"rope yarn", map[string]any{"rope_scaling": map[string]any{"rope_type": "yarn", "factor": 4.0}},
			[]string{`field "rope_scaling"`, `"yarn"`}},
		{"rope per layer type", map[string]any{"rope_theta": nil, "rope_scaling": nil,
			"rope_parameters": map[string]any{"full_attention": map[string]any{"rope_type": "default"}}},
			[]string{`field "rope_parameters"`, "per-layer-type"}},
		{"partial rotary", map[string]any{"rope_scaling": map[string]any{"rope_type": "default", "partial_rotary_factor": 0.5}},
			[]string{`field "rope_scaling"`, "partial_rotary_factor"}},
		{"linear without factor", map[string]any{"rope_scaling": map[string]any{"rope_type": "linear"}},
			[]string{`field "rope_scaling"`, "factor"}},
		{"activation", map[string]any{"hidden_act": "swiglu"}, []string{`field "hidden_act"`, "swiglu"}},
		{"eps", map[string]any{"rms_norm_eps": 0}, []string{`field "rms_norm_eps"`}},
		{"model type", map[string]any{"model_type": "qwen2"}, []string{`field "model_type"`, `"qwen2"`}},
		{"wrong type", map[string]any{"num_hidden_layers": "two"}, []string{`field "num_hidden_layers"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseJSON(t, fixtureJSON(t, c.edits))
			if err == nil {
				t.Fatal("parsed without error")
			}
			msg := err.Error()
			t.Log(msg)
			for _, w := range append(c.want, "/x/config.json") {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// tinyConfig is a small random Qwen3 config (head_dim != hidden/heads, GQA).
func tinyConfig() *Config {
	c := DefaultConfig()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 64, 32, 48, 2
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.MaxPositionEmbeddings = 4, 2, 12, 64
	c.Rope.Theta = 1e6
	return c
}

// New draws HF's _init_weights distributions: RMSNorm weights (q/k norms included) are ones, the
// padding row is zero, linear weights have std initializer_range.
func TestNewInit(t *testing.T) {
	rt := openGoBackend(t, xla.GoBackendGotpu)
	cfg := tinyConfig()
	pad := 3
	cfg.PadTokenID = &pad
	cfg.AttentionBias = true
	m, err := New(context.Background(), rt, cfg, NewOptions{Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]int{
		"model.layers.1.self_attn.q_proj.weight": {48, 32}, "model.layers.1.self_attn.k_proj.bias": {24},
		"model.layers.1.self_attn.o_proj.bias": {32}, "model.layers.1.self_attn.q_norm.weight": {12},
		"model.layers.1.self_attn.k_norm.weight": {12}, "lm_head.weight": {64, 32},
	}
	for _, p := range m.Params() {
		v, err := m.Variable(p.Name)
		if err != nil {
			t.Fatal(err)
		}
		vals := reftest.Float64s(t, v.MustValue())
		if s, ok := want[p.Name]; ok && !slices.Equal(s, p.Shape) {
			t.Errorf("%s: shape %v, want %v", p.Name, p.Shape, s)
		}
		delete(want, p.Name)
		switch {
		case strings.HasSuffix(p.Name, "norm.weight"):
			for _, x := range vals {
				if x != 1 {
					t.Fatalf("%s not initialised to ones", p.Name)
				}
			}
		case strings.HasSuffix(p.Name, ".bias"):
			if slices.Max(vals) != 0 || slices.Min(vals) != 0 {
				t.Errorf("%s not zero", p.Name)
			}
		default:
			var sq float64
			for _, x := range vals {
				sq += x * x
			}
			std := math.Sqrt(sq / float64(len(vals)))
			if math.Abs(std-0.02) > 0.004 {
				t.Errorf("%s: std %.4f, want 0.02", p.Name, std)
			}
			if p.Name == "model.embed_tokens.weight" {
				row := vals[pad*32 : (pad+1)*32]
				if slices.Max(row) != 0 || slices.Min(row) != 0 {
					t.Errorf("padding row %d not zero", pad)
				}
			}
		}
	}
	if len(want) != 0 {
		t.Errorf("parameters missing from the table: %v", want)
	}
}

// nn.Embedding(padding_idx=pad_token_id): the pad row gets no gradient from the lookup (untied,
// so nothing else reaches it), while other looked-up rows do.
func TestPaddingRowGetsNoLookupGradient(t *testing.T) {
	rt := openGoBackend(t, xla.GoBackendGotpu)
	cfg := tinyConfig()
	pad := 0
	cfg.PadTokenID = &pad
	m, err := New(context.Background(), rt, cfg, NewOptions{Seed: 2})
	if err != nil {
		t.Fatal(err)
	}
	ids := tensors.FromFlatDataAndDimensions([]int32{5, 0, 9, 0, 7, 2, 8, 4}, 1, 8)
	res, err := core.Run(rt.Backend(), m, core.Inputs{InputIDs: ids, Labels: ids}, true)
	if err != nil {
		t.Fatal(err)
	}
	g := reftest.Float64s(t, res.Grads["model.embed_tokens.weight"])
	rowNorm := func(r int) float64 {
		s := 0.0
		for _, x := range g[r*32 : (r+1)*32] {
			s += x * x
		}
		return s
	}
	if rowNorm(0) != 0 || rowNorm(5) == 0 {
		t.Errorf("gradient rows: pad %g, token 5 %g", rowNorm(0), rowNorm(5))
	}
}

// Sliding-window layers: with one sliding layer of window 3, changing token 0 moves exactly the
// logits of positions 0..2; with the window off it moves every position.
func TestSlidingWindowMask(t *testing.T) {
	rt := openGoBackend(t, xla.GoBackendGotpu)
	for _, on := range []bool{true, false} {
		cfg := tinyConfig()
		cfg.NumHiddenLayers = 1
		w := 3
		cfg.UseSlidingWindow, cfg.SlidingWindow, cfg.MaxWindowLayers = on, &w, 0
		m, err := New(context.Background(), rt, cfg, NewOptions{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		run := func(first int32) []float64 {
			ids := tensors.FromFlatDataAndDimensions([]int32{first, 5, 9, 3, 7, 2}, 1, 6)
			res, err := core.Run(rt.Backend(), m, core.Inputs{InputIDs: ids}, false)
			if err != nil {
				t.Fatal(err)
			}
			return reftest.Float64s(t, res.Logits)
		}
		a, b := run(1), run(40)
		for pos := range 6 {
			d := reftest.MaxAbsDiff(a[pos*64:(pos+1)*64], b[pos*64:(pos+1)*64])
			if visible := pos < 3 || !on; visible != (d > 0) {
				t.Errorf("window on=%v: position %d: changing token 0 moves logits by %.3g", on, pos, d)
			}
		}
	}
}

// hubStyleConfig has the shape of the dense Qwen3 checkpoints' config.json as transformers 4.51
// wrote them (torch_dtype, integral rope_theta, no layer_types, head_dim 128 != hidden/heads 64,
// tied head).
const hubStyleConfig = `{
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}
`

// A hub-style config parses with its values, is written back with every original field unchanged
// (plus layer_types, as transformers 4.57 writes), and a shrunken copy builds and runs.
func TestHubStyleConfig(t *testing.T) {
	cfg, err := parseJSON(t, hubStyleConfig)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HeadDim != 128 || cfg.NumKeyValueHeads != 8 || !cfg.TieWordEmbeddings || cfg.Rope.Theta != 1e6 || cfg.DTypeKey != "torch_dtype" ||
		cfg.DType != "bfloat16" || !slices.Equal(cfg.EOSTokenID, []int{151645}) || len(cfg.LayerWindows()) != 28 || slices.Max(cfg.LayerWindows()) != 0 {
		t.Errorf("%+v", cfg)
	}
	out, err := cfg.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var orig, back map[string]any
	if err := json.Unmarshal([]byte(hubStyleConfig), &orig); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	for k, v := range orig {
		if !reflect.DeepEqual(back[k], v) {
			t.Errorf("field %q: wrote %v, file has %v", k, back[k], v)
		}
	}
	if !strings.Contains(string(out), `"rope_theta": 1000000,`) {
		t.Errorf("rope_theta respelled:\n%s", out)
	}
	for k := range back {
		if _, ok := orig[k]; !ok && k != "layer_types" {
			t.Errorf("added field %q", k)
		}
	}
	cfg.VocabSize, cfg.HiddenSize, cfg.IntermediateSize, cfg.NumHiddenLayers, cfg.HeadDim = 96, 32, 64, 2, 16
	cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.MaxPositionEmbeddings, cfg.LayerTypes = 4, 2, 32, nil
	rt := openGoBackend(t, xla.GoBackendGotpu)
	m, err := New(context.Background(), rt, cfg, NewOptions{Seed: 1, DType: "bfloat16"})
	if err != nil {
		t.Fatal(err)
	}
	ids := tensors.FromFlatDataAndDimensions([]int32{1, 5, 9, 3, 7, 2, 8, 4}, 1, 8)
	res, err := core.Run(rt.Backend(), m, core.Inputs{InputIDs: ids, Labels: ids}, true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Logits.Shape().Dimensions, []int{1, 8, 96}) {
		t.Errorf("logits %v", res.Logits.Shape())
	}
	for _, v := range reftest.Float64s(t, res.Logits) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatal("non-finite logits")
		}
	}
	if _, ok := res.Grads["lm_head.weight"]; ok || len(res.Grads) != len(m.Params()) {
		t.Errorf("tied model: %d gradients for %d parameters", len(res.Grads), len(m.Params()))
	}
}
