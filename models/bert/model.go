package bert

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/pkg/core/shapes"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/xla"
)

// Model is a BertForSequenceClassification or a bare BertModel.
type Model struct {
	*core.Base
	Cfg *Config
}

// Config returns the model's config.
func (m *Model) Config() core.Config { return m.Cfg }

// NumLabels is the classifier width (0 for the bare encoder).
func (m *Model) NumLabels() int {
	if m.Cfg.Arch == BareModel {
		return 0
	}
	return m.Cfg.NumLabels()
}

// NewOptions control New (Seed, DType).
type NewOptions = core.NewOptions

// New builds a randomly initialised model (HF's _init_weights distributions) for cfg.
func New(ctx context.Context, rt *xla.Runtime, cfg *Config, opts NewOptions) (m *Model, err error) {
	defer xla.Recover(&err, "bert.New")
	base, err := core.NewRandomBase(ctx, rt, "bert", cfg, Table(cfg), opts)
	if err != nil {
		return nil, err
	}
	return &Model{Base: base, Cfg: cfg}, nil
}

// Load reads a BERT model directory as arch (ForSequenceClassification or BareModel; "" takes
// config.json's architectures).
func Load(ctx context.Context, rt *xla.Runtime, dir, arch string, opts core.LoadOptions) (*Model, error) {
	raw, err := core.ReadRawConfig(filepath.Join(dir, core.ConfigFile))
	if err != nil {
		return nil, err
	}
	if arch == "" {
		var archs []string
		if _, err := raw.Get("architectures", &archs); err != nil {
			return nil, err
		}
		arch = ForSequenceClassification
		if len(archs) > 0 {
			arch = archs[0]
		}
	}
	return LoadRaw(ctx, rt, dir, raw, arch, opts)
}

