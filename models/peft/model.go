package peft

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/internal/atomicfile"
	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/xla"
)

// KeyPrefix starts every adapter tensor name: PeftModel's base_model (LoraModel) and its model.
const KeyPrefix = "base_model.model."

// Model is a base model with a LoRA adapter attached: its Params are the adapter's lora_A and
// lora_B tensors, named as PEFT saves them ("base_model.model.<module>.lora_A.weight"), and
// FrozenParams the base model's. The adapter's variables live in the base model's context, so
// the base model must not be used on its own afterwards (Merge returns it, adapter folded in).
type Model struct {
	base    models.Adaptable
	rt      *xla.Runtime
	cfg     LoraConfig
	targets []models.LinearLayer
	params  []models.Param
	spec    core.LoRASpec
	merged  bool
}

// Options control New and Load.
type Options struct {
	// Seed draws a new adapter's initial weights (New): the same seed, the same adapter.
	Seed uint64
	// Hub options resolve an adapter named by a Hub repo id (Load).
	Hub models.HubOptions
	// Log receives PEFT's warnings (fan_in_fan_out forced by the layer kind); nil: slog.Default().
	Log *slog.Logger
}

// Of returns the adapter model m is, if it is one.
func Of(m models.Model) (*Model, bool) {
	switch x := m.(type) {
	case *Model:
		return x, true
	case *causalLM:
		return x.Model, true
	case *classifier:
		return x.Model, true
	}
	return nil, false
}

// New attaches a new adapter to base, initialised as cfg.InitLoraWeights says (PEFT's
// distributions, drawn from opts.Seed). base's linear layers matching cfg's targets get a branch;
// everything of base is frozen. rt may be nil: the adapter goes on base's runtime.
func New(ctx context.Context, rt *xla.Runtime, base models.Model, cfg LoraConfig, opts Options) (models.Model, error) {
	m, err := prepare(rt, base, cfg, opts)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x7f4a7c159e3779b9))
	values := map[string][]float32{}
	for _, t := range m.targets {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		a := make([]float32, m.cfg.R*t.In)
		b := make([]float32, t.Out*m.cfg.R)
		// kaiming_uniform_(a=sqrt(5)) on a [r, in] weight: U(±1/sqrt(in)); B's nn.Linear default
		// init on [out, r]: U(±1/sqrt(r)).
		uniform := func(dst []float32, bound float64) {
			for i := range dst {
				dst[i] = float32((2*rng.Float64() - 1) * bound)
			}
		}
		switch v := m.cfg.InitLoraWeights.(type) {
		case bool:
			uniform(a, 1/math.Sqrt(float64(t.In)))
			if !v {
				uniform(b, 1/math.Sqrt(float64(m.cfg.R)))
			}
		case string: // "gaussian": A ~ N(0, 1/r), B = 0
			for i := range a {
				a[i] = float32(rng.NormFloat64() / float64(m.cfg.R))
			}
		}
		values[KeyPrefix+t.Module+".lora_A.weight"] = a
		values[KeyPrefix+t.Module+".lora_B.weight"] = b
	}
	if err := m.populate(values); err != nil {
		return nil, err
	}
	return m.wrap(), nil
}

