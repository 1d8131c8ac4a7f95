package trainer

import (
	"regexp"
	"strings"
)

// noDecayPatterns are the parameter-name patterns HF's Trainer.get_decay_parameter_names
// excludes from weight decay (searched in the lowercased dotted name), plus one for GPT-2-style
// LayerNorm modules named ln_1, ln_2, ln_f, ln_attn…: HF excludes those by module type
// (nn.LayerNorm), which a name-only rule must express by name.
var noDecayPatterns = []*regexp.Regexp{
	regexp.MustCompile(`bias`),
	regexp.MustCompile(`layernorm`),
	regexp.MustCompile(`rmsnorm`),
	regexp.MustCompile(`(?:^|\.)norm(?:$|\.)`),
	regexp.MustCompile(`_norm(?:$|\.)`),
	regexp.MustCompile(`(?:^|\.)ln_[^.]*\.`),
}

// IsDecayParameter reports whether HF's Trainer applies weight decay to the parameter with this
// Hugging Face name. Biases and normalization weights (LayerNorm, RMSNorm) get none:
// "h.0.attn.c_attn.weight" decays; "h.0.ln_1.weight", "h.0.attn.c_attn.bias",
// "model.layers.0.input_layernorm.weight", "model.norm.weight" and
// "bert.embeddings.LayerNorm.weight" do not. Embeddings and the LM head decay.
func IsDecayParameter(hfName string) bool {
	name := strings.ToLower(hfName)
	for _, p := range noDecayPatterns {
		if p.MatchString(name) {
			return false
		}
	}
	return true
}
