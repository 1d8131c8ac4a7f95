package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gotpu/gotpu/internal/membudget"
	"github.com/gotpu/gotpu/models/bert"
	"github.com/gotpu/gotpu/models/gemma3"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/llama"
	"github.com/gotpu/gotpu/models/qwen3"
	"github.com/gotpu/gotpu/xla"
)

// Limits on config.json dimensions. They are far above every published model (the deepest have
// about 130 layers, the widest MLPs about 53k, the largest vocabularies 262k tokens, the longest
// contexts 10M positions) and far below what would overflow: a config beyond them is a typo or an
// attack, refused naming the field before anything is parsed per layer or allocated.
const (
	MaxLayers    = 1 << 16 // n_layer, num_hidden_layers
	MaxWidth     = 1 << 20 // n_embd, hidden_size, n_inner, intermediate_size, heads, head_dim
	MaxVocab     = 1 << 24 // vocab_size, type_vocab_size
	MaxPositions = 1 << 30 // n_positions, max_position_embeddings (positions are int32 in graphs)
	MaxLabels    = 1 << 16 // num_labels, id2label entries (each label is two map entries when parsed)
)

// ErrTooLarge is wrapped by errors for a model whose dimensions are beyond the limits above or
// whose parameters do not fit in the memory available.
var ErrTooLarge = errors.New("model too large")

// dimLimits are the integer fields of every supported config.json with their limit.
var dimLimits = []struct {
	key string
	max int64
}{
	{"n_layer", MaxLayers}, {"num_hidden_layers", MaxLayers},
	{"n_embd", MaxWidth}, {"hidden_size", MaxWidth}, {"n_inner", MaxWidth}, {"intermediate_size", MaxWidth},
	{"n_head", MaxWidth}, {"num_attention_heads", MaxWidth}, {"num_key_value_heads", MaxWidth}, {"head_dim", MaxWidth},
	{"vocab_size", MaxVocab}, {"type_vocab_size", MaxVocab},
	{"n_positions", MaxPositions}, {"n_ctx", MaxPositions}, {"max_position_embeddings", MaxPositions},
	{"num_labels", MaxLabels}, {"_num_labels", MaxLabels},
}

// checkRawDims refuses, before an architecture parses config.json, an integer dimension beyond its
// limit: parsing itself allocates per layer (sliding-window tables) and per label (num_labels
// builds id2label), so an absurd value must not reach it. Non-integers are left to the parser,
// which names them.
func checkRawDims(raw *core.RawConfig) error {
	for _, d := range dimLimits {
		msg, ok := raw.Raw(d.key)
		if !ok {
			continue
		}
		var n json.Number
		if json.Unmarshal(msg, &n) != nil || n == "" { // not a number, or null
			continue
		}
		if v, err := n.Int64(); err == nil && v <= d.max {
			continue
		}
		if f, err := n.Float64(); err == nil && f <= float64(d.max) {
			continue // a fraction: the parser's error says so
		}
		return raw.FieldError(d.key, fmt.Errorf("%w: %s is over gotpu's limit of %d", ErrTooLarge, n, d.max))
	}
	if msg, ok := raw.Raw("id2label"); ok && len(msg) > 0 {
		// Counting keys would parse the object; its size bounds the count (each entry is at least
		// `"0":"",` = 7 bytes), which is all the limit needs.
		if int64(len(msg)) > 7*MaxLabels+2 {
			var m map[string]json.RawMessage
			if json.Unmarshal(msg, &m) == nil && int64(len(m)) > MaxLabels {
				return raw.FieldError("id2label", fmt.Errorf("%w: %d labels is over gotpu's limit of %d", ErrTooLarge, len(m), MaxLabels))
			}
		}
	}
	return nil
}

