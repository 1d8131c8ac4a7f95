package core

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/internal/atomicfile"
	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/xla"
)

// Config is what every architecture's config offers the shared code.
type Config interface {
	// ModelType is config.json's model_type ("gpt2", "llama", "bert", ...).
	ModelType() string
	// Architecture is the HF class written to "architectures" ("GPT2LMHeadModel").
	Architecture() string
	// JSON returns config.json as HF's save_pretrained writes it, unknown fields included.
	JSON() ([]byte, error)
	// SetDType records the dtype of saved weights (torch_dtype, or dtype in transformers-5 files).
	SetDType(name string)
}

// Base holds what every model has: config, variables, table. Architectures embed it and add
// Forward.
type Base struct {
	Cfg     Config
	Ctx     *mlctx.Context
	Table   []Param
	Backend backends.Backend
	// Generation is generation_config.json as found next to the weights (nil if none); Save writes
	// it back unchanged.
	Generation []byte
	// rt is the runtime the weights were placed with (runtime.go); nil for a Base built by NewBase.
	rt *xla.Runtime
}

// Architecture is the HF class name.
func (b *Base) Architecture() string { return b.Cfg.Architecture() }

// Context holds one variable per table entry.
func (b *Base) Context() *mlctx.Context { return b.Ctx }

// Params lists the table in HF state-dict order.
func (b *Base) Params() []Param { return append([]Param(nil), b.Table...) }

// Variable returns the variable of a table entry.
func (b *Base) Variable(name string) (*mlctx.Variable, error) {
	p := Param{Name: name}
	v := b.Ctx.GetVariableByScopeAndName(p.Scope(), p.Var())
	if v == nil {
		return nil, fmt.Errorf("parameter %q has no variable at %s/%s", name, p.Scope(), p.Var())
	}
	return v, nil
}

// DType is the dtype of the model's variables (of the first parameter; all share it).
func (b *Base) DType() dtypes.DType {
	v, err := b.Variable(b.Table[0].Name)
	if err != nil {
		return dtypes.Float32
	}
	return v.Shape().DType
}

// NewBase builds a model base from weights (which it takes ownership of) and a config.
func NewBase(cfg Config, table []Param, backend backends.Backend, weights map[string]*tensors.Tensor) *Base {
	c := mlctx.New()
	PopulateContext(c, table, weights)
	return &Base{Cfg: cfg, Ctx: c, Table: table, Backend: backend}
}

// InitWeights draws a fresh model with HF's _init_weights distributions (as described by each
// Param) from a seeded PCG stream, directly into device tensors of dtype dt.
func InitWeights(ctx context.Context, backend backends.Backend, table []Param, seed uint64, dt dtypes.DType) (map[string]*tensors.Tensor, error) {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	out := make(map[string]*tensors.Tensor, len(table))
	for _, p := range table {
		if err := ctx.Err(); err != nil {
			FinalizeAll(out)
			return nil, err
		}
		vals := make([]float32, p.NumElements())
		switch p.Init {
		case InitOnes:
			for i := range vals {
				vals[i] = 1
			}
		case InitNormal:
			for i := range vals {
				vals[i] = float32(rng.NormFloat64() * p.Std)
			}
		}
		if p.ZeroRow >= 0 && len(p.Shape) == 2 && p.ZeroRow < p.Shape[0] {
			row := vals[p.ZeroRow*p.Shape[1] : (p.ZeroRow+1)*p.Shape[1]]
			clear(row)
		}
		raw, _ := safetensors.EncodeFloat32(safetensors.F32, vals)
		t, err := DeviceTensor(backend, dt, safetensors.F32, raw, p.Shape)
		if err != nil {
			FinalizeAll(out)
			return nil, fmt.Errorf("initialising %q: %w", p.Name, err)
		}
		out[p.Name] = t
	}
	return out, nil
}

