package gemma3

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/gotpu/gotpu/models/internal/core"
)

// Model types and classes. TypeText is the text-only Gemma3ForCausalLM; TypeMultimodal is the
// image-text Gemma3ForConditionalGeneration, whose language model gotpu loads as a
// Gemma3ForCausalLM (see LoadRaw).
const (
	TypeText               = "gemma3_text"
	TypeMultimodal         = "gemma3"
	Architecture           = "Gemma3ForCausalLM"
	ArchitectureMultimodal = "Gemma3ForConditionalGeneration"
)

// Layer types of layer_types.
const (
	FullAttention    = "full_attention"
	SlidingAttention = "sliding_attention"
)

// DefaultSlidingWindowPattern is Gemma3TextConfig's sliding_window_pattern default: every sixth
// layer is global.
const DefaultSlidingWindowPattern = 6

// Rope is the rotary-embedding setup of one layer type.
type Rope struct {
	Theta float64
	// Type is "default" or "linear" (inverse frequencies divided by Factor).
	Type   string
	Factor float64
}

// Config is transformers' Gemma3TextConfig.
type Config struct {
	core.Common

	VocabSize             int
	HiddenSize            int
	IntermediateSize      int
	NumHiddenLayers       int
	NumAttentionHeads     int
	NumKeyValueHeads      int
	HeadDim               int
	HiddenActivation      string
	MaxPositionEmbeddings int
	InitializerRange      float64
	RMSNormEps            float64
	UseCache              bool
	TieWordEmbeddings     bool
	AttentionBias         bool
	AttentionDropout      float64
	// QueryPreAttnScalar: attention scores are scaled by QueryPreAttnScalar^-0.5 (not head_dim).
	QueryPreAttnScalar float64
	// SlidingWindow is the window of sliding_attention layers (0: null).
	SlidingWindow int
	// LayerTypes has one entry per layer, FullAttention or SlidingAttention: config.json's
	// layer_types, or derived from SlidingWindowPattern when absent.
	LayerTypes []string
	// SlidingWindowPattern is the legacy sliding_window_pattern (read from that key only;
	// _sliding_window_pattern, which save_pretrained writes, does not set it): layer i is
	// full_attention iff (i + 1) % pattern == 0. Used only when layer_types is absent.
	SlidingWindowPattern int
	// FinalLogitSoftcapping caps the logits (tanh(logits / c) * c) before the loss; nil: off.
	FinalLogitSoftcapping *float64
	// AttnLogitSoftcapping is stored and written back but never applied: HF's Gemma3Attention
	// does not pass it to the attention function.
	AttnLogitSoftcapping *float64
	// RopeGlobal is used by full_attention layers (rope_theta, rope_scaling); RopeLocal by
	// sliding_attention layers (rope_local_base_freq, unscaled in transformers 4).
	RopeGlobal, RopeLocal Rope
	PadTokenID            *int
	BOSTokenID            []int
	EOSTokenID            []int

	// set by ParseConfig: the file's rope settings (to keep their spelling), whether head_dim was
	// explicit, and whether the config is the text_config of a Gemma3ForConditionalGeneration.
	origGlobal, origLocal Rope
	fromMultimodal        bool
}

// DefaultConfig returns Gemma3TextConfig's class defaults (the gemma-3 2B-like text model).
func DefaultConfig() *Config {
	pad := 0
	c := &Config{
		VocabSize: 262_208, HiddenSize: 2304, IntermediateSize: 9216, NumHiddenLayers: 26,
		NumAttentionHeads: 8, NumKeyValueHeads: 4, HeadDim: 256, HiddenActivation: "gelu_pytorch_tanh",
		MaxPositionEmbeddings: 131_072, InitializerRange: 0.02, RMSNormEps: 1e-6, UseCache: true,
		TieWordEmbeddings: true, QueryPreAttnScalar: 256, SlidingWindow: 4096,
		SlidingWindowPattern: DefaultSlidingWindowPattern,
		RopeGlobal:           Rope{Theta: 1_000_000, Type: "default", Factor: 1},
		RopeLocal:            Rope{Theta: 10_000, Type: "default", Factor: 1},
		PadTokenID:           &pad, BOSTokenID: []int{2}, EOSTokenID: []int{1},
	}
	c.DTypeKey = "dtype"
	return c
}