// Footprint is the size of a model as its config describes it, computed from the dimensions
// alone (nothing is built or allocated): what memory estimates need.
type Footprint struct {
	// Params is the number of parameters (the sum of Params()' element counts).
	Params int64
	// AdafactorState is the number of float32 values HF's Adafactor keeps: a row and a column
	// vector per matrix (factored second moments), the whole tensor for vectors.
	AdafactorState int64
	// LargestParam is the element count of the largest parameter (host staging while loading).
	LargestParam int64
	// Layers, Hidden, Intermediate and Heads are the transformer's dimensions; MLPMatrices is 2
	// for a GELU MLP (GPT-2, BERT) and 3 for a gated one (Llama's gate/up/down).
	Layers, Hidden, Intermediate, Heads, MLPMatrices int64
	// Vocab is the logits width per token of a causal LM (0 for a classifier); Labels the
	// classifier's outputs per sequence.
	Vocab, Labels int64
	// MaxPositions is the longest sequence the model takes.
	MaxPositions int64
}

// EstimateFootprint computes cfg's Footprint. Dimensions that are not positive, beyond the
// limits (MaxWidth…) or whose products overflow int64 are errors naming the config.json field;
// nothing is allocated, so this is safe on any input.
func EstimateFootprint(cfg Config) (Footprint, error) {
	switch c := cfg.(type) {
	case *gpt2.Config:
		return gpt2Footprint(c)
	case *llama.Config:
		return llamaFootprint(c)
	case *bert.Config:
		return bertFootprint(c)
	case *gemma3.Config:
		return gemma3Footprint(c)
	case *qwen3.Config:
		return qwen3Footprint(c)
	case nil:
		return Footprint{}, fmt.Errorf("models.EstimateFootprint: %w: nil config", ErrUnsupported)
	}
	return Footprint{}, fmt.Errorf("models.EstimateFootprint: %w: config type %T", ErrUnsupported, cfg)
}

// dim is one config field checked for range.
type dim struct {
	key string
	v   int
	max int64
}

func checkDims(raw *core.RawConfig, dims ...dim) error {
	for _, d := range dims {
		if d.v <= 0 {
			return fieldError(raw, d.key, fmt.Errorf("%d must be positive", d.v))
		}
		if int64(d.v) > d.max {
			return fieldError(raw, d.key, fmt.Errorf("%w: %d is over gotpu's limit of %d", ErrTooLarge, d.v, d.max))
		}
	}
	return nil
}

// fieldError names the file and field like RawConfig.FieldError, without creating a RawConfig for
// a config built in Go (RawOrEmpty would write to the config).
func fieldError(raw *core.RawConfig, key string, err error) error {
	if raw == nil {
		return fmt.Errorf("config: field %q: %w", key, err)
	}
	return raw.FieldError(key, err)
}

// shapeSum accumulates parameter shapes: those outside the layers once, those of one layer
// Layers times.
type shapeSum struct {
	acc                       membudget.Acc
	global, layer             int64 // elements
	globalFactor, layerFactor int64 // Adafactor state
	largest                   int64
}

func (s *shapeSum) add(perLayer bool, dims ...int64) {
	n := s.acc.Mul(dims...)
	factored := n
	if len(dims) >= 2 {
		factored = s.acc.Add(s.acc.Mul(dims[:len(dims)-1]...), s.acc.Mul(s.acc.Mul(dims[:len(dims)-2]...), dims[len(dims)-1]))
	}
	s.largest = max(s.largest, n)
	if perLayer {
		s.layer, s.layerFactor = s.acc.Add(s.layer, n), s.acc.Add(s.layerFactor, factored)
	} else {
		s.global, s.globalFactor = s.acc.Add(s.global, n), s.acc.Add(s.globalFactor, factored)
	}
}

func (s *shapeSum) footprint(raw *core.RawConfig, layers int64, f Footprint, fields string) (Footprint, error) {
	f.Params = s.acc.Add(s.global, s.acc.Mul(layers, s.layer))
	f.AdafactorState = s.acc.Add(s.globalFactor, s.acc.Mul(layers, s.layerFactor))
	f.LargestParam = s.largest
	// Bytes are needed too: float32 parameters plus AdamW's two moments must stay countable.
	s.acc.Mul(f.Params, 16)
	if s.acc.Overflowed() {
		return Footprint{}, fieldError(raw, fields, fmt.Errorf("%w: the parameter count overflows int64", ErrTooLarge))
	}
	return f, nil
}

