package models

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/models/internal/core"
)

// Batch holds one batch of inputs as graph nodes (nil when absent); see core.Batch for each field.
type Batch = core.Batch

// Param is one entry of a model's HF tensor table: HF name, shape, weight-decay group.
type Param = core.Param

// SaveOptions control Model.Save (MaxShardSize, DType).
type SaveOptions = core.SaveOptions

// LoadOptions control Load (DType of the variables).
type LoadOptions = core.LoadOptions

// Config is a parsed config.json that writes itself back with unknown fields kept.
type Config = core.Config

// KVCache and CacheDims describe a causal LM's key/value cache inside a graph.
type (
	KVCache   = core.KVCache
	CacheDims = core.CacheDims
)

// SetComputeDType makes the models' graphs built in g compute with dt (bfloat16) while their
// variables stay float32 master weights: mixed precision. Norms, softmax and losses stay float32.
func SetComputeDType(c *context.Context, g *graph.Graph, dt dtypes.DType) {
	c.InAbsPath("/").SetGraphParam(g, core.ComputeDTypeParam, dt)
}

// DefaultMaxShardSize is save_pretrained's default max_shard_size, 5 GB.
const DefaultMaxShardSize = core.DefaultMaxShardSize

// ParseSize reads HF's max_shard_size spellings ("5GB", "500MiB", or a byte count).
func ParseSize(s string) (int64, error) { return core.ParseSize(s) }

// Model is a Hugging Face model whose parameters live in a GoMLX context.
type Model interface {
	// Architecture is the HF class name, e.g. "GPT2LMHeadModel".
	Architecture() string
	// Config is the parsed config.json; Config().JSON() writes it back.
	Config() Config
	// Context holds one variable per parameter, at a scope mirroring the HF name:
	// "transformer.h.0.attn.c_attn.weight" is variable "weight" in scope "/transformer/h/0/attn/c_attn".
	Context() *context.Context
	// Params lists every parameter in HF's state-dict order with its HF name, shape and HF Trainer's
	// weight-decay group (Param.NoDecay for biases and LayerNorm/RMSNorm weights).
	Params() []Param
	// Forward builds the forward pass into ctx's graph: logits, and HF's loss when b.Labels is set
	// (mean over non-ignored tokens; nil otherwise). ctx must hold the variables (Context() or a
	// context sharing its data). Graph building reports errors by panicking; recover at the API
	// edge with xla.Recover.
	Forward(ctx *context.Context, b Batch) (loss, logits *graph.Node)
	// Save writes an HF model directory: config.json, model.safetensors (or shards plus
	// model.safetensors.index.json above opts.MaxShardSize), and generation_config.json if the model
	// was loaded with one.
	Save(dir string, opts SaveOptions) error
}

// CausalLM is a decoder model that can generate with a KV cache (GPT-2, Llama, Mistral, Qwen2).
type CausalLM interface {
	Model
	// VocabSize is the logits width.
	VocabSize() int
	// MaxPositions is the longest sequence the model supports.
	MaxPositions() int
	// EOSTokenIDs are config.json's eos_token_id values.
	EOSTokenIDs() []int
	// CacheDims describes the per-layer key/value cache.
	CacheDims() CacheDims
	// ForwardCached runs ids [B, T] at positions offset.. (scalar int node) against cache, which it
	// updates, and returns logits [B, T, vocab] (evaluation mode).
	ForwardCached(ctx *context.Context, ids, offset *graph.Node, cache *KVCache) *graph.Node
}

// SequenceClassifier is a model with a classification head.
type SequenceClassifier interface {
	Model
	// NumLabels is the classifier width (HF's num_labels, len(id2label)).
	NumLabels() int
}
