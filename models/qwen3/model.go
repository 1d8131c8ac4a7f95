package qwen3

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/xla"
)

// Model is a Qwen3ForCausalLM whose parameters live in a GoMLX context.
type Model struct {
	*core.Base
	Cfg *Config
}

// Config returns the model's config.
func (m *Model) Config() core.Config { return m.Cfg }

// NewOptions control New (Seed, DType).
type NewOptions = core.NewOptions

// New builds a randomly initialised model (HF's _init_weights distributions: linear and embedding
// weights N(0, initializer_range) with the padding row zeroed, biases 0, every RMSNorm weight 1,
// q_norm/k_norm included) for cfg.
func New(ctx context.Context, rt *xla.Runtime, cfg *Config, opts NewOptions) (m *Model, err error) {
	defer xla.Recover(&err, "qwen3.New")
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, err := core.NewRandomBase(ctx, rt, "qwen3", cfg, Table(cfg), opts)
	if err != nil {
		return nil, err
	}
	return &Model{Base: base, Cfg: cfg}, nil
}

// Load reads a Qwen3ForCausalLM model directory.
func Load(ctx context.Context, rt *xla.Runtime, dir string, opts core.LoadOptions) (*Model, error) {
	raw, err := core.ReadRawConfig(filepath.Join(dir, core.ConfigFile))
	if err != nil {
		return nil, err
	}
	return LoadRaw(ctx, rt, dir, raw, opts)
}

