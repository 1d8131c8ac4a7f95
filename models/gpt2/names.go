package gpt2

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/gotpu/gotpu/models/internal/core"
)

// Naming: gotpu writes GPT-2 weights with the "transformer." prefix, as GPT2LMHeadModel's
// save_pretrained does, and never writes lm_head.weight when it is tied (safetensors cannot alias,
// and transformers re-ties it on load). It reads that naming and the unprefixed hub naming of the
// original "gpt2" checkpoint (wte.weight, h.0.attn.c_attn.weight, ...).

const prefix = "transformer."

// Table lists every GPT2LMHeadModel parameter for cfg in HF's state-dict order, with shapes from
// the config, HF's weight-decay grouping and HF's initialisation.
func Table(cfg *Config) []core.Param {
	E, I, V, P := cfg.NEmbd, cfg.Inner(), cfg.VocabSize, cfg.NPositions
	std := cfg.InitializerRange
	projStd := core.StdInit(std, cfg.NLayer)
	w := func(name string, shape []int, s float64) core.Param {
		return core.NewParam(prefix+name, shape, false, core.InitNormal, s)
	}
	bias := func(name string, n int) core.Param {
		return core.NewParam(prefix+name, []int{n}, true, core.InitZeros, 0)
	}
	lnW := func(name string) core.Param { return core.NewParam(prefix+name, []int{E}, true, core.InitOnes, 0) }
	t := []core.Param{w("wte.weight", []int{V, E}, std), w("wpe.weight", []int{P, E}, std)}
	for i := range cfg.NLayer {
		h := fmt.Sprintf("h.%d.", i)
		t = append(t,
			lnW(h+"ln_1.weight"), bias(h+"ln_1.bias", E),
			w(h+"attn.c_attn.weight", []int{E, 3 * E}, std), bias(h+"attn.c_attn.bias", 3*E),
			w(h+"attn.c_proj.weight", []int{E, E}, projStd), bias(h+"attn.c_proj.bias", E),
			lnW(h+"ln_2.weight"), bias(h+"ln_2.bias", E),
			w(h+"mlp.c_fc.weight", []int{E, I}, std), bias(h+"mlp.c_fc.bias", I),
			w(h+"mlp.c_proj.weight", []int{I, E}, projStd), bias(h+"mlp.c_proj.bias", E),
		)
	}
	t = append(t, lnW("ln_f.weight"), bias("ln_f.bias", E))
	if !cfg.TieWordEmbeddings {
		t = append(t, core.NewParam("lm_head.weight", []int{V, E}, false, core.InitNormal, std))
	}
	return t
}

// maskBuffer matches the causal-mask buffers old checkpoints saved (h.N.attn.bias/masked_bias).
var maskBuffer = regexp.MustCompile(`^h\.\d+\.attn\.(bias|masked_bias)$`)

// mapping is the explicit correspondence between file names and Table.
func mapping(cfg *Config) core.Mapping {
	m := core.Mapping{
		Arch:  Architecture,
		Table: Table(cfg),
		Map: func(name string) core.Disposition {
			if name == "lm_head.weight" {
				return core.Disposition{Name: name}
			}
			n := strings.TrimPrefix(name, prefix)
			if maskBuffer.MatchString(n) {
				return core.Disposition{Ignore: true, Quiet: true, Why: "causal-mask buffer, not a parameter"}
			}
			return core.Disposition{Name: prefix + n}
		},
		ShapeHint: func(name string) string {
			n := strings.TrimPrefix(name, prefix)
			switch {
			case n == "wte.weight" || n == "lm_head.weight":
				return fmt.Sprintf("[vocab_size, n_embd] = [%d, %d]", cfg.VocabSize, cfg.NEmbd)
			case n == "wpe.weight":
				return fmt.Sprintf("[n_positions, n_embd] = [%d, %d]", cfg.NPositions, cfg.NEmbd)
			case strings.HasSuffix(n, "c_attn.weight"):
				return fmt.Sprintf("Conv1D [n_embd, 3*n_embd] with n_embd=%d", cfg.NEmbd)
			case strings.Contains(n, "mlp."):
				return fmt.Sprintf("n_embd=%d, n_inner=%d", cfg.NEmbd, cfg.Inner())
			}
			return fmt.Sprintf("n_embd=%d", cfg.NEmbd)
		},
	}
	if cfg.TieWordEmbeddings {
		m.Tied = map[string]string{"lm_head.weight": prefix + "wte.weight"}
	}
	return m
}
