package gemma3

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models/internal/core"
)

// fixtureConfig returns the fixture's config.json as a map, to derive variants from.
func fixtureConfig(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir(t), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func parseMap(t *testing.T, m map[string]any) (*Config, error) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := core.ParseRawConfig("/x/config.json", b)
	if err != nil {
		t.Fatal(err)
	}
	return ParseConfig(raw)
}

func TestParseFixtureConfig(t *testing.T) {
	c, err := parseMap(t, fixtureConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.HeadDim != 16 || c.QueryPreAttnScalar != 24 || c.SlidingWindow != 8 || c.NumKeyValueHeads != 2 ||
		!slices.Equal(c.LayerTypes, []string{SlidingAttention, FullAttention}) || c.Window(0) != 8 || c.Window(1) != 0 ||
		c.RopeOf(0) != (Rope{Theta: 10000, Type: "default", Factor: 1}) || c.RopeOf(1) != (Rope{Theta: 1e6, Type: "default", Factor: 1}) ||
		c.FinalLogitSoftcapping != nil || c.AttnLogitSoftcapping != nil || !c.TieWordEmbeddings || c.PaddingIdx() != 0 ||
		c.DTypeKey != "dtype" || c.DType != "float32" || c.HiddenActivation != "gelu_pytorch_tanh" {
		t.Errorf("%+v", c)
	}
}

// The layer-type rules: explicit layer_types wins; otherwise the pattern of the
// sliding_window_pattern key (default 6); _sliding_window_pattern is not read.
func TestLayerTypeRules(t *testing.T) {
	base := func() map[string]any {
		m := fixtureConfig(t)
		m["num_hidden_layers"] = 7
		delete(m, "layer_types")
		delete(m, "sliding_window_pattern")
		delete(m, "_sliding_window_pattern")
		return m
	}
	s, f := SlidingAttention, FullAttention
	cases := []struct {
		name string
		edit func(m map[string]any)
		want []string
	}{
		{"default pattern 6", func(map[string]any) {}, []string{s, s, s, s, s, f, s}},
		{"sliding_window_pattern 2", func(m map[string]any) { m["sliding_window_pattern"] = 2 }, []string{s, f, s, f, s, f, s}},
		{"_sliding_window_pattern alone is not read", func(m map[string]any) { m["_sliding_window_pattern"] = 2 }, []string{s, s, s, s, s, f, s}},
		{"explicit layer_types win over the pattern", func(m map[string]any) {
			m["sliding_window_pattern"] = 2
			m["layer_types"] = []string{f, f, s, s, s, s, s}
		}, []string{f, f, s, s, s, s, s}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := base()
			c.edit(m)
			cfg, err := parseMap(t, m)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(cfg.LayerTypes, c.want) {
				t.Errorf("layer types %v, want %v", cfg.LayerTypes, c.want)
			}
		})
	}
}

// RoPE settings in transformers 4.5x form (rope_theta, rope_scaling linear, rope_local_base_freq)
// and transformers 5's per-layer-type rope_parameters give the same rotary setups.
func TestRopeForms(t *testing.T) {
	v4 := fixtureConfig(t)
	v4["rope_scaling"] = map[string]any{"factor": 8.0, "rope_type": "linear"}
	v4["rope_theta"] = 500000.0
	v4["rope_local_base_freq"] = 20000.0
	c4, err := parseMap(t, v4)
	if err != nil {
		t.Fatal(err)
	}
	want := [2]Rope{{Theta: 500000, Type: "linear", Factor: 8}, {Theta: 20000, Type: "default", Factor: 1}}
	if [2]Rope{c4.RopeGlobal, c4.RopeLocal} != want {
		t.Errorf("4.x form: %+v %+v", c4.RopeGlobal, c4.RopeLocal)
	}
	v5 := fixtureConfig(t)
	for _, k := range []string{"rope_theta", "rope_scaling", "rope_local_base_freq", "_sliding_window_pattern"} {
		delete(v5, k)
	}
	v5["rope_parameters"] = map[string]any{
		"full_attention":    map[string]any{"rope_type": "linear", "factor": 8.0, "rope_theta": 500000.0},
		"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": 20000.0},
	}
	c5, err := parseMap(t, v5)
	if err != nil {
		t.Fatal(err)
	}
	if [2]Rope{c5.RopeGlobal, c5.RopeLocal} != want {
		t.Errorf("5.x form: %+v %+v", c5.RopeGlobal, c5.RopeLocal)
	}
	// Written back in the file's own form, unchanged.
	b5, _ := json.Marshal(v5)
	raw5, _ := core.ParseRawConfig("config.json", b5)
	c5b, _ := ParseConfig(raw5)
	out, err := c5b.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"rope_theta", "rope_scaling", "rope_local_base_freq"} {
		if _, ok := back[k]; ok {
			t.Errorf("transformers-5 config written back with %q", k)
		}
	}
	if rp, _ := json.Marshal(back["rope_parameters"]); !strings.Contains(string(rp), `"factor":8`) {
		t.Errorf("rope_parameters written back as %s", rp)
	}
	// A changed setting is written into rope_parameters.
	c5b.RopeGlobal.Theta = 1e6
	out, _ = c5b.JSON()
	raw, _ := core.ParseRawConfig("config.json", out)
	again, err := ParseConfig(raw)
	if err != nil || again.RopeGlobal != (Rope{Theta: 1e6, Type: "linear", Factor: 8}) || again.RopeLocal != want[1] {
		t.Errorf("after changing rope_theta: %+v, %v\n%s", again, err, out)
	}
	// transformers 5 lets rope_scaling (when present) update the full_attention entry.
	v5["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": 2.0}
	c, err := parseMap(t, v5)
	if err != nil || c.RopeGlobal != (Rope{Theta: 500000, Type: "linear", Factor: 2}) {
		t.Errorf("rope_scaling over rope_parameters: %+v %v", c.RopeGlobal, err)
	}
}

