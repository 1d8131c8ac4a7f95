package gpt2

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads better unqualified.
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/xla"
)

// Model is a GPT2LMHeadModel whose parameters live in a GoMLX context.
type Model struct {
	*core.Base
	Cfg *Config
}

// Config returns the model's config.
func (m *Model) Config() core.Config { return m.Cfg }

// NewOptions control New (Seed, DType).
type NewOptions = core.NewOptions

// New builds a randomly initialised GPT2LMHeadModel (HF's _init_weights distributions) for cfg.
func New(ctx context.Context, rt *xla.Runtime, cfg *Config, opts NewOptions) (m *Model, err error) {
	defer xla.Recover(&err, "gpt2.New")
	base, err := core.NewRandomBase(ctx, rt, "gpt2", cfg, Table(cfg), opts)
	if err != nil {
		return nil, err
	}
	return &Model{Base: base, Cfg: cfg}, nil
}

// Load reads a GPT-2 model directory (config.json and safetensors weights).
func Load(ctx context.Context, rt *xla.Runtime, dir string, opts core.LoadOptions) (*Model, error) {
	raw, err := core.ReadRawConfig(filepath.Join(dir, core.ConfigFile))
	if err != nil {
		return nil, err
	}
	return LoadRaw(ctx, rt, dir, raw, opts)
}

// LoadRaw is Load with config.json already read.
func LoadRaw(ctx context.Context, rt *xla.Runtime, dir string, raw *core.RawConfig, opts core.LoadOptions) (m *Model, err error) {
	defer xla.Recover(&err, "gpt2.Load")
	cfg, err := ParseConfig(raw)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	base, err := core.LoadDir(ctx, rt, dir, cfg, mapping(cfg), opts)
	if err != nil {
		return nil, err
	}
	return &Model{Base: base, Cfg: cfg}, nil
}

// Forward builds GPT2LMHeadModel's forward pass: logits [B, T, vocab] and, when b.Labels is set,
// HF's loss (labels shifted inside, -100 ignored, mean over the rest; label-smoothed when
// b.LabelSmoothing is set, NEFTune noise on wte's output when b.NEFTuneAlpha is and training).
// Building panics on bad input shapes; callers recover at their API edge (xla.Recover).
func (m *Model) Forward(c *mlctx.Context, b core.Batch) (loss, logits *Node) {
	if b.InputIDs == nil {
		panic(fmt.Errorf("gpt2.Forward: Batch.InputIDs is nil"))
	}
	h, _ := m.body(c, b.InputIDs, b.AttentionMask, b.PositionIDs, b.Training, b.NEFTuneAlpha, nil, nil)
	logits = m.head(c, h)
	if b.Labels != nil {
		loss = core.CausalLMBatchLoss(logits, b)
	}
	return loss, logits
}

// CacheDims implements the decoding interface: per layer, n_head heads of n_embd/n_head.
func (m *Model) CacheDims() core.CacheDims {
	return core.CacheDims{Layers: m.Cfg.NLayer, KVHeads: m.Cfg.NHead, HeadDim: m.Cfg.HeadDim()}
}

// MaxPositions is n_positions: the longest sequence the learned position table covers.
func (m *Model) MaxPositions() int { return m.Cfg.NPositions }