// LoadRaw is Load with config.json already read.
func LoadRaw(ctx context.Context, rt *xla.Runtime, dir string, raw *core.RawConfig, opts core.LoadOptions) (m *Model, err error) {
	defer xla.Recover(&err, "qwen3.Load")
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

// Forward builds the causal LM forward pass: logits [B, T, vocab] and, with labels, HF's
// ForCausalLMLoss (shifted, -100 ignored, mean; label-smoothed with b.LabelSmoothing). Training
// with b.NEFTuneAlpha adds NEFTune's noise to the token embeddings.
func (m *Model) Forward(c *mlctx.Context, b core.Batch) (loss, logits *Node) {
	if b.InputIDs == nil {
		panic(fmt.Errorf("qwen3.Forward: Batch.InputIDs is nil"))
	}
	h := m.body(c, b.InputIDs, b.AttentionMask, b.PositionIDs, b.Training, b.NEFTuneAlpha, nil, nil)
	logits = m.head(c, h)
	if b.Labels != nil {
		loss = core.CausalLMBatchLoss(logits, b)
	}
	return loss, logits
}

// CacheDims describes the KV cache: num_key_value_heads heads of head_dim per layer.
func (m *Model) CacheDims() core.CacheDims {
	return core.CacheDims{Layers: m.Cfg.NumHiddenLayers, KVHeads: m.Cfg.NumKeyValueHeads, HeadDim: m.Cfg.HeadDim}
}

// MaxPositions is max_position_embeddings.
func (m *Model) MaxPositions() int { return m.Cfg.MaxPositionEmbeddings }

// LinearLayers lists the torch.nn.Linear layers a LoRA adapter may target, in state-dict order
// (each built with core.Proj, which adds an attached adapter's branch).
func (m *Model) LinearLayers() []core.LinearLayer {
	return core.LinearLayersOf(m.Table, false, "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")
}

// VocabSize is the logits width.
func (m *Model) VocabSize() int { return m.Cfg.VocabSize }

// EOSTokenIDs are the config's eos_token_id values.
func (m *Model) EOSTokenIDs() []int { return m.Cfg.EOSTokenID }

// ForwardCached runs ids [B, T] at positions offset.. against cache (updated) and returns logits.
// Sliding-window layers mask keys further back than their window, so generation past the window
// attends exactly as a full recomputation does.
func (m *Model) ForwardCached(c *mlctx.Context, ids, offset *Node, cache *core.KVCache) *Node {
	return m.head(c, m.body(c, ids, nil, nil, false, 0, offset, cache))
}

func (m *Model) head(c *mlctx.Context, h *Node) *Node {
	name := "lm_head.weight"
	if m.Cfg.TieWordEmbeddings {
		name = "model.embed_tokens.weight"
	}
	return core.Linear(h, core.Weight(c, h.Graph(), name), nil)
}

// embed looks the tokens up. nn.Embedding's padding_idx row (pad_token_id) gets no gradient from
// the lookup, as in PyTorch; the forward values are unchanged.
func (m *Model) embed(table, ids *Node) *Node {
	x := core.Embed(table, ids)
	pad := m.Cfg.PadTokenID
	if pad == nil || *pad < 0 || *pad >= m.Cfg.VocabSize {
		return x
	}
	ids32 := ConvertDType(ids, dtypes.Int32)
	isPad := Equal(ids32, Scalar(ids.Graph(), dtypes.Int32, *pad))
	isPad = BroadcastToDims(ExpandAxes(isPad, -1), x.Shape().Dimensions...)
	return Where(isPad, StopGradient(x), x)
}

// body is Qwen3Model: embeddings, decoder layers (q_norm/k_norm before RoPE), final RMSNorm.
// positionIDs (a packed batch) rotate each token at its own example's position and make attention
// block-diagonal; sliding windows still apply within an example.
func (m *Model) body(c *mlctx.Context, ids, mask, positionIDs *Node, training bool, neftune float64, offset *Node, cache *core.KVCache) *Node {
	cfg := m.Cfg
	g := ids.Graph()
	w := func(name string) *Node { return core.Weight(c, g, name) }
	opt := func(name string) *Node {
		if !cfg.AttentionBias {
			return nil
		}
		return w(name)
	}
	dims := ids.Shape().Dimensions
	if len(dims) != 2 {
		panic(fmt.Errorf("qwen3: input_ids must be [batch, seq], got %v", ids.Shape()))
	}
	B, T := dims[0], dims[1]
	x := core.NEFTune(c, m.embed(w("model.embed_tokens.weight"), ids), neftune, training)
	cos, sin := rotary(g, cfg, core.Positions(ids, offset, positionIDs), x.DType())
	S := T
	if cache != nil {
		S = cache.K[0].Shape().Dim(1)
	}
	masks := map[int]*Node{}
	maskFor := func(window int) *Node {
		if mk, ok := masks[window]; ok {
			return mk
		}
		masks[window] = core.AttentionMask(g, B, T, S, offset, mask, positionIDs, window)
		return masks[window]
	}
	act, err := core.Activation(cfg.HiddenAct)
	if err != nil {
		panic(err)
	}
	windows := cfg.layerWindows
	if len(windows) != cfg.NumHiddenLayers {
		panic(fmt.Errorf("qwen3: config not validated (%d layer windows for %d layers)", len(windows), cfg.NumHiddenLayers))
	}
	nh, kv, hd := cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim
	eps := cfg.RMSNormEps
	for i := range cfg.NumHiddenLayers {
		// One Qwen3DecoderLayer, the unit HF's gradient_checkpointing recomputes (core.RecomputedLayer).
		x = core.RecomputedLayer(c, x, func(x *Node) *Node {
			p := fmt.Sprintf("model.layers.%d.", i)
			a := core.RMSNorm(x, w(p+"input_layernorm.weight"), eps)
			q := core.Heads(core.Proj(c, p+"self_attn.q_proj", a, w(p+"self_attn.q_proj.weight"), opt(p+"self_attn.q_proj.bias")), nh, hd)
			k := core.Heads(core.Proj(c, p+"self_attn.k_proj", a, w(p+"self_attn.k_proj.weight"), opt(p+"self_attn.k_proj.bias")), kv, hd)
			v := core.Heads(core.Proj(c, p+"self_attn.v_proj", a, w(p+"self_attn.v_proj.weight"), opt(p+"self_attn.v_proj.bias")), kv, hd)
			// Qwen3's per-head RMSNorm: one [head_dim] weight shared by every head, over each head's
			// last axis, before the rotary embedding.
			q = core.RMSNorm(q, w(p+"self_attn.q_norm.weight"), eps)
			k = core.RMSNorm(k, w(p+"self_attn.k_norm.weight"), eps)
			q, k = applyRotary(q, cos, sin), applyRotary(k, cos, sin)
			if cache != nil {
				k, v = cache.UpdateCache(i, k, v, offset)
			}
			att := core.Attention(c, q, k, v, core.AttentionOpts{
				ScaleMul: math.Pow(float64(hd), -0.5), Allowed: maskFor(windows[i]),
				DropP: cfg.AttentionDropout, Training: training,
			})
			x = Add(x, core.Proj(c, p+"self_attn.o_proj", att, w(p+"self_attn.o_proj.weight"), opt(p+"self_attn.o_proj.bias")))
			f := core.RMSNorm(x, w(p+"post_attention_layernorm.weight"), eps)
			gate := act(core.Proj(c, p+"mlp.gate_proj", f, w(p+"mlp.gate_proj.weight"), nil))
			up := core.Proj(c, p+"mlp.up_proj", f, w(p+"mlp.up_proj.weight"), nil)
			x = Add(x, core.Proj(c, p+"mlp.down_proj", Mul(gate, up), w(p+"mlp.down_proj.weight"), nil))
			return x
		})
	}
	return core.RMSNorm(x, w("model.norm.weight"), eps)
}