func gpt2Footprint(c *gpt2.Config) (Footprint, error) {
	if err := checkDims(c.Raw, dim{"vocab_size", c.VocabSize, MaxVocab}, dim{"n_positions", c.NPositions, MaxPositions},
		dim{"n_embd", c.NEmbd, MaxWidth}, dim{"n_layer", c.NLayer, MaxLayers}, dim{"n_head", c.NHead, MaxWidth},
		dim{"n_inner", c.Inner(), MaxWidth}); err != nil {
		return Footprint{}, err
	}
	E, I, V, P := int64(c.NEmbd), int64(c.Inner()), int64(c.VocabSize), int64(c.NPositions)
	var s shapeSum
	s.add(false, V, E) // wte
	s.add(false, P, E) // wpe
	s.add(false, E)    // ln_f
	s.add(false, E)
	if !c.TieWordEmbeddings {
		s.add(false, V, E)
	}
	for _, sh := range [][]int64{{E}, {E}, {E, 3 * E}, {3 * E}, {E, E}, {E}, {E}, {E}, {E, I}, {I}, {I, E}, {E}} {
		s.add(true, sh...)
	}
	return s.footprint(c.Raw, int64(c.NLayer), Footprint{Layers: int64(c.NLayer), Hidden: E, Intermediate: I,
		Heads: int64(c.NHead), MLPMatrices: 2, Vocab: V, MaxPositions: P}, "n_embd")
}

func llamaFootprint(c *llama.Config) (Footprint, error) {
	if err := checkDims(c.Raw, dim{"vocab_size", c.VocabSize, MaxVocab}, dim{"hidden_size", c.HiddenSize, MaxWidth},
		dim{"intermediate_size", c.IntermediateSize, MaxWidth}, dim{"num_hidden_layers", c.NumHiddenLayers, MaxLayers},
		dim{"num_attention_heads", c.NumAttentionHeads, MaxWidth}, dim{"num_key_value_heads", c.NumKeyValueHeads, MaxWidth},
		dim{"head_dim", c.HeadDim, MaxWidth}, dim{"max_position_embeddings", c.MaxPositionEmbeddings, MaxPositions}); err != nil {
		return Footprint{}, err
	}
	H, I, V := int64(c.HiddenSize), int64(c.IntermediateSize), int64(c.VocabSize)
	q, kv := int64(c.NumAttentionHeads)*int64(c.HeadDim), int64(c.NumKeyValueHeads)*int64(c.HeadDim)
	var s shapeSum
	s.add(false, V, H)
	s.add(false, H)
	if !c.TieWordEmbeddings {
		s.add(false, V, H)
	}
	linear := func(out, in int64, bias bool) {
		s.add(true, out, in)
		if bias {
			s.add(true, out)
		}
	}
	linear(q, H, c.QKVBias())
	linear(kv, H, c.QKVBias())
	linear(kv, H, c.QKVBias())
	linear(H, q, c.OBias())
	linear(I, H, c.MLPBias)
	linear(I, H, c.MLPBias)
	linear(H, I, c.MLPBias)
	s.add(true, H)
	s.add(true, H)
	return s.footprint(c.Raw, int64(c.NumHiddenLayers), Footprint{Layers: int64(c.NumHiddenLayers), Hidden: H,
		Intermediate: I, Heads: int64(c.NumAttentionHeads), MLPMatrices: 3, Vocab: V,
		MaxPositions: int64(c.MaxPositionEmbeddings)}, "hidden_size")
}

