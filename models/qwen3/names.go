package qwen3

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/gotpu/gotpu/models/internal/core"
)

// Naming: gotpu reads and writes Qwen3ForCausalLM's names ("model.layers.0.self_attn.q_norm.weight",
// "lm_head.weight"); it also reads a bare Qwen3Model file (no "model." prefix). A tied lm_head is not
// written, as save_pretrained does.

// Table lists every parameter for cfg in HF's state-dict order (Qwen3ForCausalLM's
// named_parameters): per layer q/k/v/o_proj (each weight followed by its bias with
// attention_bias), q_norm, k_norm, the MLP, then the two layer norms.
func Table(cfg *Config) []core.Param {
	H, I, V, hd := cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize, cfg.HeadDim
	nh, kv := cfg.NumAttentionHeads, cfg.NumKeyValueHeads
	std := cfg.InitializerRange
	var t []core.Param
	emb := core.NewParam("model.embed_tokens.weight", []int{V, H}, false, core.InitNormal, std)
	if cfg.PadTokenID != nil && *cfg.PadTokenID >= 0 && *cfg.PadTokenID < V {
		emb.ZeroRow = *cfg.PadTokenID
	}
	t = append(t, emb)
	linear := func(name string, out, in int, bias bool) {
		t = append(t, core.NewParam(name+".weight", []int{out, in}, false, core.InitNormal, std))
		if bias {
			t = append(t, core.NewParam(name+".bias", []int{out}, true, core.InitZeros, 0))
		}
	}
	norm := func(name string, n int) {
		// HF Trainer's decay groups: no decay on any norm weight (the q/k norms included).
		t = append(t, core.NewParam(name+".weight", []int{n}, true, core.InitOnes, 0))
	}
	for i := range cfg.NumHiddenLayers {
		p := fmt.Sprintf("model.layers.%d.", i)
		linear(p+"self_attn.q_proj", nh*hd, H, cfg.AttentionBias)
		linear(p+"self_attn.k_proj", kv*hd, H, cfg.AttentionBias)
		linear(p+"self_attn.v_proj", kv*hd, H, cfg.AttentionBias)
		linear(p+"self_attn.o_proj", H, nh*hd, cfg.AttentionBias)
		norm(p+"self_attn.q_norm", hd)
		norm(p+"self_attn.k_norm", hd)
		linear(p+"mlp.gate_proj", I, H, false)
		linear(p+"mlp.up_proj", I, H, false)
		linear(p+"mlp.down_proj", H, I, false)
		norm(p+"input_layernorm", H)
		norm(p+"post_attention_layernorm", H)
	}
	norm("model.norm", H)
	if !cfg.TieWordEmbeddings {
		t = append(t, core.NewParam("lm_head.weight", []int{V, H}, false, core.InitNormal, std))
	}
	return t
}

// invFreq matches the rotary inv_freq buffers some checkpoints saved.
var invFreq = regexp.MustCompile(`^(model\.)?(layers\.\d+\.self_attn\.)?rotary_emb\.inv_freq$`)

func mapping(cfg *Config) core.Mapping {
	headDim := fmt.Sprintf("head_dim=%d", cfg.HeadDim)
	if !cfg.hadHeadDim {
		headDim += fmt.Sprintf(" (config.json has no head_dim, so Qwen3Config's default %d applies; it is not hidden_size/num_attention_heads)", DefaultHeadDim)
	}
	m := core.Mapping{
		Arch:  Architecture,
		Table: Table(cfg),
		Map: func(name string) core.Disposition {
			if invFreq.MatchString(name) {
				return core.Disposition{Ignore: true, Quiet: true, Why: "rotary inv_freq buffer, recomputed from the config"}
			}
			if name == "lm_head.weight" || strings.HasPrefix(name, "model.") {
				return core.Disposition{Name: name}
			}
			return core.Disposition{Name: "model." + name} // bare Qwen3Model file
		},
		ShapeHint: func(name string) string {
			switch {
			case strings.HasSuffix(name, "embed_tokens.weight") || name == "lm_head.weight":
				return fmt.Sprintf("[vocab_size, hidden_size] = [%d, %d]", cfg.VocabSize, cfg.HiddenSize)
			case strings.HasSuffix(name, "q_norm.weight") || strings.HasSuffix(name, "k_norm.weight"):
				return "[head_dim], one weight shared by all heads: " + headDim
			case strings.Contains(name, "k_proj") || strings.Contains(name, "v_proj"):
				return fmt.Sprintf("num_key_value_heads=%d, %s, hidden_size=%d", cfg.NumKeyValueHeads, headDim, cfg.HiddenSize)
			case strings.Contains(name, "self_attn"):
				return fmt.Sprintf("num_attention_heads=%d, %s, hidden_size=%d", cfg.NumAttentionHeads, headDim, cfg.HiddenSize)
			case strings.Contains(name, "mlp"):
				return fmt.Sprintf("intermediate_size=%d, hidden_size=%d", cfg.IntermediateSize, cfg.HiddenSize)
			}
			return fmt.Sprintf("hidden_size=%d", cfg.HiddenSize)
		},
	}
	if cfg.TieWordEmbeddings {
		m.Tied = map[string]string{"lm_head.weight": "model.embed_tokens.weight"}
	}
	return m
}
