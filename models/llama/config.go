package llama

import (
	"encoding/json"
	"fmt"

	"github.com/gotpu/gotpu/models/internal/core"
)

// The model types this package runs. Mistral and Qwen2 are Llama's architecture with other
// defaults: Mistral adds a sliding window, Qwen2 biases on the q/k/v projections.
const (
	TypeLlama   = "llama"
	TypeMistral = "mistral"
	TypeQwen2   = "qwen2"
)

// Architectures maps each model type to its HF causal-LM class.
var architectures = map[string]string{
	TypeLlama:   "LlamaForCausalLM",
	TypeMistral: "MistralForCausalLM",
	TypeQwen2:   "Qwen2ForCausalLM",
}

// ArchitectureOf returns the HF class for a model type ("" when unsupported).
func ArchitectureOf(modelType string) string { return architectures[modelType] }

// Rope is the rotary-embedding setup: rope_theta plus rope_scaling (transformers 4) or
// rope_parameters (transformers 5).
type Rope struct {
	Theta float64
	// Type is "default", "linear" or "llama3".
	Type                          string
	Factor                        float64
	LowFreqFactor, HighFreqFactor float64
	OriginalMaxPositions          int
}

// Config is transformers' LlamaConfig (and MistralConfig / Qwen2Config, which differ only in
// defaults and in the few fields noted).
type Config struct {
	core.Common
	Type string // model_type

	VocabSize             int
	HiddenSize            int
	IntermediateSize      int
	NumHiddenLayers       int
	NumAttentionHeads     int
	NumKeyValueHeads      int // resolved: num_attention_heads when absent
	HeadDim               int // resolved: hidden_size / num_attention_heads when absent
	HiddenAct             string
	MaxPositionEmbeddings int
	InitializerRange      float64
	RMSNormEps            float64
	UseCache              bool
	TieWordEmbeddings     bool
	AttentionBias         bool // llama: q/k/v/o biases; qwen2: always q/k/v biases (field absent)
	AttentionDropout      float64
	MLPBias               bool
	Rope                  Rope
	// SlidingWindow per layer (0: full attention), resolved from sliding_window / use_sliding_window
	// / max_window_layers / layer_types.
	LayerWindows []int
	PadTokenID   *int
	BOSTokenID   []int
	EOSTokenID   []int

	// keys present with explicit values, to write them back in the same form
	hadHeadDim, hadKVHeads bool
}

// DefaultConfig returns the class defaults of LlamaConfig, MistralConfig or Qwen2Config.
func DefaultConfig(modelType string) *Config {
	c := &Config{
		Type: modelType, VocabSize: 32000, HiddenSize: 4096, IntermediateSize: 11008, NumHiddenLayers: 32,
		NumAttentionHeads: 32, HiddenAct: "silu", MaxPositionEmbeddings: 2048, InitializerRange: 0.02,
		RMSNormEps: 1e-6, UseCache: true, Rope: Rope{Theta: 10000, Type: "default"},
		BOSTokenID: []int{1}, EOSTokenID: []int{2},
	}
	switch modelType {
	case TypeMistral:
		c.IntermediateSize, c.MaxPositionEmbeddings, c.NumKeyValueHeads = 14336, 4096*32, 8
	case TypeQwen2:
		c.VocabSize, c.IntermediateSize, c.MaxPositionEmbeddings = 151936, 22016, 32768
		c.BOSTokenID, c.EOSTokenID = nil, nil
	}
	return c
}

// ModelType implements core.Config.
func (c *Config) ModelType() string { return c.Type }

// Architecture implements core.Config.
func (c *Config) Architecture() string { return architectures[c.Type] }

// QKVBias tells whether q/k/v projections have biases; OBias whether o_proj has one.
func (c *Config) QKVBias() bool { return c.Type == TypeQwen2 || c.AttentionBias }

// OBias tells whether o_proj has a bias (Llama's attention_bias; never in Qwen2).
func (c *Config) OBias() bool { return c.Type != TypeQwen2 && c.AttentionBias }