func bertFootprint(c *bert.Config) (Footprint, error) {
	if err := checkDims(c.Raw, dim{"vocab_size", c.VocabSize, MaxVocab}, dim{"hidden_size", c.HiddenSize, MaxWidth},
		dim{"num_hidden_layers", c.NumHiddenLayers, MaxLayers}, dim{"num_attention_heads", c.NumAttentionHeads, MaxWidth},
		dim{"intermediate_size", c.IntermediateSize, MaxWidth}, dim{"max_position_embeddings", c.MaxPositionEmbeddings, MaxPositions},
		dim{"type_vocab_size", c.TypeVocabSize, MaxVocab}); err != nil {
		return Footprint{}, err
	}
	if c.NumLabels() > MaxLabels {
		return Footprint{}, fieldError(c.Raw, "num_labels", fmt.Errorf("%w: %d is over gotpu's limit of %d", ErrTooLarge, c.NumLabels(), MaxLabels))
	}
	H, I := int64(c.HiddenSize), int64(c.IntermediateSize)
	var s shapeSum
	for _, rows := range []int{c.VocabSize, c.MaxPositionEmbeddings, c.TypeVocabSize} {
		s.add(false, int64(rows), H)
	}
	s.add(false, H) // embeddings LayerNorm
	s.add(false, H)
	s.add(false, H, H) // pooler
	s.add(false, H)
	labels := int64(0)
	if c.Arch == bert.ForSequenceClassification {
		labels = int64(c.NumLabels())
		if labels > 0 {
			s.add(false, labels, H)
			s.add(false, labels)
		}
	}
	for range 4 { // query, key, value, attention output
		s.add(true, H, H)
		s.add(true, H)
	}
	s.add(true, I, H)
	s.add(true, I)
	s.add(true, H, I)
	s.add(true, H)
	for range 4 { // two LayerNorms
		s.add(true, H)
	}
	return s.footprint(c.Raw, int64(c.NumHiddenLayers), Footprint{Layers: int64(c.NumHiddenLayers), Hidden: H,
		Intermediate: I, Heads: int64(c.NumAttentionHeads), MLPMatrices: 2, Labels: labels,
		MaxPositions: int64(c.MaxPositionEmbeddings)}, "hidden_size")
}

// Activation coefficients, in elements per token per layer (see ActivationBytes).
//
// Calibrated on gotpu's pure-Go backend: GPT-2 shapes (n_embd 256 and 512, 2-4 layers, sequences
// of 64 and 256, vocabularies of 512 to 8192) trained at batch 8-16 peaked (process RSS,
// high-water mark, above the RSS before trainer.New) 4-20% below the trainer's estimate of
// gradients, optimizer state and ActivationBytes.
const (
	actHidden       = 24 // hidden-sized values a block keeps for its backward pass
	actPerMLPMatrix = 3  // intermediate-sized values per MLP matrix (output, activation, gradient)
	actAttention    = 6  // per head and key position: scores, mask, softmax, dropout, gradients
	actLogits       = 3  // float32 logits, log-softmax and their gradient per vocabulary entry
)

// ActivationBytes estimates the activations one pass over batch sequences of seq tokens keeps
// live at its peak, with computeBytes per element (4 for float32, 2 for bfloat16: mixed precision
// halves them; the logits and loss stay float32). ok is false on overflow.
//
// Training (a forward pass whose intermediate values the backward pass reads) keeps, per token
// and per layer, about 24 hidden-sized values (norm inputs and outputs, q/k/v, the attention
// context and projection, residuals, and the gradients of the layer being differentiated), 3
// intermediate-sized values per MLP matrix and 6 per head and key position (attention scores,
// masked scores, probabilities, dropout and their gradients), for every layer plus one, the
// embeddings, and per token 3 float32 values per vocabulary entry for a causal LM's logits and
// loss. Evaluation keeps two layers at a time plus the logits. Known error: training is 4-20%
// above the measured peak on gotpu's pure-Go backend for the shapes above (its fused kernels,
// buffer reuse and the Go heap's slack move it either way); evaluation is a lower
// bound for backends that keep every intermediate; XLA on a PJRT device fuses and
// rematerialises more, so there the estimate is high.
func (f Footprint) ActivationBytes(batch, seq, computeBytes int64, training bool) (int64, bool) {
	var a membudget.Acc
	tokens := a.Mul(batch, seq)
	perToken := a.Add(a.Mul(actHidden, f.Hidden), a.Mul(actPerMLPMatrix, f.MLPMatrices, f.Intermediate),
		a.Mul(actAttention, f.Heads, seq))
	layers := f.Layers + 1
	if !training {
		layers = min(f.Layers, 2)
	}
	body := a.Mul(tokens, perToken, layers, computeBytes)
	embed := a.Mul(tokens, f.Hidden, computeBytes)
	logits := a.Mul(tokens, f.Vocab, actLogits, 4)
	total := a.Add(body, embed, logits, a.Mul(batch, f.Labels, actLogits, 4))
	return total, !a.Overflowed()
}