// ModelType implements core.Config.
func (c *Config) ModelType() string { return TypeText }

// Architecture implements core.Config.
func (c *Config) Architecture() string { return Architecture }

// Window is the attention window of layer i: SlidingWindow for sliding_attention layers, 0 (full
// causal attention) otherwise.
func (c *Config) Window(i int) int {
	if i < len(c.LayerTypes) && c.LayerTypes[i] == SlidingAttention {
		return c.SlidingWindow
	}
	return 0
}

// RopeOf is the rotary setup of layer i.
func (c *Config) RopeOf(i int) Rope {
	if i < len(c.LayerTypes) && c.LayerTypes[i] == SlidingAttention {
		return c.RopeLocal
	}
	return c.RopeGlobal
}

// PaddingIdx is the embedding row HF's nn.Embedding(padding_idx=pad_token_id) zeroes at init and
// keeps out of the lookup gradient (-1: none). A negative pad_token_id counts from the end, as in
// PyTorch.
func (c *Config) PaddingIdx() int {
	if c.PadTokenID == nil {
		return -1
	}
	p := *c.PadTokenID
	if p < 0 {
		p += c.VocabSize
	}
	return p
}

// DerivedLayerTypes returns the layer types sliding_window_pattern implies for n layers: layer i
// is full_attention iff (i + 1) % pattern == 0.
func DerivedLayerTypes(n, pattern int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = SlidingAttention
		if pattern > 0 && (i+1)%pattern == 0 {
			out[i] = FullAttention
		}
	}
	return out
}

// ParseConfig reads a gemma3_text config.json (transformers 4.5x or 5.x form).
func ParseConfig(raw *core.RawConfig) (*Config, error) {
	var mt string
	if err := raw.String("model_type", &mt); err != nil {
		return nil, err
	}
	if mt != "" && mt != TypeText {
		return nil, raw.FieldError("model_type", fmt.Errorf("%q is not %s", mt, TypeText))
	}
	return parse(raw, false)
}

// ParseMultimodalConfig reads the text_config of a Gemma3ForConditionalGeneration config.json
// (model_type "gemma3"). HF writes that sub-config as a diff against Gemma3TextConfig's defaults,
// so absent fields (head_dim among them) take the class defaults. Errors name the file and
// "text_config.<field>".
func ParseMultimodalConfig(raw *core.RawConfig) (*Config, error) {
	var mt string
	if err := raw.String("model_type", &mt); err != nil {
		return nil, err
	}
	if mt != TypeMultimodal {
		return nil, raw.FieldError("model_type", fmt.Errorf("%q is not %s", mt, TypeMultimodal))
	}
	tc, ok := raw.Raw("text_config")
	if !ok || raw.IsNull("text_config") {
		return nil, raw.FieldError("text_config", fmt.Errorf("missing: a %s config needs the text model's config", ArchitectureMultimodal))
	}
	where := "config"
	if raw.Path != "" {
		where = raw.Path
	}
	sub, err := core.ParseRawConfig(where+": text_config", tc)
	if err != nil {
		return nil, err
	}
	var smt string
	if err := sub.String("model_type", &smt); err != nil {
		return nil, err
	}
	if smt != "" && smt != TypeText {
		return nil, sub.FieldError("model_type", fmt.Errorf("%q is not %s", smt, TypeText))
	}
	c, err := parse(sub, true)
	if err != nil {
		return nil, err
	}
	// The text model is saved as a standalone Gemma3ForCausalLM: its config.json is the sub-config
	// with gotpu's fields written over it, dtype from the outer file when the sub-config has none.
	if c.DType == "" {
		key := "torch_dtype"
		if raw.Has("dtype") && !raw.Has("torch_dtype") {
			key = "dtype"
		}
		if err := raw.String(key, &c.DType); err != nil {
			return nil, err
		}
		c.DTypeKey = key
	}
	return c, nil
}

