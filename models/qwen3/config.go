package qwen3

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"

	"github.com/gotpu/gotpu/models/internal/core"
)

// ModelType is config.json's model_type; Architecture the HF class this package builds.
const (
	ModelType    = "qwen3"
	Architecture = "Qwen3ForCausalLM"
)

// Qwen3Config's class defaults that differ from what a reader might guess: head_dim is its own
// field (128), not hidden_size / num_attention_heads, and num_key_value_heads defaults to 32, not
// to the head count (an explicit null means the head count).
const (
	DefaultHeadDim         = 128
	DefaultKVHeads         = 32
	DefaultSlidingWindow   = 4096
	DefaultMaxWindowLayers = 28
)

// Layer types of layer_types.
const (
	FullAttention    = "full_attention"
	SlidingAttention = "sliding_attention"
)

// Rope is the rotary-embedding setup: rope_theta plus rope_scaling (transformers 4) or
// rope_parameters (transformers 5).
type Rope struct {
	Theta float64
	// Type is "default" or "linear".
	Type string
	// Factor divides the inverse frequencies for "linear".
	Factor float64
}

// Config is transformers' Qwen3Config.
type Config struct {
	core.Common

	VocabSize             int
	HiddenSize            int
	IntermediateSize      int
	NumHiddenLayers       int
	NumAttentionHeads     int
	NumKeyValueHeads      int // absent: 32 (the class default); null: num_attention_heads
	HeadDim               int // absent: 128 (the class default); never hidden_size / heads
	HiddenAct             string
	MaxPositionEmbeddings int
	InitializerRange      float64
	RMSNormEps            float64
	UseCache              bool
	TieWordEmbeddings     bool
	AttentionBias         bool // biases on q/k/v/o_proj
	AttentionDropout      float64
	Rope                  Rope
	// UseSlidingWindow switches sliding-window attention on; SlidingWindow is the window as the file
	// gives it (nil: null). HF keeps the window only when UseSlidingWindow (otherwise it stores null).
	UseSlidingWindow bool
	SlidingWindow    *int
	MaxWindowLayers  int
	// LayerTypes has one entry per layer, full_attention or sliding_attention; nil derives HF's
	// default (sliding_attention from max_window_layers on when the window is on).
	LayerTypes []string
	PadTokenID *int
	BOSTokenID []int
	EOSTokenID []int

	// layerWindows is resolved by Validate: the window of each layer (0: full attention).
	layerWindows []int
	// hadHeadDim tells whether config.json gave head_dim (for the shape hints of errors).
	hadHeadDim bool
}

// DefaultConfig returns Qwen3Config's class defaults.
func DefaultConfig() *Config {
	sw := DefaultSlidingWindow
	return &Config{
		VocabSize: 151936, HiddenSize: 4096, IntermediateSize: 22016, NumHiddenLayers: 32,
		NumAttentionHeads: 32, NumKeyValueHeads: DefaultKVHeads, HeadDim: DefaultHeadDim, HiddenAct: "silu",
		MaxPositionEmbeddings: 32768, InitializerRange: 0.02, RMSNormEps: 1e-6, UseCache: true,
		Rope: Rope{Theta: 10000, Type: "default"}, SlidingWindow: &sw, MaxWindowLayers: DefaultMaxWindowLayers,
		hadHeadDim: true,
	}
}

// ModelType implements core.Config.
func (c *Config) ModelType() string { return ModelType }

// Architecture implements core.Config.
func (c *Config) Architecture() string { return Architecture }

// EffectiveWindow is the sliding window HF uses: SlidingWindow when UseSlidingWindow, else nil.
func (c *Config) EffectiveWindow() *int {
	if !c.UseSlidingWindow {
		return nil
	}
	return c.SlidingWindow
}

// LayerWindows returns each layer's attention window (0: full causal attention), as resolved by
// Validate.
func (c *Config) LayerWindows() []int { return slices.Clone(c.layerWindows) }

