package bert

import (
	"fmt"
	"strconv"

	"github.com/gotpu/gotpu/models/internal/core"
)

// ModelType is config.json's model_type for BERT.
const ModelType = "bert"

// The architectures this package implements.
const (
	ForSequenceClassification = "BertForSequenceClassification"
	BareModel                 = "BertModel"
)

// Config is transformers' BertConfig plus the label fields of PretrainedConfig.
type Config struct {
	core.Common
	// Arch is ForSequenceClassification or BareModel.
	Arch string

	VocabSize                 int
	HiddenSize                int
	NumHiddenLayers           int
	NumAttentionHeads         int
	IntermediateSize          int
	HiddenAct                 string
	HiddenDropoutProb         float64
	AttentionProbsDropoutProb float64
	MaxPositionEmbeddings     int
	TypeVocabSize             int
	InitializerRange          float64
	LayerNormEps              float64
	PadTokenID                *int
	PositionEmbeddingType     string
	UseCache                  bool
	ClassifierDropout         *float64
	// ProblemType is "", "regression", "single_label_classification" or "multi_label_classification".
	ProblemType string
	// ID2Label holds the labels; NumLabels() is its length (HF's num_labels).
	ID2Label map[int]string
	Label2ID map[string]int

	labelsFromFile bool
}

// DefaultConfig returns BertConfig() (bert-base dimensions) with HF's default two labels.
func DefaultConfig() *Config {
	pad := 0
	c := &Config{
		Arch: ForSequenceClassification, VocabSize: 30522, HiddenSize: 768, NumHiddenLayers: 12, NumAttentionHeads: 12,
		IntermediateSize: 3072, HiddenAct: "gelu", HiddenDropoutProb: 0.1, AttentionProbsDropoutProb: 0.1,
		MaxPositionEmbeddings: 512, TypeVocabSize: 2, InitializerRange: 0.02, LayerNormEps: 1e-12,
		PadTokenID: &pad, PositionEmbeddingType: "absolute", UseCache: true,
	}
	c.SetNumLabels(2)
	return c
}

// ModelType implements core.Config.
func (c *Config) ModelType() string { return ModelType }

// Architecture implements core.Config.
func (c *Config) Architecture() string { return c.Arch }

// NumLabels is len(id2label), as HF's PretrainedConfig.num_labels.
func (c *Config) NumLabels() int { return len(c.ID2Label) }

// SetNumLabels replaces the labels with LABEL_0..LABEL_{n-1}, as setting num_labels does in HF.
func (c *Config) SetNumLabels(n int) {
	c.ID2Label, c.Label2ID = map[int]string{}, map[string]int{}
	for i := range n {
		c.ID2Label[i] = fmt.Sprintf("LABEL_%d", i)
		c.Label2ID[fmt.Sprintf("LABEL_%d", i)] = i
	}
}

// HeadDim is hidden_size / num_attention_heads.
func (c *Config) HeadDim() int { return c.HiddenSize / c.NumAttentionHeads }

