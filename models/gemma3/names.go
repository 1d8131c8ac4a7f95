package gemma3

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/gotpu/gotpu/models/internal/core"
)

// Naming: gotpu reads and writes Gemma3ForCausalLM's state-dict names
// ("model.layers.0.self_attn.q_norm.weight"); a tied lm_head is not written, as save_pretrained
// does. It also reads a bare Gemma3TextModel file (no "model." prefix) and, for a
// Gemma3ForConditionalGeneration directory, the language model's tensors under either prefix
// transformers has used ("language_model.model." before 4.52, "model.language_model." since), its
// vision tower and projector being dropped.

// NormNames are the four RMSNorms of a decoder layer, in HF's registration order.
var NormNames = []string{"input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm", "post_feedforward_layernorm"}

// Table lists every parameter for cfg in HF's state-dict order (named_parameters), with HF's
// Trainer decay groups (no decay on biases and on every norm weight, q_norm/k_norm included) and
// HF's _init_weights distributions (Gemma RMSNorm weights are stored 0-centred: zeros).
func Table(cfg *Config) []core.Param {
	H, I, V, hd := cfg.HiddenSize, cfg.IntermediateSize, cfg.VocabSize, cfg.HeadDim
	nh, kv := cfg.NumAttentionHeads, cfg.NumKeyValueHeads
	std := cfg.InitializerRange
	emb := core.NewParam("model.embed_tokens.weight", []int{V, H}, false, core.InitNormal, std)
	if p := cfg.PaddingIdx(); p >= 0 && p < V {
		emb.ZeroRow = p
	}
	t := []core.Param{emb}
	linear := func(name string, out, in int, bias bool) {
		t = append(t, core.NewParam(name+".weight", []int{out, in}, false, core.InitNormal, std))
		if bias {
			t = append(t, core.NewParam(name+".bias", []int{out}, true, core.InitZeros, 0))
		}
	}
	norm := func(name string, n int) {
		t = append(t, core.NewParam(name+".weight", []int{n}, true, core.InitZeros, 0))
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
		for _, n := range NormNames {
			norm(p+n, H)
		}
	}
	norm("model.norm", H)
	if !cfg.TieWordEmbeddings {
		t = append(t, core.NewParam("lm_head.weight", []int{V, H}, false, core.InitNormal, std))
	}
	return t
}

// buffers matches non-persistent buffers older files may carry.
var buffers = regexp.MustCompile(`(^|\.)(rotary_emb|rotary_emb_local)\.inv_freq$|(^|\.)embed_tokens\.embed_scale$`)

// multimodalPrefixes rename the language model of a Gemma3ForConditionalGeneration file.
var multimodalPrefixes = []struct{ old, new string }{
	{"language_model.model.", "model."}, {"language_model.lm_head.", "lm_head."}, {"model.language_model.", "model."},
}

// visionParts are the non-text modules of a Gemma3ForConditionalGeneration file.
var visionParts = regexp.MustCompile(`^(model\.)?(vision_tower|multi_modal_projector)\.`)

func mapping(cfg *Config, arch string) core.Mapping {
	multimodal := arch == ArchitectureMultimodal
	m := core.Mapping{
		Arch:  arch,
		Table: Table(cfg),
		Map: func(name string) core.Disposition {
			if buffers.MatchString(name) {
				return core.Disposition{Ignore: true, Quiet: true, Why: "non-persistent buffer, recomputed from the config"}
			}
			if multimodal {
				if visionParts.MatchString(name) {
					return core.Disposition{Ignore: true, Why: "vision part of " + ArchitectureMultimodal + ", not part of the text model gotpu loads"}
				}
				for _, p := range multimodalPrefixes {
					if strings.HasPrefix(name, p.old) {
						return core.Disposition{Name: p.new + strings.TrimPrefix(name, p.old)}
					}
				}
			}
			if name == "lm_head.weight" || strings.HasPrefix(name, "model.") {
				return core.Disposition{Name: name}
			}
			return core.Disposition{Name: "model." + name} // bare Gemma3TextModel file
		},
		ShapeHint: func(name string) string {
			switch {
			case strings.HasSuffix(name, "embed_tokens.weight") || name == "lm_head.weight":
				return fmt.Sprintf("[vocab_size, hidden_size] = [%d, %d]", cfg.VocabSize, cfg.HiddenSize)
			case strings.Contains(name, "q_norm") || strings.Contains(name, "k_norm"):
				return fmt.Sprintf("head_dim=%d", cfg.HeadDim)
			case strings.Contains(name, "k_proj") || strings.Contains(name, "v_proj"):
				return fmt.Sprintf("num_key_value_heads=%d, head_dim=%d, hidden_size=%d", cfg.NumKeyValueHeads, cfg.HeadDim, cfg.HiddenSize)
			case strings.Contains(name, "self_attn"):
				return fmt.Sprintf("num_attention_heads=%d, head_dim=%d, hidden_size=%d", cfg.NumAttentionHeads, cfg.HeadDim, cfg.HiddenSize)
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