// ParseConfig reads a Llama, Mistral or Qwen2 config.json.
func ParseConfig(raw *core.RawConfig) (*Config, error) {
	var mt string
	if err := raw.String("model_type", &mt); err != nil {
		return nil, err
	}
	if mt == "" {
		mt = TypeLlama
	}
	if _, ok := architectures[mt]; !ok {
		return nil, raw.FieldError("model_type", fmt.Errorf("%q is not one of llama, mistral, qwen2", mt))
	}
	c := DefaultConfig(mt)
	if err := c.ReadCommon(raw); err != nil {
		return nil, err
	}
	ints := []struct {
		key string
		dst *int
	}{{"vocab_size", &c.VocabSize}, {"hidden_size", &c.HiddenSize}, {"intermediate_size", &c.IntermediateSize},
		{"num_hidden_layers", &c.NumHiddenLayers}, {"num_attention_heads", &c.NumAttentionHeads},
		{"max_position_embeddings", &c.MaxPositionEmbeddings}}
	for _, f := range ints {
		if err := raw.Int(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	kv, err := raw.OptInt("num_key_value_heads")
	if err != nil {
		return nil, err
	}
	c.hadKVHeads = kv != nil
	switch {
	case kv != nil:
		c.NumKeyValueHeads = *kv
	case c.NumKeyValueHeads == 0: // Mistral's class default is 8; Llama/Qwen2 default to the heads.
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	hd, err := raw.OptInt("head_dim")
	if err != nil {
		return nil, err
	}
	c.hadHeadDim = hd != nil
	if hd != nil {
		c.HeadDim = *hd
	} else if c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	for _, f := range []struct {
		key string
		dst *float64
	}{{"initializer_range", &c.InitializerRange}, {"rms_norm_eps", &c.RMSNormEps}, {"attention_dropout", &c.AttentionDropout}} {
		if err := raw.Float(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{{"use_cache", &c.UseCache}, {"tie_word_embeddings", &c.TieWordEmbeddings}, {"attention_bias", &c.AttentionBias}, {"mlp_bias", &c.MLPBias}} {
		if err := raw.Bool(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	if err := raw.String("hidden_act", &c.HiddenAct); err != nil {
		return nil, err
	}
	if c.PadTokenID, err = raw.OptInt("pad_token_id"); err != nil {
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
	if err := c.parseRope(raw); err != nil {
		return nil, err
	}
	if err := c.parseWindows(raw); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseRope reads rope_theta / rope_scaling (transformers 4) or rope_parameters (transformers 5).
func (c *Config) parseRope(raw *core.RawConfig) error {
	if err := raw.Float("rope_theta", &c.Rope.Theta); err != nil {
		return err
	}
	key := "rope_scaling"
	if raw.IsNull(key) && !raw.IsNull("rope_parameters") {
		key = "rope_parameters"
	}
	if raw.IsNull(key) {
		return nil
	}
	var rs map[string]json.RawMessage
	if _, err := raw.Get(key, &rs); err != nil {
		return err
	}
	num := func(name string, dst *float64) error {
		v, ok := rs[name]
		if !ok || string(v) == "null" {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return raw.FieldError(key, fmt.Errorf("%s: %w", name, err))
		}
		return nil
	}
	if err := num("rope_theta", &c.Rope.Theta); err != nil {
		return err
	}
	typ := "default"
	for _, name := range []string{"rope_type", "type"} {
		if v, ok := rs[name]; ok {
			if err := json.Unmarshal(v, &typ); err != nil {
				return raw.FieldError(key, fmt.Errorf("%s: %w", name, err))
			}
			break
		}
	}
	c.Rope.Type = typ
	var partial = 1.0
	if err := num("partial_rotary_factor", &partial); err != nil {
		return err
	}
	if partial != 1 {
		return raw.FieldError(key, fmt.Errorf("partial_rotary_factor %g is not supported (only 1.0)", partial))
	}
	switch typ {
	case "default":
	case "linear":
		if err := num("factor", &c.Rope.Factor); err != nil {
			return err
		}
		if c.Rope.Factor <= 0 {
			return raw.FieldError(key, fmt.Errorf("linear rope scaling needs a positive factor"))
		}
	case "llama3":
		var orig float64
		for _, f := range []struct {
			name string
			dst  *float64
		}{{"factor", &c.Rope.Factor}, {"low_freq_factor", &c.Rope.LowFreqFactor}, {"high_freq_factor", &c.Rope.HighFreqFactor}, {"original_max_position_embeddings", &orig}} {
			if _, ok := rs[f.name]; !ok {
				return raw.FieldError(key, fmt.Errorf("llama3 rope scaling needs %q", f.name))
			}
			if err := num(f.name, f.dst); err != nil {
				return err
			}
		}
		c.Rope.OriginalMaxPositions = int(orig)
		if c.Rope.Factor <= 0 || c.Rope.HighFreqFactor <= c.Rope.LowFreqFactor || orig <= 0 {
			return raw.FieldError(key, fmt.Errorf("llama3 rope scaling parameters are inconsistent"))
		}
	default:
		return raw.FieldError(key, fmt.Errorf("rope_type %q is not supported (default, linear, llama3)", typ))
	}
	return nil
}

// parseWindows resolves which layers use sliding-window attention.
func (c *Config) parseWindows(raw *core.RawConfig) error {
	c.LayerWindows = make([]int, c.NumHiddenLayers)
	window, err := raw.OptInt("sliding_window")
	if err != nil {
		return err
	}
	var layerTypes []string
	if _, err := raw.Get("layer_types", &layerTypes); err != nil {
		return err
	}
	if layerTypes != nil {
		if len(layerTypes) != c.NumHiddenLayers {
			return raw.FieldError("layer_types", fmt.Errorf("%d entries for %d layers", len(layerTypes), c.NumHiddenLayers))
		}
		for i, t := range layerTypes {
			switch t {
			case "full_attention":
			case "sliding_attention":
				if window == nil {
					return raw.FieldError("layer_types", fmt.Errorf("layer %d is sliding_attention but sliding_window is null", i))
				}
				c.LayerWindows[i] = *window
			default:
				return raw.FieldError("layer_types", fmt.Errorf("layer %d: %q is not supported (full_attention, sliding_attention)", i, t))
			}
		}
		return nil
	}
	switch c.Type {
	case TypeMistral:
		if window != nil {
			for i := range c.LayerWindows {
				c.LayerWindows[i] = *window
			}
		}
	case TypeQwen2:
		var use bool
		maxWindowLayers := 28
		if err := raw.Bool("use_sliding_window", &use); err != nil {
			return err
		}
		if err := raw.Int("max_window_layers", &maxWindowLayers); err != nil {
			return err
		}
		if use && window != nil {
			for i := max(maxWindowLayers, 0); i < c.NumHiddenLayers; i++ { // a negative value: every layer
				c.LayerWindows[i] = *window
			}
		}
	case TypeLlama:
		if window != nil {
			return raw.FieldError("sliding_window", fmt.Errorf("LlamaForCausalLM has no sliding-window attention"))
		}
	}
	return nil
}

// Validate reports the first unusable field, naming it.
func (c *Config) Validate() error {
	raw := c.RawOrEmpty()
	for _, f := range []struct {
		key string
		v   int
	}{{"vocab_size", c.VocabSize}, {"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers}, {"num_attention_heads", c.NumAttentionHeads},
		{"num_key_value_heads", c.NumKeyValueHeads}, {"head_dim", c.HeadDim}, {"max_position_embeddings", c.MaxPositionEmbeddings}} {
		if f.v <= 0 {
			return raw.FieldError(f.key, fmt.Errorf("%d must be positive", f.v))
		}
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return raw.FieldError("num_key_value_heads", fmt.Errorf("num_attention_heads %d is not a multiple of %d", c.NumAttentionHeads, c.NumKeyValueHeads))
	}
	if c.HeadDim%2 != 0 {
		return raw.FieldError("head_dim", fmt.Errorf("%d must be even for rotary embeddings", c.HeadDim))
	}
	if _, err := core.Activation(c.HiddenAct); err != nil {
		return raw.FieldError("hidden_act", err)
	}
	if c.RMSNormEps <= 0 {
		return raw.FieldError("rms_norm_eps", fmt.Errorf("%g must be positive", c.RMSNormEps))
	}
	if c.Rope.Theta <= 0 {
		return raw.FieldError("rope_theta", fmt.Errorf("%g must be positive", c.Rope.Theta))
	}
	if len(c.LayerWindows) != c.NumHiddenLayers {
		c.LayerWindows = make([]int, c.NumHiddenLayers)
	}
	return nil
}

// JSON implements core.Config.
func (c *Config) JSON() ([]byte, error) {
	raw := c.RawOrEmpty()
	fields := append(c.CommonFields(c.Type, c.Architecture()),
		core.Field{Key: "vocab_size", Value: c.VocabSize, Always: true},
		core.Field{Key: "hidden_size", Value: c.HiddenSize, Always: true},
		core.Field{Key: "intermediate_size", Value: c.IntermediateSize, Always: true},
		core.Field{Key: "num_hidden_layers", Value: c.NumHiddenLayers, Always: true},
		core.Field{Key: "num_attention_heads", Value: c.NumAttentionHeads, Always: true},
		core.Field{Key: "num_key_value_heads", Value: c.NumKeyValueHeads, Always: true},
		core.Field{Key: "hidden_act", Value: c.HiddenAct, Always: true},
		core.Field{Key: "max_position_embeddings", Value: c.MaxPositionEmbeddings, Always: true},
		core.Field{Key: "initializer_range", Value: core.PyFloat(c.InitializerRange), Always: true},
		core.Field{Key: "rms_norm_eps", Value: core.PyFloat(c.RMSNormEps), Always: true},
		core.Field{Key: "use_cache", Value: c.UseCache, Always: true},
		core.Field{Key: "tie_word_embeddings", Value: c.TieWordEmbeddings, Always: true},
		core.Field{Key: "attention_dropout", Value: core.PyFloat(c.AttentionDropout), Always: true},
		core.Field{Key: "bos_token_id", Value: core.TokenIDsValue(c.BOSTokenID), Default: core.TokenIDsValue(DefaultConfig(c.Type).BOSTokenID)},
		core.Field{Key: "eos_token_id", Value: core.TokenIDsValue(c.EOSTokenID), Default: core.TokenIDsValue(DefaultConfig(c.Type).EOSTokenID)},
	)
	if c.hadHeadDim || c.HeadDim != c.HiddenSize/c.NumAttentionHeads {
		fields = append(fields, core.Field{Key: "head_dim", Value: c.HeadDim, Always: true})
	}
	if c.PadTokenID != nil {
		fields = append(fields, core.Field{Key: "pad_token_id", Value: *c.PadTokenID, Always: true})
	}
	if c.Type == TypeLlama {
		fields = append(fields,
			core.Field{Key: "attention_bias", Value: c.AttentionBias, Always: true},
			core.Field{Key: "mlp_bias", Value: c.MLPBias, Always: true})
	}
	// Rope: written in the file's own spelling. transformers 5 files carry rope_parameters; 4.x files
	// rope_theta plus rope_scaling (null for default).
	if raw.Has("rope_parameters") && !raw.Has("rope_theta") {
		rp := map[string]any{}
		if _, err := raw.Get("rope_parameters", &rp); err != nil {
			return nil, err
		}
		rp["rope_theta"] = core.PyFloat(c.Rope.Theta)
		rp["rope_type"] = c.Rope.Type
		fields = append(fields, core.Field{Key: "rope_parameters", Value: core.PyMap(rp), Always: true})
	} else {
		fields = append(fields, core.Field{Key: "rope_theta", Value: core.PyFloat(c.Rope.Theta), Always: true})
		if c.Rope.Type == "default" && raw.IsNull("rope_scaling") && (c.Type == TypeLlama || raw.Has("rope_scaling")) {
			fields = append(fields, core.Field{Key: "rope_scaling", Value: nil, Always: true})
		}
	}
	return raw.Marshal(fields)
}