// prepare checks cfg against base and resolves its targets; the variables are not created yet.
// rt may be nil: the adapter goes on base's runtime (models.RuntimeOf).
func prepare(rt *xla.Runtime, base models.Model, cfg LoraConfig, opts Options) (*Model, error) {
	rt, err := models.ResolveRuntime(rt, base, "peft: the runtime argument")
	if err != nil {
		return nil, err
	}
	if _, ok := Of(base); ok {
		return nil, fmt.Errorf("peft: the model already has an adapter (one adapter per model)")
	}
	ad, ok := base.(models.Adaptable)
	if !ok {
		return nil, fmt.Errorf("peft: %s has no LoRA-targetable layers", base.Architecture())
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	targets, err := Targets(ad, cfg)
	if err != nil {
		return nil, err
	}
	// "all-linear" is saved expanded, as PEFT saves it: the names replace the string.
	cfg.TargetModules = SavedTargets(ad, cfg, targets)
	if cfg.TargetsAllLinear() {
		cfg.TargetModulesRegex = ""
	}
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	// PEFT forces fan_in_fan_out to the layer kind, with a warning, and saves the forced value.
	conv := targets[0].Conv1D
	for _, t := range targets {
		if t.Conv1D != conv {
			return nil, fmt.Errorf("LoraConfig.target_modules: %s mixes Conv1D and nn.Linear layers, which need different fan_in_fan_out", base.Architecture())
		}
	}
	if cfg.FanInFanOut != conv {
		log.Warn("fan_in_fan_out set to the layer kind, as PEFT does", "fan_in_fan_out", conv, "conv1d", conv)
		cfg.FanInFanOut = conv
	}
	m := &Model{base: ad, rt: rt, cfg: cfg, targets: targets}
	m.spec = core.LoRASpec{Modules: map[string]bool{}, Prefix: KeyPrefix, Scaling: cfg.Scaling(), Dropout: cfg.LoraDropout}
	for _, t := range targets {
		m.spec.Modules[t.Module] = true
		m.params = append(m.params,
			core.NewParam(KeyPrefix+t.Module+".lora_A.weight", []int{cfg.R, t.In}, false, core.InitZeros, 0),
			core.NewParam(KeyPrefix+t.Module+".lora_B.weight", []int{t.Out, cfg.R}, false, core.InitZeros, 0))
	}
	if c := base.Context(); c.GetVariableByScopeAndName(m.params[0].Scope(), m.params[0].Var()) != nil {
		return nil, fmt.Errorf("peft: the model's context already holds %s", m.params[0].Name)
	}
	return m, nil
}

// populate creates the adapter's float32 variables from host values keyed by tensor name.
func (m *Model) populate(values map[string][]float32) (err error) {
	defer xla.Recover(&err, "peft")
	ts := make(map[string]*tensors.Tensor, len(m.params))
	for _, p := range m.params {
		v, ok := values[p.Name]
		if !ok || len(v) != p.NumElements() {
			core.FinalizeAll(ts)
			return fmt.Errorf("peft: no values for %s", p.Name)
		}
		raw, _ := safetensors.EncodeFloat32(safetensors.F32, v)
		t, err := core.DeviceTensor(m.rt.Backend(), dtypes.Float32, safetensors.F32, raw, p.Shape)
		if err != nil {
			core.FinalizeAll(ts)
			return fmt.Errorf("peft: %s: %w", p.Name, err)
		}
		ts[p.Name] = t
	}
	core.PopulateContext(m.base.Context(), m.params, ts)
	return nil
}

func (m *Model) wrap() models.Model {
	switch b := m.base.(type) {
	case models.CausalLM:
		return &causalLM{Model: m, lm: b}
	case models.SequenceClassifier:
		return &classifier{Model: m, cls: b}
	}
	return m
}

// LoraConfig is the adapter's config (fan_in_fan_out as forced by the layer kind).
func (m *Model) LoraConfig() LoraConfig { return m.cfg }

// Runtime is the runtime the adapter's and base's weights live on (models.RuntimeOf).
func (m *Model) Runtime() *xla.Runtime { return m.rt }

// Base is the model the adapter is attached to.
func (m *Model) Base() models.Model { return m.base }

// TargetModules are the adapted layers, in state-dict order.
func (m *Model) TargetModules() []models.LinearLayer { return slices.Clone(m.targets) }

// Architecture is the base model's.
func (m *Model) Architecture() string { return m.base.Architecture() }

// Config is the base model's config.json.
func (m *Model) Config() models.Config { return m.base.Config() }

// Context is the base model's context, which holds the adapter's variables too.
func (m *Model) Context() *mlctx.Context { return m.base.Context() }

// Params are the adapter's tensors: what training updates and checkpoints hold. Every one of
// them is in HF Trainer's weight-decay group (no LoRA name matches its no-decay patterns).
func (m *Model) Params() []models.Param { return slices.Clone(m.params) }

// FrozenParams are the base model's parameters.
func (m *Model) FrozenParams() []models.Param { return m.base.Params() }

// LinearLayers are the base model's.
func (m *Model) LinearLayers() []models.LinearLayer { return m.base.LinearLayers() }

// MaxPositions is the base model's.
func (m *Model) MaxPositions() int {
	if p, ok := m.base.(interface{ MaxPositions() int }); ok {
		return p.MaxPositions()
	}
	return math.MaxInt32
}

// DType is the dtype of the base model's variables (the adapter's are float32).
func (m *Model) DType() dtypes.DType {
	if d, ok := m.base.(interface{ DType() dtypes.DType }); ok {
		return d.DType()
	}
	return dtypes.Float32
}

// attach makes graphs built into g add the adapter's branches.
func (m *Model) attach(c *mlctx.Context, g *graph.Graph, training bool) {
	if m.merged {
		panic(fmt.Errorf("peft: the adapter was merged into the base model; use the model Merge returned"))
	}
	spec := m.spec
	spec.Training = training
	core.SetLoRA(c, g, &spec)
}

// Forward is the base model's forward with the adapter's branches.
func (m *Model) Forward(c *mlctx.Context, b models.Batch) (loss, logits *graph.Node) {
	m.attach(c, b.InputIDs.Graph(), b.Training)
	return m.base.Forward(c, b)
}

// SavedFiles: checkpoints of an adapter run hold adapter_model.safetensors and
// adapter_config.json, as PEFT's save_pretrained writes them, not the base model.
func (m *Model) SavedFiles() (weights, config string) { return WeightsFile, ConfigFile }

// SavedConfig is adapter_config.json.
func (m *Model) SavedConfig() ([]byte, error) { return m.cfg.JSON() }

// Save writes the adapter directory: adapter_config.json and adapter_model.safetensors (float32
// unless opts.DType says otherwise; metadata {"format": "pt"}), as PeftModel.save_pretrained.
// The base model is not written (Merge and the base's Save do that).
func (m *Model) Save(dir string, opts models.SaveOptions) (err error) {
	defer xla.Recover(&err, "peft.Save")
	outDT := dtypes.Float32
	if opts.DType != "" {
		if outDT, err = core.ParseDTypeName(opts.DType); err != nil {
			return fmt.Errorf("SaveOptions.DType: %w", err)
		}
	}
	fileDT, ok := core.FileDTypeOf(outDT)
	if !ok {
		return fmt.Errorf("peft: cannot save %s weights", outDT)
	}
	if err := atomicfile.MkdirAll(dir); err != nil {
		return err
	}
	c := m.Context()
	specs := make([]safetensors.Tensor, len(m.params))
	for i, p := range m.params {
		v := c.GetVariableByScopeAndName(p.Scope(), p.Var())
		if v == nil {
			return fmt.Errorf("peft: %s has no variable", p.Name)
		}
		specs[i] = safetensors.Tensor{Name: p.Name, DType: fileDT, Shape: p.Shape, Load: func() ([]byte, error) {
			t, err := v.Value()
			if err != nil {
				return nil, err
			}
			return core.TensorBytes(t, fileDT)
		}}
	}
	if err := safetensors.WriteFile(filepath.Join(dir, WeightsFile), specs, map[string]string{"format": "pt"}); err != nil {
		return err
	}
	cfg, err := m.cfg.JSON()
	if err != nil {
		return err
	}
	return atomicfile.WriteFileBytes(filepath.Join(dir, ConfigFile), cfg)
}

// causalLM is an adapter on a causal LM: generation and scoring see the adapted model.
type causalLM struct {
	*Model
	lm models.CausalLM
}

func (m *causalLM) VocabSize() int              { return m.lm.VocabSize() }
func (m *causalLM) MaxPositions() int           { return m.lm.MaxPositions() }
func (m *causalLM) EOSTokenIDs() []int          { return m.lm.EOSTokenIDs() }
func (m *causalLM) CacheDims() models.CacheDims { return m.lm.CacheDims() }
func (m *causalLM) ForwardCached(c *mlctx.Context, ids, offset *graph.Node, cache *models.KVCache) *graph.Node {
	m.attach(c, ids.Graph(), false)
	return m.lm.ForwardCached(c, ids, offset, cache)
}

// classifier is an adapter on a sequence classifier.
type classifier struct {
	*Model
	cls models.SequenceClassifier
}

func (m *classifier) NumLabels() int { return m.cls.NumLabels() }

// ProblemType is the base classifier's problem_type.
func (m *classifier) ProblemType() string {
	if p, ok := m.cls.(interface{ ProblemType() string }); ok {
		return p.ProblemType()
	}
	return ""
}

// fileExists reports whether path is an existing regular file.
func fileExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// moduleOf strips an adapter tensor name to its module: "base_model.model.X.lora_A.weight" -> X, "A".
func moduleOf(name string) (module, factor string, ok bool) {
	rest, ok := strings.CutPrefix(name, KeyPrefix)
	if !ok {
		return "", "", false
	}
	for _, f := range []string{"A", "B"} {
		if mod, ok := strings.CutSuffix(rest, ".lora_"+f+".weight"); ok && mod != "" {
			return mod, f, true
		}
	}
	return "", "", false
}