// ParseConfig reads a Qwen3 config.json (transformers 4.5x or 5.x).
func ParseConfig(raw *core.RawConfig) (*Config, error) {
	var mt string
	if err := raw.String("model_type", &mt); err != nil {
		return nil, err
	}
	if mt != "" && mt != ModelType {
		return nil, raw.FieldError("model_type", fmt.Errorf("%q is not %q", mt, ModelType))
	}
	c := DefaultConfig()
	if err := c.ReadCommon(raw); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"vocab_size", &c.VocabSize}, {"hidden_size", &c.HiddenSize}, {"intermediate_size", &c.IntermediateSize},
		{"num_hidden_layers", &c.NumHiddenLayers}, {"num_attention_heads", &c.NumAttentionHeads},
		{"max_position_embeddings", &c.MaxPositionEmbeddings}, {"max_window_layers", &c.MaxWindowLayers}} {
		if err := raw.Int(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	// num_key_value_heads: absent keeps the class default 32; null means the head count (HF's
	// __init__ rule).
	if raw.Has("num_key_value_heads") {
		kv, err := raw.OptInt("num_key_value_heads")
		if err != nil {
			return nil, err
		}
		if kv == nil {
			c.NumKeyValueHeads = c.NumAttentionHeads
		} else {
			c.NumKeyValueHeads = *kv
		}
	}
	// head_dim: absent keeps the class default 128; null leaves HF's attention without a head size.
	c.hadHeadDim = raw.Has("head_dim")
	if c.hadHeadDim {
		hd, err := raw.OptInt("head_dim")
		if err != nil {
			return nil, err
		}
		if hd == nil {
			return nil, raw.FieldError("head_dim", fmt.Errorf("is null: Qwen3 needs an explicit head size (leave the field out for Qwen3Config's default %d)", DefaultHeadDim))
		}
		c.HeadDim = *hd
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
	}{{"use_cache", &c.UseCache}, {"tie_word_embeddings", &c.TieWordEmbeddings}, {"attention_bias", &c.AttentionBias},
		{"use_sliding_window", &c.UseSlidingWindow}} {
		if err := raw.Bool(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	if err := raw.String("hidden_act", &c.HiddenAct); err != nil {
		return nil, err
	}
	var err error
	if c.PadTokenID, err = raw.OptInt("pad_token_id"); err != nil {
		return nil, err
	}
	if c.BOSTokenID, err = raw.TokenIDs("bos_token_id"); err != nil {
		return nil, err
	}
	if c.EOSTokenID, err = raw.TokenIDs("eos_token_id"); err != nil {
		return nil, err
	}
	if raw.Has("sliding_window") {
		if c.SlidingWindow, err = raw.OptInt("sliding_window"); err != nil {
			return nil, err
		}
	}
	if _, err := raw.Get("layer_types", &c.LayerTypes); err != nil {
		return nil, err
	}
	if err := c.parseRope(raw); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// ropeKey is the field the rope setup comes from: rope_scaling (transformers 4), or
// rope_parameters (transformers 5) when rope_scaling is absent or null.
func ropeKey(raw *core.RawConfig) string {
	if raw.IsNull("rope_scaling") && !raw.IsNull("rope_parameters") {
		return "rope_parameters"
	}
	return "rope_scaling"
}

// parseRope reads rope_theta / rope_scaling (transformers 4) or rope_parameters (transformers 5).
func (c *Config) parseRope(raw *core.RawConfig) error {
	if err := raw.Float("rope_theta", &c.Rope.Theta); err != nil {
		return err
	}
	key := ropeKey(raw)
	if raw.IsNull(key) {
		return nil
	}
	var rs map[string]json.RawMessage
	if _, err := raw.Get(key, &rs); err != nil {
		return err
	}
	for _, lt := range []string{FullAttention, SlidingAttention} {
		if _, ok := rs[lt]; ok {
			return raw.FieldError(key, fmt.Errorf("per-layer-type rope parameters (%q) are not supported for qwen3: give one setting", lt))
		}
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
	partial := 1.0
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
	default:
		return raw.FieldError(key, fmt.Errorf("rope_type %q is not supported for qwen3 (default, linear)", typ))
	}
	return nil
}

// Validate reports the first unusable field, naming it, and resolves the layer types and windows.
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
		why := ""
		if !raw.Has("num_key_value_heads") {
			why = fmt.Sprintf(" (the field is absent, so Qwen3Config's default %d applies)", DefaultKVHeads)
		}
		return raw.FieldError("num_key_value_heads", fmt.Errorf("num_attention_heads %d is not a multiple of %d%s", c.NumAttentionHeads, c.NumKeyValueHeads, why))
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
	switch c.Rope.Type {
	case "default":
	case "linear":
		if c.Rope.Factor <= 0 {
			return raw.FieldError(ropeKey(raw), fmt.Errorf("linear rope scaling needs a positive factor"))
		}
	default:
		return raw.FieldError(ropeKey(raw), fmt.Errorf("rope_type %q is not supported for qwen3 (default, linear)", c.Rope.Type))
	}
	if c.AttentionDropout < 0 || c.AttentionDropout >= 1 {
		return raw.FieldError("attention_dropout", fmt.Errorf("%g is not in [0, 1)", c.AttentionDropout))
	}
	window := c.EffectiveWindow()
	if window != nil && *window <= 0 {
		return raw.FieldError("sliding_window", fmt.Errorf("%d must be positive", *window))
	}
	types := c.LayerTypes
	if types == nil {
		// Qwen3Config.__init__: sliding_attention from max_window_layers on, when the window is on.
		types = make([]string, c.NumHiddenLayers)
		for i := range types {
			types[i] = FullAttention
			if window != nil && i >= c.MaxWindowLayers {
				types[i] = SlidingAttention
			}
		}
	}
	if len(types) != c.NumHiddenLayers {
		return raw.FieldError("layer_types", fmt.Errorf("%d entries for num_hidden_layers %d", len(types), c.NumHiddenLayers))
	}
	windows := make([]int, c.NumHiddenLayers)
	for i, t := range types {
		switch t {
		case FullAttention:
		case SlidingAttention:
			if window == nil {
				return raw.FieldError("layer_types", fmt.Errorf("layer %d is sliding_attention but there is no window "+
					"(use_sliding_window is %v and sliding_window is %s): Qwen3Config keeps sliding_window only with use_sliding_window true",
					i, c.UseSlidingWindow, fmtOptInt(c.SlidingWindow)))
			}
			windows[i] = *window
		default:
			return raw.FieldError("layer_types", fmt.Errorf("layer %d: layer type %q is not supported for qwen3 (full_attention, sliding_attention)", i, t))
		}
	}
	c.layerWindows = windows
	return nil
}

func fmtOptInt(v *int) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprint(*v)
}

// resolvedLayerTypes is what save_pretrained writes as layer_types.
func (c *Config) resolvedLayerTypes() []string {
	if c.LayerTypes != nil {
		return c.LayerTypes
	}
	out := make([]string, len(c.layerWindows))
	for i, w := range c.layerWindows {
		out[i] = FullAttention
		if w > 0 {
			out[i] = SlidingAttention
		}
	}
	return out
}

// JSON implements core.Config: every Qwen3Config attribute, as transformers 4.57's save_pretrained
// writes them, over the file's own fields (unknown ones kept, unchanged values in their original
// spelling).
func (c *Config) JSON() ([]byte, error) {
	raw := c.RawOrEmpty()
	if c.layerWindows == nil {
		if err := c.Validate(); err != nil {
			return nil, err
		}
	}
	// sliding_window: the file's value when it has one (HF ignores it without use_sliding_window),
	// else what Qwen3Config stores: the window only when it is on.
	var window any
	if raw.Has("sliding_window") || c.UseSlidingWindow {
		if c.SlidingWindow != nil {
			window = *c.SlidingWindow
		}
	}
	fields := append(c.CommonFields(ModelType, Architecture),
		core.Field{Key: "vocab_size", Value: c.VocabSize, Always: true},
		core.Field{Key: "hidden_size", Value: c.HiddenSize, Always: true},
		core.Field{Key: "intermediate_size", Value: c.IntermediateSize, Always: true},
		core.Field{Key: "num_hidden_layers", Value: c.NumHiddenLayers, Always: true},
		core.Field{Key: "num_attention_heads", Value: c.NumAttentionHeads, Always: true},
		core.Field{Key: "num_key_value_heads", Value: c.NumKeyValueHeads, Always: true},
		core.Field{Key: "head_dim", Value: c.HeadDim, Always: true},
		core.Field{Key: "hidden_act", Value: c.HiddenAct, Always: true},
		core.Field{Key: "max_position_embeddings", Value: c.MaxPositionEmbeddings, Always: true},
		core.Field{Key: "initializer_range", Value: core.PyFloat(c.InitializerRange), Always: true},
		core.Field{Key: "rms_norm_eps", Value: core.PyFloat(c.RMSNormEps), Always: true},
		core.Field{Key: "use_cache", Value: c.UseCache, Always: true},
		core.Field{Key: "tie_word_embeddings", Value: c.TieWordEmbeddings, Always: true},
		core.Field{Key: "attention_bias", Value: c.AttentionBias, Always: true},
		core.Field{Key: "attention_dropout", Value: core.PyFloat(c.AttentionDropout), Always: true},
		core.Field{Key: "use_sliding_window", Value: c.UseSlidingWindow, Always: true},
		core.Field{Key: "sliding_window", Value: window, Always: true},
		core.Field{Key: "max_window_layers", Value: c.MaxWindowLayers, Always: true},
		core.Field{Key: "layer_types", Value: c.resolvedLayerTypes(), Always: true},
		core.Field{Key: "pad_token_id", Value: optIntValue(c.PadTokenID)},
		core.Field{Key: "bos_token_id", Value: core.TokenIDsValue(c.BOSTokenID)},
		core.Field{Key: "eos_token_id", Value: core.TokenIDsValue(c.EOSTokenID)},
	)
	// Rope, in the file's own spelling: transformers 5 files carry rope_parameters; 4.x files
	// rope_theta plus rope_scaling (null for the default). Keys the file has are kept up to date.
	hasParams := !raw.IsNull("rope_parameters")
	if hasParams {
		rp := map[string]any{}
		if _, err := raw.Get("rope_parameters", &rp); err != nil {
			return nil, err
		}
		rp["rope_theta"] = core.PyFloat(c.Rope.Theta)
		rp["rope_type"] = c.Rope.Type
		delete(rp, "type")
		if c.Rope.Type == "linear" {
			rp["factor"] = core.PyFloat(c.Rope.Factor)
		} else {
			delete(rp, "factor")
		}
		fields = append(fields, core.Field{Key: "rope_parameters", Value: core.PyMap(rp), Always: true})
	}
	if !hasParams || raw.Has("rope_theta") {
		fields = append(fields, core.Field{Key: "rope_theta", Value: core.PyFloat(c.Rope.Theta), Always: true})
	}
	if !hasParams || !raw.IsNull("rope_scaling") {
		scaling, err := c.ropeScalingValue(raw)
		if err != nil {
			return nil, err
		}
		fields = append(fields, core.Field{Key: "rope_scaling", Value: scaling, Always: true})
	}
	return raw.Marshal(fields)
}

// ropeScalingValue is rope_scaling as written: the file's own object when it still describes the
// rope in use, else null for the default rope and {"factor", "rope_type"} for linear scaling.
func (c *Config) ropeScalingValue(raw *core.RawConfig) (any, error) {
	if !raw.IsNull("rope_scaling") {
		was := &Config{Rope: Rope{Theta: c.Rope.Theta, Type: "default"}}
		if err := was.parseRope(raw); err == nil && reflect.DeepEqual(was.Rope, c.Rope) {
			orig := map[string]any{}
			if _, err := raw.Get("rope_scaling", &orig); err != nil {
				return nil, err
			}
			return orig, nil
		}
	}
	if c.Rope.Type == "default" {
		return nil, nil
	}
	return core.PyMap{"rope_type": c.Rope.Type, "factor": core.PyFloat(c.Rope.Factor)}, nil
}

func optIntValue(v *int) any {
	if v == nil {
		return nil
	}
	return *v
}