// Save writes config.json, the weights (one file, or shards plus index when they exceed
// opts.MaxShardSize) and generation_config.json if the model came with one. Stale weight files of an
// earlier save in dir are removed afterwards, as save_pretrained does.
func (b *Base) Save(dir string, opts SaveOptions) error {
	outDT := b.DType()
	if opts.DType != "" {
		var err error
		if outDT, err = ParseDTypeName(opts.DType); err != nil {
			return fmt.Errorf("SaveOptions.DType: %w", err)
		}
	}
	fileDT, ok := FileDTypeOf(outDT)
	if !ok {
		return fmt.Errorf("cannot save %s weights", outDT)
	}
	maxShard := opts.MaxShardSize
	if maxShard == 0 {
		maxShard = DefaultMaxShardSize
	}
	if maxShard < 0 {
		return fmt.Errorf("SaveOptions.MaxShardSize %d is negative", maxShard)
	}
	if err := atomicfile.MkdirAll(dir); err != nil {
		return err
	}
	specs := make([]safetensors.Tensor, len(b.Table))
	for i, p := range b.Table {
		v, err := b.Variable(p.Name)
		if err != nil {
			return err
		}
		specs[i] = safetensors.Tensor{Name: p.Name, DType: fileDT, Shape: p.Shape, Load: func() ([]byte, error) {
			t, err := v.Value()
			if err != nil {
				return nil, err
			}
			return TensorBytes(t, fileDT)
		}}
	}
	written, err := WriteShards(dir, specs, maxShard)
	if err != nil {
		return err
	}
	b.Cfg.SetDType(TorchDTypeName(outDT))
	cfgJSON, err := b.Cfg.JSON()
	if err != nil {
		return err
	}
	if err := writeFileAtomic(filepath.Join(dir, ConfigFile), cfgJSON); err != nil {
		return err
	}
	if b.Generation != nil {
		if err := writeFileAtomic(filepath.Join(dir, GenerationFile), b.Generation); err != nil {
			return err
		}
	}
	return removeStaleWeights(dir, written)
}

// writeFileAtomic writes a small file of a model directory with internal/atomicfile's policy
// (the one of the weights too: mode 0666 less the umask, fsync, rename, directory fsync).
func writeFileAtomic(path string, data []byte) error { return atomicfile.WriteFileBytes(path, data) }

// StdInit is HF's std for residual projections scaled by depth (GPT-2's c_proj).
func StdInit(base float64, nLayer int) float64 { return base / math.Sqrt(2*float64(nLayer)) }

// LoadDir loads the weights of dir for an already-parsed config into a new Base.
func LoadDir(ctx context.Context, rt *xla.Runtime, dir string, cfg Config, m Mapping, opts LoadOptions) (*Base, error) {
	backend := rt.Backend()
	target := dtypes.Float32
	switch opts.DType {
	case "", "float32":
	case "auto":
		target = dtypes.InvalidDType
	default:
		var err error
		if target, err = ParseDTypeName(opts.DType); err != nil {
			return nil, fmt.Errorf("LoadOptions.DType: %w", err)
		}
	}
	ck, err := OpenCheckpoint(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	weights, err := LoadWeights(ctx, ck, m, backend, target)
	if err != nil {
		return nil, err
	}
	b := NewBase(cfg, m.Table, backend, weights)
	b.rt = rt
	if gen, err := os.ReadFile(filepath.Join(dir, GenerationFile)); err == nil {
		b.Generation = gen
	}
	return b, nil
}

// NewRandomBase builds a randomly initialised model base for an architecture: it validates the
// config, resolves opts.DType (float32 by default) against the backend, draws the table's
// weights (HF's _init_weights distributions) and records the dtype in the config. name prefixes
// errors ("gpt2").
func NewRandomBase(ctx context.Context, rt *xla.Runtime, name string, cfg interface {
	Config
	Validate() error
}, table []Param, opts NewOptions) (*Base, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	backend := rt.Backend()
	dt := dtypes.Float32
	if opts.DType != "" {
		var err error
		if dt, err = ParseDTypeName(opts.DType); err != nil {
			return nil, fmt.Errorf("%s.NewOptions.DType: %w", name, err)
		}
	}
	if err := CheckBackendDType(backend, dt); err != nil {
		return nil, err
	}
	weights, err := InitWeights(ctx, backend, table, opts.Seed, dt)
	if err != nil {
		return nil, err
	}
	cfg.SetDType(TorchDTypeName(dt))
	b := NewBase(cfg, table, backend, weights)
	b.rt = rt
	return b, nil
}
