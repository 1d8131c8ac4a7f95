package models

import (
	"errors"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/llama"
	"github.com/gotpu/gotpu/models/qwen3"
)

// TestScratchConfig: ScratchConfig is CONFIG_MAPPING[model_type]() plus update_from_string —
// HF's class defaults, overrides converted to the default's type, derived fields re-derived — and
// its refusals name the argument (model_type, config_overrides) and what to change.
func TestScratchConfig(t *testing.T) {
	// LlamaConfig(): head_dim 4096/32 = 128, num_key_value_heads = num_attention_heads = 32.
	cfg, err := ScratchConfig("llama", "")
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.(*llama.Config); l.HeadDim != 128 || l.NumKeyValueHeads != 32 || l.HiddenSize != 4096 || l.VocabSize != 32000 {
		t.Errorf("llama defaults: head_dim %d kv %d hidden %d vocab %d, want 128 32 4096 32000", l.HeadDim, l.NumKeyValueHeads, l.HiddenSize, l.VocabSize)
	}
	cfg, err = ScratchConfig("llama", "hidden_size=64,num_attention_heads=4,num_hidden_layers=2,rms_norm_eps=1e-5")
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.(*llama.Config); l.HeadDim != 16 || l.NumKeyValueHeads != 4 || l.NumHiddenLayers != 2 || l.RMSNormEps != 1e-5 {
		t.Errorf("llama overridden: head_dim %d kv %d layers %d eps %g, want 16 4 2 1e-05", l.HeadDim, l.NumKeyValueHeads, l.NumHiddenLayers, l.RMSNormEps)
	}
	cfg, err = ScratchConfig("mistral", "hidden_size=64,num_attention_heads=4,num_key_value_heads=2")
	if err != nil {
		t.Fatal(err)
	}
	if l := cfg.(*llama.Config); l.HeadDim != 16 || l.NumKeyValueHeads != 2 {
		t.Errorf("mistral: head_dim %d kv %d, want 16 2", l.HeadDim, l.NumKeyValueHeads)
	}
	cfg, err = ScratchConfig("gpt2", "n_embd=32,n_layer=2,n_head=2,scale_attn_weights=no,resid_pdrop=0")
	if err != nil {
		t.Fatal(err)
	}
	if g := cfg.(*gpt2.Config); g.NEmbd != 32 || g.NLayer != 2 || g.ScaleAttnWeights || g.ResidPdrop != 0 || g.VocabSize != 50257 {
		t.Errorf("gpt2: %+v", g)
	}
	cfg, err = ScratchConfig("qwen3", "hidden_size=64,num_attention_heads=4,num_key_value_heads=2,head_dim=16,num_hidden_layers=3")
	if err != nil {
		t.Fatal(err)
	}
	if q := cfg.(*qwen3.Config); q.NumHiddenLayers != 3 || (q.LayerTypes != nil && len(q.LayerTypes) != 3) {
		t.Errorf("qwen3: layers %d, layer_types %v", q.NumHiddenLayers, q.LayerTypes)
	}

	for _, c := range []struct {
		modelType, overrides string
		field                string
		want                 []string
		unsupported          bool
	}{
		{"t5", "", "model_type", []string{`"t5"`, "gpt2, llama, mistral, qwen2, qwen3, gemma3_text"}, true},
		{"bert", "", "model_type", []string{`"bert"`, "gpt2, llama"}, true},
		{"", "", "model_type", []string{"required"}, true},
		{"gpt2", "n_embed=32", "config_overrides", []string{"key n_embed isn't in the original config dict of gpt2"}, false},
		{"gpt2", "n_layer=two", "config_overrides", []string{"n_layer=two: not an int"}, false},
		{"gpt2", "n_layer", "config_overrides", []string{`"n_layer" is not key=value`}, false},
		{"gpt2", "scale_attn_weights=maybe", "config_overrides", []string{`can't derive true or false from "maybe"`}, false},
		{"gpt2", "n_inner=12", "config_overrides", []string{"only int, float, bool or string values"}, false},
		{"gpt2", "n_embd=30,n_head=4", "config_overrides", []string{"the config of model_type with config_overrides"}, false},
	} {
		_, err := ScratchConfig(c.modelType, c.overrides)
		var se *ScratchError
		if !errors.As(err, &se) || se.Field != c.field {
			t.Errorf("ScratchConfig(%q, %q) = %v, want a ScratchError on %s", c.modelType, c.overrides, err, c.field)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("ScratchConfig(%q, %q): %v; want it to say %q", c.modelType, c.overrides, err, w)
			}
		}
		if errors.Is(err, ErrUnsupported) != c.unsupported {
			t.Errorf("ScratchConfig(%q, %q): errors.Is(ErrUnsupported) = %v", c.modelType, c.overrides, !c.unsupported)
		}
	}
}