// ParseConfig reads a BERT config.json. arch selects the class (ForSequenceClassification or
// BareModel).
func ParseConfig(raw *core.RawConfig, arch string) (*Config, error) {
	c := DefaultConfig()
	c.Arch = arch
	if arch != ForSequenceClassification && arch != BareModel {
		return nil, raw.FieldError("architectures", fmt.Errorf("%q is not supported for bert (%s, %s)", arch, ForSequenceClassification, BareModel))
	}
	if err := c.ReadCommon(raw); err != nil {
		return nil, err
	}
	var mt string
	if err := raw.String("model_type", &mt); err != nil {
		return nil, err
	}
	if mt != "" && mt != ModelType {
		return nil, raw.FieldError("model_type", fmt.Errorf("%q is not %q", mt, ModelType))
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"vocab_size", &c.VocabSize}, {"hidden_size", &c.HiddenSize}, {"num_hidden_layers", &c.NumHiddenLayers},
		{"num_attention_heads", &c.NumAttentionHeads}, {"intermediate_size", &c.IntermediateSize},
		{"max_position_embeddings", &c.MaxPositionEmbeddings}, {"type_vocab_size", &c.TypeVocabSize}} {
		if err := raw.Int(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		key string
		dst *float64
	}{{"hidden_dropout_prob", &c.HiddenDropoutProb}, {"attention_probs_dropout_prob", &c.AttentionProbsDropoutProb},
		{"initializer_range", &c.InitializerRange}, {"layer_norm_eps", &c.LayerNormEps}} {
		if err := raw.Float(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		key string
		dst *string
	}{{"hidden_act", &c.HiddenAct}, {"position_embedding_type", &c.PositionEmbeddingType}, {"problem_type", &c.ProblemType}} {
		if err := raw.String(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	if err := raw.Bool("use_cache", &c.UseCache); err != nil {
		return nil, err
	}
	if raw.Has("pad_token_id") {
		var err error
		if c.PadTokenID, err = raw.OptInt("pad_token_id"); err != nil {
			return nil, err
		}
	}
	if !raw.IsNull("classifier_dropout") {
		var p float64
		if err := raw.Float("classifier_dropout", &p); err != nil {
			return nil, err
		}
		c.ClassifierDropout = &p
	}
	if err := c.parseLabels(raw); err != nil {
		return nil, err
	}
	for _, key := range []string{"is_decoder", "add_cross_attention"} {
		var on bool
		if err := raw.Bool(key, &on); err != nil {
			return nil, err
		}
		if on {
			return nil, raw.FieldError(key, fmt.Errorf("decoder/cross-attention BERT is not supported"))
		}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseLabels follows PretrainedConfig: id2label when given; else num_labels (or the legacy
// _num_labels); else two labels.
func (c *Config) parseLabels(raw *core.RawConfig) error {
	if !raw.IsNull("id2label") {
		var m map[string]string
		if _, err := raw.Get("id2label", &m); err != nil {
			return err
		}
		c.ID2Label = map[int]string{}
		for k, v := range m {
			i, err := strconv.Atoi(k)
			if err != nil {
				return raw.FieldError("id2label", fmt.Errorf("key %q is not an integer", k))
			}
			c.ID2Label[i] = v
		}
		for i := range len(c.ID2Label) {
			if _, ok := c.ID2Label[i]; !ok {
				return raw.FieldError("id2label", fmt.Errorf("labels are not numbered 0..%d", len(c.ID2Label)-1))
			}
		}
		c.Label2ID = map[string]int{}
		if !raw.IsNull("label2id") {
			if _, err := raw.Get("label2id", &c.Label2ID); err != nil {
				return err
			}
		} else {
			for i, l := range c.ID2Label {
				c.Label2ID[l] = i
			}
		}
		c.labelsFromFile = true
		return nil
	}
	for _, key := range []string{"num_labels", "_num_labels"} {
		if raw.IsNull(key) {
			continue
		}
		var n int
		if err := raw.Int(key, &n); err != nil {
			return err
		}
		if n <= 0 {
			return raw.FieldError(key, fmt.Errorf("%d must be positive", n))
		}
		c.SetNumLabels(n)
		return nil
	}
	return nil
}

// Validate reports the first unusable field, naming it.
func (c *Config) Validate() error {
	raw := c.RawOrEmpty()
	for _, f := range []struct {
		key string
		v   int
	}{{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"intermediate_size", c.IntermediateSize},
		{"max_position_embeddings", c.MaxPositionEmbeddings}, {"type_vocab_size", c.TypeVocabSize}} {
		if f.v <= 0 {
			return raw.FieldError(f.key, fmt.Errorf("%d must be positive", f.v))
		}
	}
	if c.HiddenSize%c.NumAttentionHeads != 0 {
		return raw.FieldError("num_attention_heads", fmt.Errorf("hidden_size %d is not a multiple of %d", c.HiddenSize, c.NumAttentionHeads))
	}
	if c.PositionEmbeddingType != "absolute" {
		return raw.FieldError("position_embedding_type", fmt.Errorf("%q is not supported (only absolute)", c.PositionEmbeddingType))
	}
	if _, err := core.Activation(c.HiddenAct); err != nil {
		return raw.FieldError("hidden_act", err)
	}
	if c.LayerNormEps <= 0 {
		return raw.FieldError("layer_norm_eps", fmt.Errorf("%g must be positive", c.LayerNormEps))
	}
	if c.Arch == ForSequenceClassification && c.NumLabels() == 0 {
		return raw.FieldError("id2label", fmt.Errorf("a classifier needs at least one label"))
	}
	switch c.ProblemType {
	case "", core.Regression, core.SingleLabel, core.MultiLabel:
	default:
		return raw.FieldError("problem_type", fmt.Errorf("%q is not one of regression, single_label_classification, multi_label_classification", c.ProblemType))
	}
	return nil
}

// JSON implements core.Config.
func (c *Config) JSON() ([]byte, error) {
	var pad, cdrop any
	if c.PadTokenID != nil {
		pad = *c.PadTokenID
	}
	if c.ClassifierDropout != nil {
		cdrop = core.PyFloat(*c.ClassifierDropout)
	}
	fields := append(c.CommonFields(ModelType, c.Arch),
		core.Field{Key: "vocab_size", Value: c.VocabSize, Always: true},
		core.Field{Key: "hidden_size", Value: c.HiddenSize, Always: true},
		core.Field{Key: "num_hidden_layers", Value: c.NumHiddenLayers, Always: true},
		core.Field{Key: "num_attention_heads", Value: c.NumAttentionHeads, Always: true},
		core.Field{Key: "intermediate_size", Value: c.IntermediateSize, Always: true},
		core.Field{Key: "hidden_act", Value: c.HiddenAct, Always: true},
		core.Field{Key: "hidden_dropout_prob", Value: core.PyFloat(c.HiddenDropoutProb), Always: true},
		core.Field{Key: "attention_probs_dropout_prob", Value: core.PyFloat(c.AttentionProbsDropoutProb), Always: true},
		core.Field{Key: "max_position_embeddings", Value: c.MaxPositionEmbeddings, Always: true},
		core.Field{Key: "type_vocab_size", Value: c.TypeVocabSize, Always: true},
		core.Field{Key: "initializer_range", Value: core.PyFloat(c.InitializerRange), Always: true},
		core.Field{Key: "layer_norm_eps", Value: core.PyFloat(c.LayerNormEps), Always: true},
		core.Field{Key: "pad_token_id", Value: pad, Always: true},
		core.Field{Key: "position_embedding_type", Value: c.PositionEmbeddingType, Always: true},
		core.Field{Key: "use_cache", Value: c.UseCache, Always: true},
		core.Field{Key: "classifier_dropout", Value: cdrop, Always: true},
	)
	if c.ProblemType != "" {
		fields = append(fields, core.Field{Key: "problem_type", Value: c.ProblemType, Always: true})
	}
	// HF omits id2label/label2id when they are the two default labels (to_diff_dict); gotpu writes
	// them whenever the file had them or they differ from that default.
	def := DefaultConfig()
	id2 := map[string]string{}
	for i, l := range c.ID2Label {
		id2[strconv.Itoa(i)] = l
	}
	defID2 := map[string]string{}
	for i, l := range def.ID2Label {
		defID2[strconv.Itoa(i)] = l
	}
	fields = append(fields,
		core.Field{Key: "id2label", Value: id2, Always: c.labelsFromFile, Default: defID2},
		core.Field{Key: "label2id", Value: c.Label2ID, Always: c.labelsFromFile, Default: def.Label2ID},
	)
	return c.RawOrEmpty().Marshal(fields)
}