func parse(raw *core.RawConfig, sub bool) (*Config, error) {
	c := DefaultConfig()
	c.fromMultimodal = sub
	if err := c.ReadCommon(raw); err != nil {
		return nil, err
	}
	if !raw.Has("torch_dtype") && !raw.Has("dtype") {
		c.DTypeKey = "dtype" // what transformers 4.56+ writes
	}
	for _, f := range []struct {
		key string
		dst *int
	}{{"vocab_size", &c.VocabSize}, {"hidden_size", &c.HiddenSize}, {"intermediate_size", &c.IntermediateSize},
		{"num_hidden_layers", &c.NumHiddenLayers}, {"num_attention_heads", &c.NumAttentionHeads},
		{"num_key_value_heads", &c.NumKeyValueHeads}, {"max_position_embeddings", &c.MaxPositionEmbeddings}} {
		if err := raw.Int(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	hd, err := raw.OptInt("head_dim")
	if err != nil {
		return nil, err
	}
	switch {
	case hd != nil:
		c.HeadDim = *hd
	case !sub && c.NumAttentionHeads > 0 && c.HiddenSize/c.NumAttentionHeads != c.HeadDim:
		// HF would use Gemma3TextConfig's default 256, which save_pretrained always writes in a
		// top-level config: a file without it was not written by HF, and a reader deriving
		// hidden_size / num_attention_heads (as for Llama) would build another model.
		return nil, raw.FieldError("head_dim", fmt.Errorf("missing: Gemma3TextConfig's default is %d, not hidden_size / num_attention_heads = %d; "+
			"write head_dim explicitly", c.HeadDim, c.HiddenSize/c.NumAttentionHeads))
	}
	for _, f := range []struct {
		key string
		dst *float64
	}{{"initializer_range", &c.InitializerRange}, {"rms_norm_eps", &c.RMSNormEps},
		{"attention_dropout", &c.AttentionDropout}, {"query_pre_attn_scalar", &c.QueryPreAttnScalar}} {
		if err := raw.Float(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{{"use_cache", &c.UseCache}, {"tie_word_embeddings", &c.TieWordEmbeddings}, {"attention_bias", &c.AttentionBias}} {
		if err := raw.Bool(f.key, f.dst); err != nil {
			return nil, err
		}
	}
	var bidi bool
	if err := raw.Bool("use_bidirectional_attention", &bidi); err != nil {
		return nil, err
	}
	if bidi {
		return nil, raw.FieldError("use_bidirectional_attention", fmt.Errorf("true is not supported (gotpu's Gemma 3 is a causal LM)"))
	}
	if err := raw.String("hidden_activation", &c.HiddenActivation); err != nil {
		return nil, err
	}
	if raw.Has("sliding_window") {
		c.SlidingWindow = 0 // null
		if err := raw.Int("sliding_window", &c.SlidingWindow); err != nil {
			return nil, err
		}
	}
	for _, f := range []struct {
		key string
		dst **float64
	}{{"final_logit_softcapping", &c.FinalLogitSoftcapping}, {"attn_logit_softcapping", &c.AttnLogitSoftcapping}} {
		var v float64
		ok, err := raw.Get(f.key, &v)
		if err != nil {
			return nil, err
		}
		if ok {
			*f.dst = &v
		}
	}
	if raw.Has("pad_token_id") {
		if c.PadTokenID, err = raw.OptInt("pad_token_id"); err != nil {
			return nil, err
		}
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
	if err := c.parseLayerTypes(raw); err != nil {
		return nil, err
	}
	if err := c.parseRope(raw); err != nil {
		return nil, err
	}
	c.origGlobal, c.origLocal = c.RopeGlobal, c.RopeLocal
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseLayerTypes: an explicit layer_types wins; otherwise the pattern from the
// sliding_window_pattern key (default 6). _sliding_window_pattern is not read, as in HF.
func (c *Config) parseLayerTypes(raw *core.RawConfig) error {
	if err := raw.Int("sliding_window_pattern", &c.SlidingWindowPattern); err != nil {
		return err
	}
	if !raw.IsNull("layer_types") {
		if _, err := raw.Get("layer_types", &c.LayerTypes); err != nil {
			return err
		}
		return nil
	}
	if c.SlidingWindowPattern <= 0 {
		return raw.FieldError("sliding_window_pattern", fmt.Errorf("%d must be positive", c.SlidingWindowPattern))
	}
	c.LayerTypes = DerivedLayerTypes(c.NumHiddenLayers, c.SlidingWindowPattern)
	return nil
}

// v5Rope tells whether raw carries transformers 5's rope_parameters.
func v5Rope(raw *core.RawConfig) bool { return !raw.IsNull("rope_parameters") }

// parseRope reads rope_theta / rope_scaling / rope_local_base_freq (transformers 4) and
// transformers 5's per-layer-type rope_parameters ({"full_attention": {...}, "sliding_attention":
// {...}}), with transformers 5's precedence: rope_parameters' own rope_theta over the top-level
// keys, rope_scaling (when present) over the full_attention entry.
func (c *Config) parseRope(raw *core.RawConfig) error {
	if err := raw.Float("rope_theta", &c.RopeGlobal.Theta); err != nil {
		return err
	}
	if err := raw.Float("rope_local_base_freq", &c.RopeLocal.Theta); err != nil {
		return err
	}
	if v5Rope(raw) {
		var rp map[string]json.RawMessage
		if _, err := raw.Get("rope_parameters", &rp); err != nil {
			return err
		}
		_, hasFull := rp[FullAttention]
		_, hasSliding := rp[SlidingAttention]
		if !hasFull && !hasSliding {
			return raw.FieldError("rope_parameters", fmt.Errorf("want one entry per layer type ({%q: {...}, %q: {...}}), as transformers 5 writes Gemma 3's", FullAttention, SlidingAttention))
		}
		for k := range rp {
			if k != FullAttention && k != SlidingAttention {
				return raw.FieldError("rope_parameters", fmt.Errorf("unknown layer type %q (%s, %s)", k, FullAttention, SlidingAttention))
			}
		}
		for _, e := range []struct {
			key string
			dst *Rope
		}{{FullAttention, &c.RopeGlobal}, {SlidingAttention, &c.RopeLocal}} {
			if b, ok := rp[e.key]; ok && string(b) != "null" {
				var m map[string]json.RawMessage
				if err := json.Unmarshal(b, &m); err != nil {
					return raw.FieldError("rope_parameters", fmt.Errorf("%s: %w", e.key, err))
				}
				if err := readRope(raw, "rope_parameters", e.key+": ", m, e.dst); err != nil {
					return err
				}
			}
		}
	}
	if !raw.IsNull("rope_scaling") {
		var m map[string]json.RawMessage
		if _, err := raw.Get("rope_scaling", &m); err != nil {
			return err
		}
		if err := readRope(raw, "rope_scaling", "", m, &c.RopeGlobal); err != nil {
			return err
		}
	}
	return nil
}

// readRope reads one rope dict (rope_type or type, factor, rope_theta, partial_rotary_factor).
func readRope(raw *core.RawConfig, key, where string, m map[string]json.RawMessage, r *Rope) error {
	num := func(name string, dst *float64) error {
		v, ok := m[name]
		if !ok || string(v) == "null" {
			return nil
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return raw.FieldError(key, fmt.Errorf("%s%s: %w", where, name, err))
		}
		return nil
	}
	if err := num("rope_theta", &r.Theta); err != nil {
		return err
	}
	for _, name := range []string{"rope_type", "type"} {
		if v, ok := m[name]; ok {
			if err := json.Unmarshal(v, &r.Type); err != nil {
				return raw.FieldError(key, fmt.Errorf("%s%s: %w", where, name, err))
			}
			break
		}
	}
	partial := 1.0
	if err := num("partial_rotary_factor", &partial); err != nil {
		return err
	}
	if partial != 1 {
		return raw.FieldError(key, fmt.Errorf("%spartial_rotary_factor %g is not supported (only 1.0)", where, partial))
	}
	switch r.Type {
	case "default":
		r.Factor = 1
	case "linear":
		r.Factor = 0
		if err := num("factor", &r.Factor); err != nil {
			return err
		}
		if !(r.Factor > 0) {
			return raw.FieldError(key, fmt.Errorf("%slinear rope scaling needs a positive factor", where))
		}
	default:
		return raw.FieldError(key, fmt.Errorf("%srope_type %q is not supported (default, linear)", where, r.Type))
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
	if _, err := core.Activation(c.HiddenActivation); err != nil {
		return raw.FieldError("hidden_activation", err)
	}
	if !(c.RMSNormEps > 0) {
		return raw.FieldError("rms_norm_eps", fmt.Errorf("%g must be positive", c.RMSNormEps))
	}
	if !(c.QueryPreAttnScalar > 0) || math.IsInf(c.QueryPreAttnScalar, 0) {
		return raw.FieldError("query_pre_attn_scalar", fmt.Errorf("%g must be positive", c.QueryPreAttnScalar))
	}
	if c.AttentionDropout < 0 || c.AttentionDropout > 1 {
		return raw.FieldError("attention_dropout", fmt.Errorf("%g is not a probability", c.AttentionDropout))
	}
	if v := c.FinalLogitSoftcapping; v != nil && !(*v > 0) {
		return raw.FieldError("final_logit_softcapping", fmt.Errorf("%g must be positive or null (logits = tanh(logits / c) * c)", *v))
	}
	if v := c.AttnLogitSoftcapping; v != nil && !(*v > 0) {
		return raw.FieldError("attn_logit_softcapping", fmt.Errorf("%g must be positive or null (HF's Gemma 3 does not apply it, but a non-positive cap is no valid setting)", *v))
	}
	if c.LayerTypes == nil {
		if c.SlidingWindowPattern <= 0 {
			return raw.FieldError("sliding_window_pattern", fmt.Errorf("%d must be positive", c.SlidingWindowPattern))
		}
		c.LayerTypes = DerivedLayerTypes(c.NumHiddenLayers, c.SlidingWindowPattern)
	}
	if len(c.LayerTypes) != c.NumHiddenLayers {
		return raw.FieldError("layer_types", fmt.Errorf("%d entries for %d layers", len(c.LayerTypes), c.NumHiddenLayers))
	}
	for i, t := range c.LayerTypes {
		switch t {
		case FullAttention:
		case SlidingAttention:
			if c.SlidingWindow <= 0 {
				return raw.FieldError("sliding_window", fmt.Errorf("layer %d is sliding_attention, so the window must be a positive integer (got %d)", i, c.SlidingWindow))
			}
		default:
			return raw.FieldError("layer_types", fmt.Errorf("layer %d: unknown layer type %q (%s, %s)", i, t, FullAttention, SlidingAttention))
		}
	}
	for _, r := range []struct {
		key string
		r   Rope
	}{{"rope_theta", c.RopeGlobal}, {"rope_local_base_freq", c.RopeLocal}} {
		if !(r.r.Theta > 0) {
			return raw.FieldError(r.key, fmt.Errorf("%g must be positive", r.r.Theta))
		}
		switch r.r.Type {
		case "default":
		case "linear":
			if !(r.r.Factor > 0) {
				return raw.FieldError(r.key, fmt.Errorf("linear rope scaling needs a positive factor"))
			}
		default:
			return raw.FieldError(r.key, fmt.Errorf("rope_type %q is not supported (default, linear)", r.r.Type))
		}
	}
	if p := c.PaddingIdx(); c.PadTokenID != nil && (p < 0 || p >= c.VocabSize) {
		return raw.FieldError("pad_token_id", fmt.Errorf("%d is outside the vocabulary of %d", *c.PadTokenID, c.VocabSize))
	}
	return nil
}

// intOrFloat writes an integral float as an integer (query_pre_attn_scalar's default is the int
// 256) and anything else the Python way.
func intOrFloat(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f)
	}
	return core.PyFloat(f)
}

func optFloat(f *float64) any {
	if f == nil {
		return nil
	}
	return core.PyFloat(*f)
}

func optInt(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// ropeDict is a rope dict as HF writes it.
func ropeDict(r Rope, withTheta bool) map[string]any {
	m := map[string]any{"rope_type": r.Type}
	if r.Type == "linear" {
		m["factor"] = core.PyFloat(r.Factor)
	}
	if withTheta {
		m["rope_theta"] = core.PyFloat(r.Theta)
	}
	return m
}

// JSON implements core.Config: config.json as Gemma3ForCausalLM.save_pretrained writes it, in the
// file's own form (transformers 4.57's keys, or transformers 5's rope_parameters), unknown fields
// kept.
func (c *Config) JSON() ([]byte, error) {
	raw := c.RawOrEmpty()
	if c.LayerTypes == nil {
		c.LayerTypes = DerivedLayerTypes(c.NumHiddenLayers, c.SlidingWindowPattern)
	}
	var window any
	if c.SlidingWindow > 0 {
		window = c.SlidingWindow
	}
	fields := append(c.CommonFields(TypeText, Architecture),
		core.Field{Key: "vocab_size", Value: c.VocabSize, Always: true},
		core.Field{Key: "hidden_size", Value: c.HiddenSize, Always: true},
		core.Field{Key: "intermediate_size", Value: c.IntermediateSize, Always: true},
		core.Field{Key: "num_hidden_layers", Value: c.NumHiddenLayers, Always: true},
		core.Field{Key: "num_attention_heads", Value: c.NumAttentionHeads, Always: true},
		core.Field{Key: "num_key_value_heads", Value: c.NumKeyValueHeads, Always: true},
		core.Field{Key: "head_dim", Value: c.HeadDim, Always: true},
		core.Field{Key: "hidden_activation", Value: c.HiddenActivation, Always: true},
		core.Field{Key: "max_position_embeddings", Value: c.MaxPositionEmbeddings, Always: true},
		core.Field{Key: "initializer_range", Value: core.PyFloat(c.InitializerRange), Always: true},
		core.Field{Key: "rms_norm_eps", Value: core.PyFloat(c.RMSNormEps), Always: true},
		core.Field{Key: "use_cache", Value: c.UseCache, Always: true},
		core.Field{Key: "attention_bias", Value: c.AttentionBias, Always: true},
		core.Field{Key: "attention_dropout", Value: core.PyFloat(c.AttentionDropout), Always: true},
		core.Field{Key: "query_pre_attn_scalar", Value: intOrFloat(c.QueryPreAttnScalar), Always: true},
		core.Field{Key: "sliding_window", Value: window, Always: true},
		core.Field{Key: "layer_types", Value: c.LayerTypes, Always: true},
		core.Field{Key: "final_logit_softcapping", Value: optFloat(c.FinalLogitSoftcapping), Always: true},
		core.Field{Key: "attn_logit_softcapping", Value: optFloat(c.AttnLogitSoftcapping), Always: true},
		core.Field{Key: "use_bidirectional_attention", Value: false, Always: true},
		// PreTrainedConfig attributes: written when they differ from PreTrainedConfig's default
		// (None / True) or Gemma3TextConfig's (0, 2, 1, True), i.e. the token ids always.
		core.Field{Key: "pad_token_id", Value: optInt(c.PadTokenID), Always: true},
		core.Field{Key: "bos_token_id", Value: core.TokenIDsValue(c.BOSTokenID), Always: true},
		core.Field{Key: "eos_token_id", Value: core.TokenIDsValue(c.EOSTokenID), Always: true},
		core.Field{Key: "tie_word_embeddings", Value: c.TieWordEmbeddings, Default: true},
	)
	if v5Rope(raw) {
		if c.RopeGlobal != c.origGlobal || c.RopeLocal != c.origLocal {
			rp := map[string]any{}
			if _, err := raw.Get("rope_parameters", &rp); err != nil {
				return nil, err
			}
			for _, e := range []struct {
				key string
				r   Rope
			}{{FullAttention, c.RopeGlobal}, {SlidingAttention, c.RopeLocal}} {
				m, _ := rp[e.key].(map[string]any)
				if m == nil {
					m = map[string]any{}
				}
				delete(m, "type")
				delete(m, "factor")
				for k, v := range ropeDict(e.r, true) {
					m[k] = v
				}
				rp[e.key] = m
			}
			fields = append(fields, core.Field{Key: "rope_parameters", Value: rp, Always: true})
		}
	} else {
		if c.RopeLocal.Type != "default" {
			return nil, raw.FieldError("rope_local_base_freq", fmt.Errorf("a scaled sliding_attention RoPE (%s) can only be written in transformers 5's rope_parameters", c.RopeLocal.Type))
		}
		fields = append(fields,
			core.Field{Key: "rope_theta", Value: core.PyFloat(c.RopeGlobal.Theta), Always: true},
			core.Field{Key: "rope_local_base_freq", Value: core.PyFloat(c.RopeLocal.Theta), Always: true})
		if c.RopeGlobal != c.origGlobal || !raw.Has("rope_scaling") {
			var rs any
			if c.RopeGlobal.Type != "default" {
				rs = ropeDict(c.RopeGlobal, false)
			}
			fields = append(fields, core.Field{Key: "rope_scaling", Value: rs, Always: true})
		}
		if !raw.Has("_sliding_window_pattern") {
			// transformers 4.57 writes the private attribute (the public key only when passed).
			fields = append(fields, core.Field{Key: "_sliding_window_pattern", Value: c.SlidingWindowPattern, Always: true})
		}
	}
	return raw.Marshal(fields)
}
