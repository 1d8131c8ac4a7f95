package bert

import (
	"fmt"
	"strings"

	"github.com/gotpu/gotpu/models/internal/core"
)

// Naming: BertForSequenceClassification's names ("bert.encoder.layer.0.attention.self.query.weight",
// "classifier.weight"); BertModel's are the same without "bert.". Both are read and written as HF
// does; on load, TF-era "LayerNorm.gamma/beta" are renamed to weight/bias (as transformers' _fix_key
// does), the old "embeddings.position_ids" buffer is dropped, and pretraining heads ("cls.*") are
// dropped with a log line (HF drops them with a warning too).

// prefixFor is "bert." for the classifier and "" for the bare encoder.
func prefixFor(arch string) string {
	if arch == BareModel {
		return ""
	}
	return "bert."
}

// Table lists every parameter for cfg in HF's state-dict order.
func Table(cfg *Config) []core.Param {
	pre := prefixFor(cfg.Arch)
	H, I := cfg.HiddenSize, cfg.IntermediateSize
	std := cfg.InitializerRange
	var t []core.Param
	emb := func(name string, rows int) core.Param {
		return core.NewParam(pre+"embeddings."+name+".weight", []int{rows, H}, false, core.InitNormal, std)
	}
	words := emb("word_embeddings", cfg.VocabSize)
	if cfg.PadTokenID != nil && *cfg.PadTokenID >= 0 && *cfg.PadTokenID < cfg.VocabSize {
		words.ZeroRow = *cfg.PadTokenID
	}
	ln := func(name string) {
		t = append(t, core.NewParam(name+".weight", []int{H}, true, core.InitOnes, 0),
			core.NewParam(name+".bias", []int{H}, true, core.InitZeros, 0))
	}
	linear := func(name string, out, in int) {
		t = append(t, core.NewParam(name+".weight", []int{out, in}, false, core.InitNormal, std),
			core.NewParam(name+".bias", []int{out}, true, core.InitZeros, 0))
	}
	t = append(t, words, emb("position_embeddings", cfg.MaxPositionEmbeddings), emb("token_type_embeddings", cfg.TypeVocabSize))
	ln(pre + "embeddings.LayerNorm")
	for i := range cfg.NumHiddenLayers {
		p := fmt.Sprintf("%sencoder.layer.%d.", pre, i)
		linear(p+"attention.self.query", H, H)
		linear(p+"attention.self.key", H, H)
		linear(p+"attention.self.value", H, H)
		linear(p+"attention.output.dense", H, H)
		ln(p + "attention.output.LayerNorm")
		linear(p+"intermediate.dense", I, H)
		linear(p+"output.dense", H, I)
		ln(p + "output.LayerNorm")
	}
	linear(pre+"pooler.dense", H, H)
	if cfg.Arch == ForSequenceClassification {
		linear("classifier", cfg.NumLabels(), H)
	}
	return t
}

func mapping(cfg *Config) core.Mapping {
	pre := prefixFor(cfg.Arch)
	return core.Mapping{
		Arch:  cfg.Arch,
		Table: Table(cfg),
		Map: func(name string) core.Disposition {
			n := name
			if strings.HasPrefix(n, "cls.") {
				return core.Disposition{Ignore: true, Why: "pretraining head, not part of " + cfg.Arch}
			}
			if strings.HasSuffix(n, "embeddings.position_ids") {
				return core.Disposition{Ignore: true, Quiet: true, Why: "position_ids buffer, not a parameter"}
			}
			if strings.Contains(n, "LayerNorm.") {
				n = strings.Replace(n, "LayerNorm.gamma", "LayerNorm.weight", 1)
				n = strings.Replace(n, "LayerNorm.beta", "LayerNorm.bias", 1)
			}
			if strings.HasPrefix(n, "classifier.") {
				if cfg.Arch == BareModel {
					return core.Disposition{Ignore: true, Why: "classification head, not part of BertModel"}
				}
				return core.Disposition{Name: n}
			}
			n = strings.TrimPrefix(n, "bert.")
			return core.Disposition{Name: pre + n}
		},
		ShapeHint: func(name string) string {
			switch {
			case strings.HasSuffix(name, "word_embeddings.weight"):
				return fmt.Sprintf("[vocab_size, hidden_size] = [%d, %d]", cfg.VocabSize, cfg.HiddenSize)
			case strings.HasSuffix(name, "position_embeddings.weight"):
				return fmt.Sprintf("[max_position_embeddings, hidden_size] = [%d, %d]", cfg.MaxPositionEmbeddings, cfg.HiddenSize)
			case strings.HasSuffix(name, "token_type_embeddings.weight"):
				return fmt.Sprintf("[type_vocab_size, hidden_size] = [%d, %d]", cfg.TypeVocabSize, cfg.HiddenSize)
			case strings.HasPrefix(name, "classifier."):
				return fmt.Sprintf("num_labels=%d (len(id2label)), hidden_size=%d", cfg.NumLabels(), cfg.HiddenSize)
			case strings.Contains(name, "intermediate") || (strings.Contains(name, "output.dense") && !strings.Contains(name, "attention")):
				return fmt.Sprintf("intermediate_size=%d, hidden_size=%d", cfg.IntermediateSize, cfg.HiddenSize)
			}
			return fmt.Sprintf("hidden_size=%d", cfg.HiddenSize)
		},
	}
}
