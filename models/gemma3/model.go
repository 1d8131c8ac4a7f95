package gemma3

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/x448/float16"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/xla"
)

// Model is a Gemma3ForCausalLM whose parameters live in a GoMLX context.
type Model struct {
	*core.Base
	Cfg *Config
}

// Config returns the model's config.
func (m *Model) Config() core.Config { return m.Cfg }

// NewOptions control New (Seed, DType).
type NewOptions = core.NewOptions

// New builds a randomly initialised model (HF's _init_weights distributions: N(0,
// initializer_range) matrices, the padding_idx embedding row zeroed, RMSNorm weights 0) for cfg.
func New(ctx context.Context, rt *xla.Runtime, cfg *Config, opts NewOptions) (m *Model, err error) {
	defer xla.Recover(&err, "gemma3.New")
	base, err := core.NewRandomBase(ctx, rt, "gemma3", cfg, Table(cfg), opts)
	if err != nil {
		return nil, err
	}
	return &Model{Base: base, Cfg: cfg}, nil
}

// Load reads a Gemma3ForCausalLM directory, or the language model of a
// Gemma3ForConditionalGeneration directory (see LoadRaw).
func Load(ctx context.Context, rt *xla.Runtime, dir string, opts core.LoadOptions) (*Model, error) {
	raw, err := core.ReadRawConfig(filepath.Join(dir, core.ConfigFile))
	if err != nil {
		return nil, err
	}
	return LoadRaw(ctx, rt, dir, raw, opts)
}

// LoadRaw is Load with config.json already read. A model_type "gemma3" directory
// (Gemma3ForConditionalGeneration) loads as the Gemma3ForCausalLM of its text_config: the language
// model's tensors are renamed from either prefix transformers has used, the vision tower and the
// multimodal projector are dropped (logged), and Save writes a text-only Gemma3ForCausalLM
// directory.
func LoadRaw(ctx context.Context, rt *xla.Runtime, dir string, raw *core.RawConfig, opts core.LoadOptions) (m *Model, err error) {
	defer xla.Recover(&err, "gemma3.Load")
	var mt string
	if err := raw.String("model_type", &mt); err != nil {
		return nil, err
	}
	var cfg *Config
	arch := Architecture
	if mt == TypeMultimodal {
		arch = ArchitectureMultimodal
		cfg, err = ParseMultimodalConfig(raw)
		if err == nil {
			slog.InfoContext(ctx, "gotpu: loading the language model of a "+ArchitectureMultimodal+" checkpoint as "+Architecture, "dir", dir)
		}
	} else {
		cfg, err = ParseConfig(raw)
	}
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, err
	}
	base, err := core.LoadDir(ctx, rt, dir, cfg, mapping(cfg, arch), opts)
	if err != nil {
		return nil, err
	}
	return &Model{Base: base, Cfg: cfg}, nil
}

// Forward builds the causal LM forward pass: logits [B, T, vocab] (soft-capped when
// final_logit_softcapping is set) and, with labels, HF's ForCausalLMLoss (shifted, -100 ignored,
// mean; label-smoothed with b.LabelSmoothing). Training with b.NEFTuneAlpha adds NEFTune's noise to
// the scaled token embeddings.
func (m *Model) Forward(c *mlctx.Context, b core.Batch) (loss, logits *Node) {
	if b.InputIDs == nil {
		panic(fmt.Errorf("gemma3.Forward: Batch.InputIDs is nil"))
	}
	logits = m.head(c, m.body(c, b.InputIDs, b.AttentionMask, b.PositionIDs, b.Training, b.NEFTuneAlpha, nil, nil))
	if b.Labels != nil {
		loss = core.CausalLMBatchLoss(logits, b)
	}
	return loss, logits
}

// CacheDims describes the KV cache: num_key_value_heads heads of head_dim per layer. The cache
// holds every position; sliding_attention layers mask keys outside their window by absolute
// position, so decoding past the window is exact.
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
func (m *Model) ForwardCached(c *mlctx.Context, ids, offset *Node, cache *core.KVCache) *Node {
	return m.head(c, m.body(c, ids, nil, nil, false, 0, offset, cache))
}

