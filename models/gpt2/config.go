package gpt2

import (
	"fmt"

	"github.com/gotpu/gotpu/models/internal/core"
)

// Architecture is the HF class gotpu's GPT-2 implements.
const Architecture = "GPT2LMHeadModel"

// ModelType is config.json's model_type for GPT-2.
const ModelType = "gpt2"

// Config is transformers' GPT2Config: field names as in config.json, defaults as the class has them.
type Config struct {
	core.Common

	VocabSize                  int
	NPositions                 int
	NEmbd                      int
	NLayer                     int
	NHead                      int
	NInner                     *int // nil: 4 * NEmbd
	ActivationFunction         string
	ResidPdrop                 float64
	EmbdPdrop                  float64
	AttnPdrop                  float64
	LayerNormEpsilon           float64
	InitializerRange           float64
	ScaleAttnWeights           bool
	ScaleAttnByInverseLayerIdx bool
	ReorderAndUpcastAttn       bool
	UseCache                   bool
	TieWordEmbeddings          bool
	BOSTokenID                 []int
	EOSTokenID                 []int
}

// DefaultConfig returns GPT2Config() (the 124M "gpt2" dimensions).
func DefaultConfig() *Config {
	return &Config{
		VocabSize: 50257, NPositions: 1024, NEmbd: 768, NLayer: 12, NHead: 12,
		ActivationFunction: "gelu_new", ResidPdrop: 0.1, EmbdPdrop: 0.1, AttnPdrop: 0.1,
		LayerNormEpsilon: 1e-5, InitializerRange: 0.02, ScaleAttnWeights: true, UseCache: true,
		TieWordEmbeddings: true, BOSTokenID: []int{50256}, EOSTokenID: []int{50256},
	}
}

// ModelType implements core.Config.
func (c *Config) ModelType() string { return ModelType }

// Architecture implements core.Config.
func (c *Config) Architecture() string { return Architecture }

// Inner is the MLP width.
func (c *Config) Inner() int {
	if c.NInner != nil {
		return *c.NInner
	}
	return 4 * c.NEmbd
}

// HeadDim is n_embd / n_head.
func (c *Config) HeadDim() int { return c.NEmbd / c.NHead }

// ParseConfig reads a GPT-2 config.json already parsed as raw fields.
func ParseConfig(raw *core.RawConfig) (*Config, error) {
	c := DefaultConfig()
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
	}{{"vocab_size", &c.VocabSize}, {"n_positions", &c.NPositions}, {"n_embd", &c.NEmbd}, {"n_layer", &c.NLayer}, {"n_head", &c.NHead}} {
		if err := raw.Int(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	var err error
	if c.NInner, err = raw.OptInt("n_inner"); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		key string
		dst *float64
	}{{"resid_pdrop", &c.ResidPdrop}, {"embd_pdrop", &c.EmbdPdrop}, {"attn_pdrop", &c.AttnPdrop},
		{"layer_norm_epsilon", &c.LayerNormEpsilon}, {"initializer_range", &c.InitializerRange}} {
		if err := raw.Float(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{{"scale_attn_weights", &c.ScaleAttnWeights}, {"scale_attn_by_inverse_layer_idx", &c.ScaleAttnByInverseLayerIdx},
		{"reorder_and_upcast_attn", &c.ReorderAndUpcastAttn}, {"use_cache", &c.UseCache}, {"tie_word_embeddings", &c.TieWordEmbeddings}} {
		if err := raw.Bool(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	if err := raw.String("activation_function", &c.ActivationFunction); err != nil {
		return nil, err
	}
	if raw.Has("bos_token_id") {
		if c.BOSTokenID, err = raw.TokenIDs("bos_token_id"); err != nil {
			return nil, err
		}
	}
	if raw.Has("eos_token_id") {
		if c.EOSTokenID, err = raw.TokenIDs("eos_token_id"); err != nil {
			return nil, err
		}
	}
	var cross bool
	if err := raw.Bool("add_cross_attention", &cross); err != nil {
		return nil, err
	}
	if cross {
		return nil, raw.FieldError("add_cross_attention", fmt.Errorf("cross-attention is not supported"))
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// Validate reports the first unusable field, naming it.
func (c *Config) Validate() error {
	raw := c.RawOrEmpty()
	for _, f := range []struct {
		key string
		v   int
	}{{"vocab_size", c.VocabSize}, {"n_positions", c.NPositions}, {"n_embd", c.NEmbd}, {"n_layer", c.NLayer}, {"n_head", c.NHead}} {
		if f.v <= 0 {
			return raw.FieldError(f.key, fmt.Errorf("%d must be positive", f.v))
		}
	}
	if c.NEmbd%c.NHead != 0 {
		return raw.FieldError("n_head", fmt.Errorf("n_embd %d is not a multiple of n_head %d", c.NEmbd, c.NHead))
	}
	if c.Inner() <= 0 {
		return raw.FieldError("n_inner", fmt.Errorf("%d must be positive", c.Inner()))
	}
	if _, err := core.Activation(c.ActivationFunction); err != nil {
		return raw.FieldError("activation_function", err)
	}
	if c.LayerNormEpsilon <= 0 {
		return raw.FieldError("layer_norm_epsilon", fmt.Errorf("%g must be positive", c.LayerNormEpsilon))
	}
	return nil
}

// JSON implements core.Config.
func (c *Config) JSON() ([]byte, error) {
	var nInner any
	if c.NInner != nil {
		nInner = *c.NInner
	}
	fields := append(c.CommonFields(ModelType, Architecture),
		core.Field{Key: "vocab_size", Value: c.VocabSize, Always: true},
		core.Field{Key: "n_positions", Value: c.NPositions, Always: true},
		core.Field{Key: "n_ctx", Value: c.NPositions, Always: true}, // legacy alias HF still writes
		core.Field{Key: "n_embd", Value: c.NEmbd, Always: true},
		core.Field{Key: "n_layer", Value: c.NLayer, Always: true},
		core.Field{Key: "n_head", Value: c.NHead, Always: true},
		core.Field{Key: "n_inner", Value: nInner, Always: true},
		core.Field{Key: "activation_function", Value: c.ActivationFunction, Always: true},
		core.Field{Key: "resid_pdrop", Value: core.PyFloat(c.ResidPdrop), Always: true},
		core.Field{Key: "embd_pdrop", Value: core.PyFloat(c.EmbdPdrop), Always: true},
		core.Field{Key: "attn_pdrop", Value: core.PyFloat(c.AttnPdrop), Always: true},
		core.Field{Key: "layer_norm_epsilon", Value: core.PyFloat(c.LayerNormEpsilon), Always: true},
		core.Field{Key: "initializer_range", Value: core.PyFloat(c.InitializerRange), Always: true},
		core.Field{Key: "scale_attn_weights", Value: c.ScaleAttnWeights, Always: true},
		core.Field{Key: "scale_attn_by_inverse_layer_idx", Value: c.ScaleAttnByInverseLayerIdx, Always: true},
		core.Field{Key: "reorder_and_upcast_attn", Value: c.ReorderAndUpcastAttn, Always: true},
		core.Field{Key: "use_cache", Value: c.UseCache, Default: true},
		core.Field{Key: "tie_word_embeddings", Value: c.TieWordEmbeddings, Default: true},
		core.Field{Key: "bos_token_id", Value: core.TokenIDsValue(c.BOSTokenID), Always: true},
		core.Field{Key: "eos_token_id", Value: core.TokenIDsValue(c.EOSTokenID), Always: true},
	)
	return c.RawOrEmpty().Marshal(fields)
}