// LoadRaw is Load with config.json already read.
func LoadRaw(ctx context.Context, rt *xla.Runtime, dir string, raw *core.RawConfig, arch string, opts core.LoadOptions) (m *Model, err error) {
	defer xla.Recover(&err, "bert.Load")
	cfg, err := ParseConfig(raw, arch)
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

// Forward builds the forward pass. For BertForSequenceClassification, logits are [B, num_labels]
// and the loss follows problem_type (regression for one label, cross-entropy for integer labels,
// BCE for multi-label). For the bare BertModel, "logits" is last_hidden_state [B, T, hidden] and
// loss is nil.
func (m *Model) Forward(c *mlctx.Context, b core.Batch) (loss, logits *Node) {
	if b.InputIDs == nil {
		panic(fmt.Errorf("bert.Forward: Batch.InputIDs is nil"))
	}
	if b.PositionIDs != nil {
		// Packing (position ids restarting per example) belongs to causal LM fine-tuning; a
		// bidirectional classifier would need its own per-example mask and pooling of each example.
		panic(fmt.Errorf("bert.Forward: Batch.PositionIDs is set (packed sequences), but BERT is a bidirectional " +
			"encoder, not a causal language model: packing is for causal LMs; collate BERT's examples unpacked"))
	}
	h := m.hidden(c, b)
	if m.Cfg.Arch == BareModel {
		// No pooler here: the pure-Go backend fails on graphs with unused nodes.
		return nil, h
	}
	pooled := m.pool(c, h)
	p := m.Cfg.HiddenDropoutProb
	if m.Cfg.ClassifierDropout != nil {
		p = *m.Cfg.ClassifierDropout
	}
	g := h.Graph()
	pooled = core.Dropout(c, pooled, p, b.Training)
	logits = core.Proj(c, "classifier", pooled, core.Weight(c, g, "classifier.weight"), core.Weight(c, g, "classifier.bias"))
	if b.Labels != nil {
		problem, err := core.ProblemType(m.Cfg.ProblemType, m.Cfg.NumLabels(), b.Labels)
		if err != nil {
			panic(err)
		}
		loss = core.ClassificationBatchLoss(problem, logits, b)
	}
	return loss, logits
}

// Encode is BertModel: last_hidden_state [B, T, H] and pooler_output [B, H].
func (m *Model) Encode(c *mlctx.Context, b core.Batch) (hidden, pooled *Node) {
	hidden = m.hidden(c, b)
	return hidden, m.pool(c, hidden)
}

// pool is BertPooler: tanh(dense(h[:, 0])).
func (m *Model) pool(c *mlctx.Context, h *Node) *Node {
	w := func(name string) *Node { return core.Weight(c, h.Graph(), prefixFor(m.Cfg.Arch)+name) }
	first := core.Select(h, 1, 0) // [CLS] token: h[:, 0]
	return Tanh(core.Proj(c, prefixFor(m.Cfg.Arch)+"pooler.dense", first, w("pooler.dense.weight"), w("pooler.dense.bias")))
}

// hidden is BertModel's last_hidden_state.
func (m *Model) hidden(c *mlctx.Context, b core.Batch) *Node {
	cfg := m.Cfg
	pre := prefixFor(cfg.Arch)
	ids := b.InputIDs
	g := ids.Graph()
	w := func(name string) *Node { return core.Weight(c, g, pre+name) }
	dims := ids.Shape().Dimensions
	if len(dims) != 2 {
		panic(fmt.Errorf("bert: input_ids must be [batch, seq], got %v", ids.Shape()))
	}
	B, T := dims[0], dims[1]
	if T > cfg.MaxPositionEmbeddings {
		panic(fmt.Errorf("bert: sequence length %d exceeds max_position_embeddings %d", T, cfg.MaxPositionEmbeddings))
	}
	types := b.TokenTypeIDs
	if types == nil {
		types = Zeros(g, shapes.Make(dtypes.Int32, B, T))
	}
	pos := Iota(g, shapes.Make(dtypes.Int32, 1, T), 1)
	// NEFTune's hook is on get_input_embeddings() (word_embeddings), before token types and positions.
	words := core.NEFTune(c, core.Embed(w("embeddings.word_embeddings.weight"), ids), b.NEFTuneAlpha, b.Training)
	x := Add(words, core.Embed(w("embeddings.token_type_embeddings.weight"), types))
	x = Add(x, core.Embed(w("embeddings.position_embeddings.weight"), pos))
	x = core.LayerNorm(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"), cfg.LayerNormEps)
	x = core.Dropout(c, x, cfg.HiddenDropoutProb, b.Training)
	var allowed *Node
	if b.AttentionMask != nil {
		allowed = core.KeyMask(b.AttentionMask, T)
	}
	act, err := core.Activation(cfg.HiddenAct)
	if err != nil {
		panic(err)
	}
	H, D := cfg.NumAttentionHeads, cfg.HeadDim()
	for i := range cfg.NumHiddenLayers {
		// One BertLayer, the unit HF's gradient_checkpointing recomputes (core.RecomputedLayer).
		x = core.RecomputedLayer(c, x, func(x *Node) *Node {
			p := fmt.Sprintf("encoder.layer.%d.", i)
			lin := func(name string, in *Node) *Node {
				return core.Proj(c, pre+p+name, in, w(p+name+".weight"), w(p+name+".bias"))
			}
			q := core.Heads(lin("attention.self.query", x), H, D)
			k := core.Heads(lin("attention.self.key", x), H, D)
			v := core.Heads(lin("attention.self.value", x), H, D)
			att := core.Attention(c, q, k, v, core.AttentionOpts{
				ScaleDiv: math.Sqrt(float64(D)), Allowed: allowed, DropP: cfg.AttentionProbsDropoutProb, Training: b.Training,
			})
			att = core.Dropout(c, lin("attention.output.dense", att), cfg.HiddenDropoutProb, b.Training)
			x = core.LayerNorm(Add(att, x), w(p+"attention.output.LayerNorm.weight"), w(p+"attention.output.LayerNorm.bias"), cfg.LayerNormEps)
			f := act(lin("intermediate.dense", x))
			f = core.Dropout(c, lin("output.dense", f), cfg.HiddenDropoutProb, b.Training)
			x = core.LayerNorm(Add(f, x), w(p+"output.LayerNorm.weight"), w(p+"output.LayerNorm.bias"), cfg.LayerNormEps)
			return x
		})
	}
	return x
}

// MaxPositions is max_position_embeddings.
func (m *Model) MaxPositions() int { return m.Cfg.MaxPositionEmbeddings }

// LinearLayers lists the torch.nn.Linear layers a LoRA adapter may target, in state-dict order
// (each built with core.Proj, which adds an attached adapter's branch).
func (m *Model) LinearLayers() []core.LinearLayer {
	return core.LinearLayersOf(m.Table, false, "attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense", "intermediate.dense", "output.dense", "pooler.dense", "classifier")
}

// ProblemType is config.json's problem_type ("" when unset).
func (m *Model) ProblemType() string { return m.Cfg.ProblemType }