// head is lm_head (the embedding when tied, never scaled by sqrt(hidden_size)), then
// final-logit soft-capping when configured.
func (m *Model) head(c *mlctx.Context, h *Node) *Node {
	name := "lm_head.weight"
	if m.Cfg.TieWordEmbeddings {
		name = "model.embed_tokens.weight"
	}
	logits := core.Linear(h, core.Weight(c, h.Graph(), name), nil)
	if softcap := m.Cfg.FinalLogitSoftcapping; softcap != nil {
		logits = MulScalar(Tanh(DivScalar(logits, *softcap)), *softcap)
	}
	return logits
}

// EmbedScale is sqrt(hidden_size) as HF applies it: a float32 buffer cast to the weights' dtype.
func EmbedScale(hidden int, weights dtypes.DType) float32 {
	s := float32(math.Sqrt(float64(hidden)))
	switch weights {
	case dtypes.BFloat16:
		s = math.Float32frombits(uint32(safetensors.Float32ToBF16Bits(s)) << 16) // nearest, ties to even, as torch
	case dtypes.Float16:
		s = float16.Fromfloat32(s).Float32()
	}
	return s
}

// embed is Gemma3TextScaledWordEmbedding: rows of embed_tokens times EmbedScale. The padding_idx
// row gets no gradient from the lookup (nn.Embedding's padding_idx): its value passes through a
// StopGradient; a tied head still trains it.
func (m *Model) embed(c *mlctx.Context, ids *Node) *Node {
	g := ids.Graph()
	const name = "model.embed_tokens.weight"
	table := core.Weight(c, g, name)
	p := core.Param{Name: name}
	varDT := table.DType()
	if v := c.GetVariableByScopeAndName(p.Scope(), p.Var()); v != nil {
		varDT = v.Shape().DType
	}
	x := core.Embed(table, ids)
	if pad := m.Cfg.PaddingIdx(); pad >= 0 {
		isPad := Equal(ConvertDType(ids, dtypes.Int32), Scalar(g, dtypes.Int32, pad))
		isPad = BroadcastToDims(ExpandAxes(isPad, -1), x.Shape().Dimensions...)
		x = Where(isPad, StopGradient(x), x)
	}
	scale := EmbedScale(m.Cfg.HiddenSize, varDT)
	if x.DType() == varDT {
		return Mul(x, Scalar(g, x.DType(), scale))
	}
	// Mixed precision (float32 weights, half compute): HF multiplies the float32 lookup by the
	// float32 scale; round once afterwards.
	return ConvertDType(Mul(ConvertDType(x, dtypes.Float32), Scalar(g, dtypes.Float32, scale)), x.DType())
}

// rmsNorm is Gemma3RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w), all in float32, cast back to
// x's dtype at the end.
func rmsNorm(x, w *Node, eps float64) *Node {
	dt := x.DType()
	xf := x
	if dt != dtypes.Float32 && dt != dtypes.Float64 {
		xf = ConvertDType(x, dtypes.Float32)
	}
	variance := ReduceAndKeep(Square(xf), ReduceMean, -1)
	// Rsqrt has no gradient in GoMLX v0.26.0; dividing by the square root is the same to an ulp.
	y := Div(xf, Sqrt(AddScalar(variance, eps)))
	wf := w
	if w.DType() != xf.DType() {
		wf = ConvertDType(w, xf.DType())
	}
	y = Mul(y, OnePlus(ExpandLeftToRank(wf, y.Rank())))
	if y.DType() != dt {
		y = ConvertDType(y, dt)
	}
	return y
}

