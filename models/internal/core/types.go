package core

import (
	"fmt"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/gotpu/gotpu/hub"
)

// Batch is one batch of model inputs as graph nodes, HF argument names. Nil means absent.
type Batch struct {
	// InputIDs: [batch, seq] token ids (any integer dtype).
	InputIDs *graph.Node
	// AttentionMask: [batch, seq], 1 for real tokens and 0 for padding; nil means all ones.
	AttentionMask *graph.Node
	// TokenTypeIDs: [batch, seq] segment ids (BERT); nil means all zeros.
	TokenTypeIDs *graph.Node
	// PositionIDs: [batch, seq] positions of a packed batch (causal LMs only; a classifier refuses
	// them): each example of a row restarts at 0 and counts up by one (data.CheckPositionIDs), and
	// the model embeds every token at its position and attends block-diagonally, so examples do not
	// see each other (PackedCausalMask). nil means 0..seq-1.
	PositionIDs *graph.Node
	// Labels: causal LMs [batch, seq] token ids, -100 ignored, shifted inside the model as HF does;
	// sequence classification [batch] integer classes, or float targets for regression
	// (num_labels == 1) and [batch, num_labels] floats for multi-label classification.
	Labels *graph.Node
	// Training switches dropout on, with the probabilities from config.json. The fixtures, scoring
	// and generation use Training == false (HF's model.eval()).
	Training bool
	// LabelSmoothing is HF's label_smoothing_factor (0 = off, the plain loss): the loss becomes
	// HF Trainer's LabelSmoother, shifted for causal LMs (CausalLMBatchLoss, ClassificationBatchLoss).
	// It applies in training and evaluation alike, as HF's compute_loss does.
	LabelSmoothing float64
	// NEFTuneAlpha is HF's neftune_noise_alpha (0 = off): uniform noise added to the token
	// embeddings' output in training only (NEFTune).
	NEFTuneAlpha float64
}

// InitKind says how New initialises a parameter (HF's _init_weights distributions).
type InitKind int

const (
	InitNormal InitKind = iota // N(0, Std)
	InitZeros
	InitOnes
)

// Param is one entry of a model's explicit HF tensor table.
type Param struct {
	// Name is the HF tensor name gotpu writes (e.g. "transformer.h.0.attn.c_attn.weight").
	Name string
	// Shape is what the config implies.
	Shape []int
	// NoDecay follows HF Trainer.get_decay_parameter_names: biases and LayerNorm/RMSNorm weights.
	NoDecay bool
	// Init is how a freshly built model initialises it; Std is used by InitNormal.
	Init InitKind
	Std  float64
	// ZeroRow, when >= 0, is an embedding row HF zeroes at init (padding_idx).
	ZeroRow int
}

// Scope is the GoMLX context scope holding the variable: the HF name up to its last dot, with dots
// as scope separators ("/transformer/h/0/attn/c_attn").
func (p Param) Scope() string {
	i := strings.LastIndexByte(p.Name, '.')
	if i < 0 {
		return "/"
	}
	return "/" + strings.ReplaceAll(p.Name[:i], ".", "/")
}

// Var is the variable name inside Scope: the part after the last dot ("weight").
func (p Param) Var() string {
	return p.Name[strings.LastIndexByte(p.Name, '.')+1:]
}

// NumElements is the product of Shape.
func (p Param) NumElements() int {
	n := 1
	for _, d := range p.Shape {
		n *= d
	}
	return n
}

// NewParam is a shorthand for table building.
func NewParam(name string, shape []int, noDecay bool, init InitKind, std float64) Param {
	return Param{Name: name, Shape: shape, NoDecay: noDecay, Init: init, Std: std, ZeroRow: -1}
}

// DefaultMaxShardSize is HF save_pretrained's default max_shard_size ("5GB", decimal).
const DefaultMaxShardSize = 5_000_000_000

// SaveOptions control Save.
type SaveOptions struct {
	// MaxShardSize splits the weights into model-0000i-of-0000N.safetensors files plus
	// model.safetensors.index.json when they exceed it, with HF's semantics (in bytes; 0 means
	// DefaultMaxShardSize). ParseSize reads HF's "5GB"/"500MiB" spellings.
	MaxShardSize int64
	// DType is the dtype written: "" keeps the variables' dtype; "float32", "bfloat16" or "float16"
	// convert (round to nearest even), e.g. to save float32 master weights back as bfloat16.
	DType string
}

// NewOptions control building a randomly initialised model.
type NewOptions struct {
	// Seed of the initialisation stream (PCG): the same seed gives the same weights.
	Seed uint64
	// DType of the variables: "" or "float32", "bfloat16", "float16".
	DType string
}

// LoadOptions control loading a model directory.
type LoadOptions struct {
	// DType of the variables: "" or "float32" converts every weight to float32 (HF transformers 4's
	// default, and float32 master weights for a bf16/f16 file); "auto" keeps the file's dtype
	// (torch_dtype="auto"); "bfloat16" or "float16" convert to that.
	DType string
	// Hub fetches a model named by a Hub repo id (org/name) into the shared Hugging Face cache;
	// nil: a client configured from the environment. A local directory never touches it.
	Hub *hub.Client
	// Revision of a repo id: a branch, tag or commit ("" = "main"; an "@rev" in the id wins).
	Revision string
}

// ParseSize reads a size the way transformers' convert_file_size_to_int does: an integer number of
// bytes, or an integer followed by GiB/MiB/KiB (powers of 2), GB/MB/KB (powers of 10), or
// Gb/Mb/Kb (powers of 10, bits: divided by 8).
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	var n int64
	if _, err := fmt.Sscan(s, &n); err == nil && fmt.Sprint(n) == s {
		if n <= 0 {
			return 0, fmt.Errorf("size %q must be positive", s)
		}
		return n, nil
	}
	units := []struct {
		suffix string
		mult   int64
		bits   bool
	}{
		{"GIB", 1 << 30, false}, {"MIB", 1 << 20, false}, {"KIB", 1 << 10, false},
		{"GB", 1e9, false}, {"MB", 1e6, false}, {"KB", 1e3, false},
	}
	up := strings.ToUpper(s)
	for _, u := range units {
		if !strings.HasSuffix(up, u.suffix) {
			continue
		}
		num := s[:len(s)-len(u.suffix)]
		var v int64
		if _, err := fmt.Sscan(num, &v); err != nil || fmt.Sprint(v) != num || v <= 0 {
			break
		}
		size := v * u.mult
		if !strings.HasSuffix(u.suffix, "IB") && strings.HasSuffix(s, "b") {
			size /= 8 // "5Gb": gigabits, as HF reads a lowercase b.
		}
		return size, nil
	}
	return 0, fmt.Errorf("size %q is not in a valid format: use an integer number of bytes or an integer "+
		"followed by a unit, e.g. 5GB or 500MiB", s)
}