// dtypeBytes is the size of a variable dtype name as LoadOptions/NewOptions spell it ("" is
// float32); fileDType is the config's torch_dtype, used for "auto".
func dtypeBytes(name, fileDType string) int64 {
	if name == "auto" {
		name = fileDType
	}
	switch strings.ToLower(name) {
	case "bfloat16", "float16", "bf16", "fp16", "half":
		return 2
	case "float64", "double":
		return 4 // loaded as float32
	}
	return 4
}

// ConfigDType is the torch_dtype a config records ("" when unknown): what LoadOptions.DType
// "auto" loads the weights as (gotpu plan resolves --torch_dtype auto with it).
func ConfigDType(cfg Config) string { return configDType(cfg) }

// configDType is the torch_dtype a config records ("" when unknown).
func configDType(cfg Config) string {
	switch c := cfg.(type) {
	case *gpt2.Config:
		return c.DType
	case *llama.Config:
		return c.DType
	case *bert.Config:
		return c.DType
	case *gemma3.Config:
		return c.DType
	case *qwen3.Config:
		return c.DType
	}
	return ""
}

// checkParamMemory refuses to build or load a model whose parameters cannot fit: on the pure-Go
// backend the parameters (params × bytes) plus the host staging of the largest tensor (its
// float32 values and their encoding: 8 bytes an element) must fit in the host's available memory;
// on a PJRT device, whose free memory the runtime does not report, only the host staging is
// checked. what names the operation ("models.New").
func checkParamMemory(rt *xla.Runtime, cfg Config, bytesPer int64, what string, host membudget.Host) error {
	fp, err := EstimateFootprint(cfg)
	if errors.Is(err, ErrUnsupported) {
		return nil // New and Load name the unsupported config themselves
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if rt == nil {
		return fmt.Errorf("%s: nil *xla.Runtime", what)
	}
	if !host.Known {
		return nil
	}
	var a membudget.Acc
	params := a.Mul(fp.Params, bytesPer)
	staging := a.Mul(fp.LargestParam, 8)
	need, part := staging, "staging its largest tensor"
	if rt.Kind() == xla.DeviceGo {
		need, part = a.Add(params, staging), fmt.Sprintf("%d parameters of %d bytes, plus staging", fp.Params, bytesPer)
	}
	if a.Overflowed() || need > host.Available {
		hint := "n_embd/hidden_size, n_layer/num_hidden_layers, vocab_size"
		return fmt.Errorf("%s: %w: this %s needs about %s (%s) but %s are available on the host (%s): "+
			"make it smaller (%s) or use a machine with more memory",
			what, ErrTooLarge, cfg.Architecture(), gib(need, a.Overflowed()), part, membudget.GiB(host.Available), host.Source, hint)
	}
	return nil
}

func gib(b int64, overflow bool) string {
	if overflow {
		return "more than 8 EiB"
	}
	return membudget.GiB(b)
}

// checkLoadMemory parses config.json (refusing absurd dimensions) and checks the parameters it
// implies against memory, before Load maps the weights or allocates anything. The safetensors
// files must hold exactly these tensors (anything else is refused before it is read), so the
// config's parameter count is the byte count Load will allocate, whatever the files' size.
func checkLoadMemory(rt *xla.Runtime, cfgPath string, raw *core.RawConfig, modelType, arch string, opts LoadOptions) error {
	cfg, err := parseTyped(cfgPath, raw, modelType, arch)
	if err != nil {
		return err
	}
	return checkParamMemory(rt, cfg, dtypeBytes(opts.DType, configDType(cfg)), "models.Load: "+cfgPath, membudget.Probe())
}
