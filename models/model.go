package models

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/internal/safetensors"
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

// FileDTypeOf maps a GoMLX floating-point dtype (float32, bfloat16, float16) to its safetensors
// spelling; ok is false for any other.
func FileDTypeOf(d dtypes.DType) (st safetensors.DType, ok bool) { return core.FileDTypeOf(d) }

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

// LinearLayer is one linear module (torch.nn.Linear or GPT-2's Conv1D) a LoRA adapter may target.
type LinearLayer = core.LinearLayer

// Adaptable is a model whose linear layers accept LoRA adapters (models/peft): every architecture
// here implements it.
type Adaptable interface {
	Model
	// LinearLayers lists the linear modules in state-dict order, by in-model HF name
	// ("model.layers.0.self_attn.q_proj", "transformer.h.0.attn.c_attn").
	LinearLayers() []LinearLayer
}

// Frozen is a model whose context holds variables that training reads but never changes: the base
// weights under a LoRA adapter. The training step takes no gradients of them, keeps no optimizer
// state for them and leaves them out of checkpoints, which hold only what Params lists (and the
// RNG state).
type Frozen interface {
	Model
	// FrozenParams lists the frozen parameters (Params lists the trained ones).
	FrozenParams() []Param
}

// SavedForm names the two files a model's checkpoints hold its trained weights and its config in,
// when they are not config.json and model.safetensors: a PEFT adapter's are adapter_config.json
// and adapter_model.safetensors (its tensors keyed by Params' names).
type SavedForm interface {
	Model
	// SavedFiles are the weights file and the config file names.
	SavedFiles() (weights, config string)
	// SavedConfig is the config file's content.
	SavedConfig() ([]byte, error)
}

// SavedFiles returns the weights file, config file and config content a checkpoint of m holds:
// SavedForm's, or model.safetensors and config.json.
func SavedFiles(m Model) (weights, config string, cfg []byte, err error) {
	if s, ok := m.(SavedForm); ok {
		weights, config = s.SavedFiles()
		cfg, err = s.SavedConfig()
		return weights, config, cfg, err
	}
	cfg, err = m.Config().JSON()
	return core.WeightsFile, core.ConfigFile, cfg, err
}
