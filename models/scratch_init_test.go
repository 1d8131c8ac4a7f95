package models

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
)

// initRule is HF's _init_weights for one tensor: constant (ones/zeros) or N(0, std).
type initRule struct {
	constant bool
	value    float64 // the constant
	std      float64 // the normal's std
}

func (r initRule) String() string {
	if r.constant {
		return fmt.Sprintf("constant %g", r.value)
	}
	return fmt.Sprintf("N(0, %g)", r.std)
}

// hfInitRule restates each architecture's _init_weights from transformers' modeling code, by tensor
// name and independently of the parameter tables New draws from:
//   - GPT2PreTrainedModel: Conv1D/Linear/Embedding weights N(0, initializer_range), biases 0,
//     LayerNorm weight 1 / bias 0, and then every "c_proj.weight" (attention and MLP output
//     projections) redrawn from N(0, initializer_range/sqrt(2*n_layer)) (the GPT-2 paper's scaled
//     residual init).
//   - Llama/Mistral/Qwen2/Qwen3PreTrainedModel: Linear and Embedding weights N(0,
//     initializer_range), biases 0, RMSNorm weight 1, the padding_idx embedding row 0.
//   - Gemma3PreTrainedModel: likewise, but Gemma3RMSNorm's weight is 0 (it scales by 1+weight).
func hfInitRule(modelType, name string, rng float64, nLayer int) initRule {
	isNorm := regexp.MustCompile(`(^|\.)(ln_\d|ln_f|norm|\w*_norm|\w*layernorm)\.weight$`).MatchString(name)
	switch {
	case strings.HasSuffix(name, ".bias"):
		return initRule{constant: true, value: 0}
	case isNorm && modelType == "gemma3_text":
		return initRule{constant: true, value: 0}
	case isNorm:
		return initRule{constant: true, value: 1}
	case modelType == "gpt2" && strings.HasSuffix(name, "c_proj.weight"):
		return initRule{std: rng / math.Sqrt(2*float64(nLayer))}
	}
	return initRule{std: rng}
}

// TestScratchInitMatchesHFRule builds each from-scratch architecture with ScratchConfig (a
// non-default initializer_range, so that the config's value is what is used) and New, saves it,
// and holds every saved tensor to hfInitRule: constants exactly; normals by sample mean within 5
// standard errors (5·std/√n) and sample std within 5·std/√(2n) relative of the rule's std. For
// GPT-2 (n_layer 3) the c_proj std is 0.05/√6 ≈ 0.0204 against 0.05 for the others: the
// tolerance (≤ 7% for the smallest tensor here) tells them apart by far.
func TestScratchInitMatchesHFRule(t *testing.T) {
	rt := openGo(t)
	cases := []struct {
		modelType, overrides string
		nLayer               int
		padRow               int // the embedding row HF zeroes (padding_idx), -1: none
	}{
		{"gpt2", "n_embd=64,n_layer=3,n_head=2,n_positions=64,vocab_size=512,initializer_range=0.05", 3, -1},
		{"llama", "hidden_size=64,intermediate_size=96,num_hidden_layers=2,num_attention_heads=4,num_key_value_heads=2,vocab_size=512,max_position_embeddings=64,initializer_range=0.05", 2, -1},
		{"qwen2", "hidden_size=64,intermediate_size=96,num_hidden_layers=2,num_attention_heads=4,num_key_value_heads=2,vocab_size=512,max_position_embeddings=64,initializer_range=0.05,tie_word_embeddings=false", 2, -1},
		{"qwen3", "hidden_size=64,intermediate_size=96,num_hidden_layers=2,num_attention_heads=4,num_key_value_heads=2,head_dim=16,vocab_size=512,max_position_embeddings=64,initializer_range=0.05", 2, -1},
		{"gemma3_text", "hidden_size=64,intermediate_size=96,num_hidden_layers=2,num_attention_heads=4,num_key_value_heads=2,head_dim=16,vocab_size=512,max_position_embeddings=64,sliding_window=8,initializer_range=0.05", 2, 0},
	}
	for _, c := range cases {
		t.Run(c.modelType, func(t *testing.T) {
			cfg, err := ScratchConfig(c.modelType, c.overrides)
			if err != nil {
				t.Fatal(err)
			}
			m, err := New(context.Background(), rt, cfg, NewOptions{Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := m.Save(dir, SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			values, shapes, err := safetensors.ReadFloat32File(filepath.Join(dir, "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			if len(values) != len(m.Params()) {
				t.Fatalf("saved %d tensors, the model has %d parameters", len(values), len(m.Params()))
			}
			names := make([]string, 0, len(values))
			for n := range values {
				names = append(names, n)
			}
			slices.Sort(names)
			for _, name := range names {
				v := values[name]
				rule := hfInitRule(c.modelType, name, 0.05, c.nLayer)
				if c.padRow >= 0 && strings.HasSuffix(name, "embed_tokens.weight") {
					width := shapes[name][1]
					for _, x := range v[c.padRow*width : (c.padRow+1)*width] {
						if x != 0 {
							t.Fatalf("%s: padding row %d not zero (%g)", name, c.padRow, x)
						}
					}
					v = slices.Concat(v[:c.padRow*width], v[(c.padRow+1)*width:])
				}
				checkInitStats(t, name, v, rule)
			}
		})
	}
}

// checkInitStats holds v to rule (see TestScratchInitMatchesHFRule for the tolerances).
func checkInitStats(t *testing.T, name string, v []float32, rule initRule) {
	t.Helper()
	if rule.constant {
		for i, x := range v {
			if float64(x) != rule.value {
				t.Errorf("%s[%d] = %g, HF's rule is %s", name, i, x, rule)
				return
			}
		}
		return
	}
	n := float64(len(v))
	var sum, sq float64
	for _, x := range v {
		sum += float64(x)
	}
	mean := sum / n
	for _, x := range v {
		sq += (float64(x) - mean) * (float64(x) - mean)
	}
	std := math.Sqrt(sq / (n - 1))
	meanTol, stdTol := 5*rule.std/math.Sqrt(n), 5/math.Sqrt(2*n)
	if math.Abs(mean) > meanTol || math.Abs(std/rule.std-1) > stdTol {
		t.Errorf("%s (%d values): mean %.5f std %.5f, HF's rule %s (tolerances: mean ±%.5f, std ±%.1f%%)",
			name, len(v), mean, std, rule, meanTol, 100*stdTol)
		return
	}
	t.Logf("%-45s n=%-6d mean %+.5f std %.5f  rule %s", name, len(v), mean, std, rule)
}