// body is Gemma3TextModel: scaled embeddings, decoder layers (sandwich norms, q/k norms,
// per-layer-type RoPE and window), final norm. positionIDs (a packed batch) rotate each token at
// its own example's position with both the local and the global base, and make attention
// block-diagonal; sliding windows still apply within an example.
func (m *Model) body(c *mlctx.Context, ids, mask, positionIDs *Node, training bool, neftune float64, offset *Node, cache *core.KVCache) *Node {
	cfg := m.Cfg
	g := ids.Graph()
	w := func(name string) *Node { return core.Weight(c, g, name) }
	bias := func(name string) *Node {
		if !cfg.AttentionBias {
			return nil
		}
		return w(name)
	}
	dims := ids.Shape().Dimensions
	if len(dims) != 2 {
		panic(fmt.Errorf("gemma3: input_ids must be [batch, seq], got %v", ids.Shape()))
	}
	B, T := dims[0], dims[1]
	// NEFTune sees Gemma3TextScaledWordEmbedding's output: the embedding already scaled.
	x := core.NEFTune(c, m.embed(c, ids), neftune, training)
	pos := core.Positions(ids, offset, positionIDs)
	S := T
	if cache != nil {
		S = cache.K[0].Shape().Dim(1)
	}
	type cs struct{ cos, sin *Node }
	ropes := map[Rope]cs{}
	ropeFor := func(r Rope) (*Node, *Node) {
		if e, ok := ropes[r]; ok {
			return e.cos, e.sin
		}
		cos, sin := rotary(g, r, cfg.HeadDim, pos, x.DType())
		ropes[r] = cs{cos, sin}
		return cos, sin
	}
	masks := map[int]*Node{}
	maskFor := func(window int) *Node {
		if mk, ok := masks[window]; ok {
			return mk
		}
		masks[window] = core.AttentionMask(g, B, T, S, offset, mask, positionIDs, window)
		return masks[window]
	}
	act, err := core.Activation(cfg.HiddenActivation)
	if err != nil {
		panic(err)
	}
	nh, kv, hd, eps := cfg.NumAttentionHeads, cfg.NumKeyValueHeads, cfg.HeadDim, cfg.RMSNormEps
	scale := math.Pow(cfg.QueryPreAttnScalar, -0.5)
	for i := range cfg.NumHiddenLayers {
		// One Gemma3DecoderLayer, the unit HF's gradient_checkpointing recomputes (core.RecomputedLayer).
		x = core.RecomputedLayer(c, x, func(x *Node) *Node {
			p := fmt.Sprintf("model.layers.%d.", i)
			a := rmsNorm(x, w(p+"input_layernorm.weight"), eps)
			q := core.Heads(core.Proj(c, p+"self_attn.q_proj", a, w(p+"self_attn.q_proj.weight"), bias(p+"self_attn.q_proj.bias")), nh, hd)
			k := core.Heads(core.Proj(c, p+"self_attn.k_proj", a, w(p+"self_attn.k_proj.weight"), bias(p+"self_attn.k_proj.bias")), kv, hd)
			v := core.Heads(core.Proj(c, p+"self_attn.v_proj", a, w(p+"self_attn.v_proj.weight"), bias(p+"self_attn.v_proj.bias")), kv, hd)
			q = rmsNorm(q, w(p+"self_attn.q_norm.weight"), eps)
			k = rmsNorm(k, w(p+"self_attn.k_norm.weight"), eps)
			cos, sin := ropeFor(cfg.RopeOf(i))
			q, k = applyRotary(q, cos, sin), applyRotary(k, cos, sin)
			if cache != nil {
				k, v = cache.UpdateCache(i, k, v, offset)
			}
			// attn_logit_softcapping is deliberately not applied: HF's Gemma3Attention never passes it.
			att := core.Attention(c, q, k, v, core.AttentionOpts{
				ScaleMul: scale, Allowed: maskFor(cfg.Window(i)), DropP: cfg.AttentionDropout, Training: training,
			})
			o := core.Proj(c, p+"self_attn.o_proj", att, w(p+"self_attn.o_proj.weight"), bias(p+"self_attn.o_proj.bias"))
			x = Add(x, rmsNorm(o, w(p+"post_attention_layernorm.weight"), eps))
			f := rmsNorm(x, w(p+"pre_feedforward_layernorm.weight"), eps)
			gate := act(core.Proj(c, p+"mlp.gate_proj", f, w(p+"mlp.gate_proj.weight"), nil))
			up := core.Proj(c, p+"mlp.up_proj", f, w(p+"mlp.up_proj.weight"), nil)
			mlp := core.Proj(c, p+"mlp.down_proj", Mul(gate, up), w(p+"mlp.down_proj.weight"), nil)
			x = Add(x, rmsNorm(mlp, w(p+"post_feedforward_layernorm.weight"), eps))
			return x
		})
	}
	return rmsNorm(x, w("model.norm.weight"), eps)
}