// Bad configs are errors naming the file and the field.
func TestBadConfigs(t *testing.T) {
	cases := []struct {
		name string
		edit func(m map[string]any)
		want []string
	}{
		{"unknown layer type", func(m map[string]any) { m["layer_types"] = []string{"sliding_attention", "chunked_attention"} },
			[]string{`field "layer_types"`, "layer 1", `"chunked_attention"`}},
		{"layer_types length", func(m map[string]any) { m["layer_types"] = []string{"full_attention"} },
			[]string{`field "layer_types"`, "1 entries for 2 layers"}},
		{"final softcap zero", func(m map[string]any) { m["final_logit_softcapping"] = 0.0 }, []string{`field "final_logit_softcapping"`, "positive"}},
		{"final softcap negative", func(m map[string]any) { m["final_logit_softcapping"] = -30.0 }, []string{`field "final_logit_softcapping"`}},
		{"attention softcap negative", func(m map[string]any) { m["attn_logit_softcapping"] = -50.0 }, []string{`field "attn_logit_softcapping"`}},
		{"head_dim missing", func(m map[string]any) { delete(m, "head_dim") }, []string{`field "head_dim"`, "missing", "256", "16"}},
		{"head_dim odd", func(m map[string]any) { m["head_dim"] = 15 }, []string{`field "head_dim"`, "even"}},
		{"sliding window null with sliding layers", func(m map[string]any) { m["sliding_window"] = nil }, []string{`field "sliding_window"`, "layer 0"}},
		{"pattern zero", func(m map[string]any) { delete(m, "layer_types"); m["sliding_window_pattern"] = 0 }, []string{`field "sliding_window_pattern"`}},
		{"rope type", func(m map[string]any) { m["rope_scaling"] = map[string]any{"rope_type": "yarn", "factor": 4.0} }, []string{`field "rope_scaling"`, `"yarn"`}},
		{"flat rope_parameters", func(m map[string]any) {
			m["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 1e6}
		},
			[]string{`field "rope_parameters"`, "full_attention"}},
		{"scaled local rope", func(m map[string]any) {
			m["rope_parameters"] = map[string]any{"sliding_attention": map[string]any{"rope_type": "dynamic", "factor": 2.0}}
		}, []string{`field "rope_parameters"`, "sliding_attention", `"dynamic"`}},
		{"bidirectional", func(m map[string]any) { m["use_bidirectional_attention"] = true }, []string{`field "use_bidirectional_attention"`}},
		{"kv heads", func(m map[string]any) { m["num_key_value_heads"] = 3 }, []string{`field "num_key_value_heads"`}},
		{"activation", func(m map[string]any) { m["hidden_activation"] = "swiglu" }, []string{`field "hidden_activation"`, "swiglu"}},
		{"model type", func(m map[string]any) { m["model_type"] = "gemma2" }, []string{`field "model_type"`, "gemma2"}},
		{"pad outside vocabulary", func(m map[string]any) { m["pad_token_id"] = 512 }, []string{`field "pad_token_id"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := fixtureConfig(t)
			c.edit(m)
			_, err := parseMap(t, m)
			if err == nil {
				t.Fatal("parsed without error")
			}
			t.Log(err)
			for _, w := range append(c.want, "/x/config.json") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// Gemma3ForConditionalGeneration's text_config is a diff against Gemma3TextConfig's defaults:
// a missing head_dim there is HF's 256, not an error.
func TestMultimodalTextConfig(t *testing.T) {
	cfg := `{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "torch_dtype": "bfloat16",
	  "eos_token_id": [1, 106], "image_token_index": 262144,
	  "text_config": {"hidden_size": 2560, "intermediate_size": 10240, "model_type": "gemma3_text", "num_hidden_layers": 34,
	    "rope_scaling": {"factor": 8.0, "rope_type": "linear"}, "sliding_window": 1024},
	  "vision_config": {"model_type": "siglip_vision_model"}}`
	raw, err := core.ParseRawConfig("/m/config.json", []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	c, err := ParseMultimodalConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	if c.HeadDim != 256 || c.NumAttentionHeads != 8 || c.NumKeyValueHeads != 4 || c.QueryPreAttnScalar != 256 || c.VocabSize != 262_208 ||
		c.RopeGlobal != (Rope{Theta: 1e6, Type: "linear", Factor: 8}) || c.LayerTypes[5] != FullAttention || c.LayerTypes[4] != SlidingAttention ||
		c.DType != "bfloat16" || !slices.Equal(c.EOSTokenID, []int{1}) {
		t.Errorf("%+v", c)
	}
	raw, _ = core.ParseRawConfig("/m/config.json", []byte(strings.Replace(cfg, `"sliding_window": 1024`, `"sliding_window": 1024, "head_dim": 7`, 1)))
	if _, err := ParseMultimodalConfig(raw); err == nil || !strings.Contains(err.Error(), "/m/config.json: text_config") || !strings.Contains(err.Error(), `"head_dim"`) {
		t.Errorf("bad text_config field: %v", err)
	}
}