// LinearLayers lists the transformers Conv1D layers a LoRA adapter may target, in state-dict order
// (each built with core.ConvProj, which adds an attached adapter's branch).
func (m *Model) LinearLayers() []core.LinearLayer {
	return core.LinearLayersOf(m.Table, true, "attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
}

// VocabSize is the logits width.
func (m *Model) VocabSize() int { return m.Cfg.VocabSize }

// EOSTokenIDs are the config's eos_token_id values.
func (m *Model) EOSTokenIDs() []int { return m.Cfg.EOSTokenID }

// ForwardCached runs ids [B, T] at positions offset..offset+T-1 against cache (updated in place and
// returned) and returns their logits [B, T, vocab]. Evaluation mode (no dropout).
func (m *Model) ForwardCached(c *mlctx.Context, ids, offset *Node, cache *core.KVCache) *Node {
	h, _ := m.body(c, ids, nil, nil, false, 0, offset, cache)
	return m.head(c, h)
}

func (m *Model) head(c *mlctx.Context, h *Node) *Node {
	g := h.Graph()
	if m.Cfg.TieWordEmbeddings {
		return core.Linear(h, core.Weight(c, g, prefix+"wte.weight"), nil)
	}
	return core.Linear(h, core.Weight(c, g, "lm_head.weight"), nil)
}

// body is GPT2Model: embeddings, blocks, final LayerNorm. With a cache, keys/values are written at
// offset and attention spans the whole cache (the causal mask hides unwritten entries).
// positionIDs (a packed batch) read wpe at each token's own example position (they are below T,
// data.CheckPositionIDs) and make attention block-diagonal.
func (m *Model) body(c *mlctx.Context, ids, mask, positionIDs *Node, training bool, neftune float64, offset *Node, cache *core.KVCache) (*Node, *core.KVCache) {
	cfg := m.Cfg
	g := ids.Graph()
	w := func(name string) *Node { return core.Weight(c, g, prefix+name) }
	dims := ids.Shape().Dimensions
	if len(dims) != 2 {
		panic(fmt.Errorf("gpt2: input_ids must be [batch, seq], got %v", ids.Shape()))
	}
	B, T := dims[0], dims[1]
	if T > cfg.NPositions {
		panic(fmt.Errorf("gpt2: sequence length %d exceeds n_positions %d", T, cfg.NPositions))
	}
	pos := core.Positions(ids, offset, positionIDs)
	// NEFTune's hook is on get_input_embeddings() (wte), before the position embedding is added.
	tok := core.NEFTune(c, core.Embed(w("wte.weight"), ids), neftune, training)
	x := Add(tok, core.Embed(w("wpe.weight"), pos))
	x = core.Dropout(c, x, cfg.EmbdPdrop, training)

	S := T
	if cache != nil {
		S = cache.K[0].Shape().Dim(1)
	}
	var keyMask *Node
	if mask != nil {
		keyMask = mask
	}
	allowed := core.AttentionMask(g, B, T, S, offset, keyMask, positionIDs, 0)
	act, err := core.Activation(cfg.ActivationFunction)
	if err != nil {
		panic(err)
	}
	E, H, D := cfg.NEmbd, cfg.NHead, cfg.HeadDim()
	for i := range cfg.NLayer {
		// One GPT2Block, the unit HF's gradient_checkpointing recomputes (core.RecomputedLayer).
		x = core.RecomputedLayer(c, x, func(x *Node) *Node {
			l := fmt.Sprintf("h.%d.", i)
			a := core.LayerNorm(x, w(l+"ln_1.weight"), w(l+"ln_1.bias"), cfg.LayerNormEpsilon)
			qkv := core.ConvProj(c, prefix+l+"attn.c_attn", a, w(l+"attn.c_attn.weight"), w(l+"attn.c_attn.bias"))
			parts := core.SplitLast(qkv, 3)
			q, k, v := core.Heads(parts[0], H, D), core.Heads(parts[1], H, D), core.Heads(parts[2], H, D)
			if cache != nil {
				k, v = cache.UpdateCache(i, k, v, offset)
			}
			div := 1.0
			if cfg.ScaleAttnWeights {
				div = math.Sqrt(float64(D))
			}
			if cfg.ScaleAttnByInverseLayerIdx {
				div *= float64(i + 1)
			}
			att := core.Attention(c, q, k, v, core.AttentionOpts{ScaleDiv: div, Allowed: allowed, DropP: cfg.AttnPdrop, Training: training})
			att = core.ConvProj(c, prefix+l+"attn.c_proj", att, w(l+"attn.c_proj.weight"), w(l+"attn.c_proj.bias"))
			x = Add(x, core.Dropout(c, att, cfg.ResidPdrop, training))
			f := core.LayerNorm(x, w(l+"ln_2.weight"), w(l+"ln_2.bias"), cfg.LayerNormEpsilon)
			f = act(core.ConvProj(c, prefix+l+"mlp.c_fc", f, w(l+"mlp.c_fc.weight"), w(l+"mlp.c_fc.bias")))
			f = core.ConvProj(c, prefix+l+"mlp.c_proj", f, w(l+"mlp.c_proj.weight"), w(l+"mlp.c_proj.bias"))
			x = Add(x, core.Dropout(c, f, cfg.ResidPdrop, training))
			return x
		})
	}
	_ = E
	return core.LayerNorm(x, w("ln_f.weight"), w("ln_f.bias"), cfg.LayerNormEpsilon), cache
}
