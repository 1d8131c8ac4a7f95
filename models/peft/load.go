package peft

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/xla"
)

// ResolveAdapter returns the local directory holding the adapter nameOrPath: an existing directory,
// or a Hub repo id whose adapter_config.json and adapter_model.safetensors are fetched into the
// shared Hugging Face cache (PeftModel.from_pretrained's lookup), for a model of base.
//
// A repo's files are sized by whoever published it, so each download is bounded before any byte
// of it is written (hub.Limits, checked against the size the Hub announces): adapter_config.json
// by MaxConfigBytes, and adapter_model.safetensors by what that config implies on base
// (MaxWeightsBytes), which is why the config is read, and checked, before the weights are asked
// for. Weights over the bound are an error naming the repo, the file and the limit that wraps
// hub.ErrTooLarge; a config that ReadConfig refuses, or that selects no weight matrix of base, is
// an error before the weights are fetched.
func ResolveAdapter(ctx context.Context, nameOrPath string, base models.Config, opts models.HubOptions) (string, error) {
	if st, err := os.Stat(nameOrPath); err == nil {
		if !st.IsDir() {
			return "", fmt.Errorf("%s: an adapter is a directory holding %s and %s, not a file", nameOrPath, ConfigFile, WeightsFile)
		}
		return nameOrPath, nil
	}
	repo, c, err := models.HubRepo(nameOrPath, opts)
	if err != nil {
		return "", err
	}
	configs, err := c.WithLimits(hub.Limits{File: MaxConfigBytes})
	if err != nil {
		return "", err
	}
	cfgPath, err := configs.Download(ctx, repo, ConfigFile)
	if err != nil {
		return "", fmt.Errorf("adapter %s: %w", nameOrPath, err)
	}
	dir := filepath.Dir(cfgPath)
	// The weights must come from the commit the config came from, even if the branch moves.
	if commit := filepath.Base(dir); hub.IsCommit(commit) {
		repo.Revision = commit
	}
	lc, err := ReadConfig(cfgPath)
	if err != nil {
		return "", fmt.Errorf("adapter %s: %w", nameOrPath, err)
	}
	limit, err := MaxWeightsBytes(base, lc)
	if err != nil {
		return "", fmt.Errorf("adapter %s: %s: %w", nameOrPath, ConfigFile, err)
	}
	weights, err := c.WithLimits(hub.Limits{File: limit})
	if err != nil {
		return "", err
	}
	if _, err := weights.Download(ctx, repo, WeightsFile); err != nil {
		if errors.Is(err, hub.ErrEntryNotFound) {
			if ok, _ := c.FileExists(ctx, repo, PickleWeightsFile); ok {
				return "", fmt.Errorf("adapter %s has only %s (a pickle, which gotpu does not read): save it with safe_serialization=True", nameOrPath, PickleWeightsFile)
			}
		}
		return "", WeightsError(nameOrPath, base, limit, err)
	}
	return dir, nil
}

// WeightsError is the error for an adapter's adapter_model.safetensors that failed to download
// with the bound limit (MaxWeightsBytes on base): one over the bound says why there is a bound,
// naming the adapter, the file and the limit, and wraps hub.ErrTooLarge.
func WeightsError(adapter string, base models.Config, limit int64, err error) error {
	if errors.Is(err, hub.ErrTooLarge) {
		return fmt.Errorf("adapter %s: %s is larger than its %s implies for %s (%d bytes at most: r·(in+out) elements "+
			"of 8 bytes for each targeted weight matrix, and the header; peft.MaxWeightsBytes): %w",
			adapter, WeightsFile, ConfigFile, base.Architecture(), limit, err)
	}
	return fmt.Errorf("adapter %s: %s: %w", adapter, WeightsFile, err)
}

// Load attaches the adapter saved in nameOrPath (a directory or Hub repo id, as PEFT's
// save_pretrained writes it) to base. Its config gives r, lora_alpha and the targets; every tensor
// must belong to a targeted layer of base with the shape base implies, and every targeted layer
// must have both tensors. Errors name the file and the field or tensor.
func Load(ctx context.Context, rt *xla.Runtime, base models.Model, nameOrPath string, opts Options) (models.Model, error) {
	dir, err := ResolveAdapter(ctx, nameOrPath, base.Config(), opts.Hub)
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, ConfigFile)
	if !fileExists(cfgPath) {
		return nil, fmt.Errorf("%s: no %s: not a PEFT adapter directory", dir, ConfigFile)
	}
	cfg, err := ReadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	m, err := prepare(rt, base, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	values, err := m.readAdapter(dir)
	if err != nil {
		return nil, err
	}
	if err := m.populate(values); err != nil {
		return nil, err
	}
	return m.wrap(), nil
}

// readAdapter reads and checks dir's adapter_model.safetensors against the adapter's tensors.
func (m *Model) readAdapter(dir string) (map[string][]float32, error) {
	path := filepath.Join(dir, WeightsFile)
	if !fileExists(path) {
		if fileExists(filepath.Join(dir, PickleWeightsFile)) {
			return nil, fmt.Errorf("%s: only %s, a pickle gotpu does not read: save the adapter with safe_serialization=True", dir, PickleWeightsFile)
		}
		return nil, fmt.Errorf("%s: no %s", dir, WeightsFile)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	want := map[string]models.Param{}
	for _, p := range m.params {
		want[p.Name] = p
	}
	values := map[string][]float32{}
	for _, name := range f.Names() {
		p, ok := want[name]
		if !ok {
			if mod, _, isLoRA := moduleOf(name); isLoRA {
				if m.hasLinear(mod) {
					return nil, fmt.Errorf("%s: tensor %s: layer %s is not among target_modules %s of %s", path, name, mod, targetsText(m.cfg), filepath.Join(dir, ConfigFile))
				}
				return nil, fmt.Errorf("%s: tensor %s: %s has no linear layer %s: the adapter was made for another base model", path, name, m.base.Architecture(), mod)
			}
			return nil, fmt.Errorf("%s: tensor %s is not a LoRA tensor (%s<module>.lora_A.weight / .lora_B.weight): only LoRA adapters without modules_to_save are supported", path, name, KeyPrefix)
		}
		info, _ := f.Info(name)
		if !slices.Equal(info.Shape, p.Shape) {
			return nil, fmt.Errorf("%s: tensor %s has shape %v; %s with r=%d needs %v (does the adapter belong to this base model?)", path, name, info.Shape, m.base.Architecture(), m.cfg.R, p.Shape)
		}
		switch info.DType {
		case safetensors.F32, safetensors.BF16, safetensors.F16:
		default:
			return nil, fmt.Errorf("%s: tensor %s has dtype %s (want F32, BF16 or F16)", path, name, info.DType)
		}
		raw, err := f.Bytes(name)
		if err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", path, name, err)
		}
		v := make([]float32, p.NumElements())
		if err := safetensors.DecodeFloat32(info.DType, raw, v); err != nil {
			return nil, fmt.Errorf("%s: tensor %s: %w", path, name, err)
		}
		values[name] = v
	}
	for _, p := range m.params {
		if _, ok := values[p.Name]; !ok {
			mod, _, _ := moduleOf(p.Name)
			return nil, fmt.Errorf("%s: tensor %s is missing (layer %s is targeted by %s of %s)", path, p.Name, mod, targetsText(m.cfg), filepath.Join(dir, ConfigFile))
		}
	}
	return values, nil
}

func (m *Model) hasLinear(module string) bool {
	for _, l := range m.base.LinearLayers() {
		if l.Module == module {
			return true
		}
	}
	return false
}

func targetsText(c LoraConfig) string {
	if c.TargetModulesRegex != "" {
		return shortExpr(c.TargetModulesRegex)
	}
	return "[" + strings.Join(c.TargetModules, ", ") + "]"
}

// LoadWeights replaces the adapter's tensors by those saved in dir (a checkpoint or adapter
// directory of this adapter): load_best_model_at_end for an adapter run.
func (m *Model) LoadWeights(dir string) (err error) {
	defer xla.Recover(&err, "peft.LoadWeights")
	values, err := m.readAdapter(dir)
	if err != nil {
		return err
	}
	c := m.Context()
	for _, p := range m.params {
		raw, _ := safetensors.EncodeFloat32(safetensors.F32, values[p.Name])
		t, err := core.DeviceTensor(m.rt.Backend(), dtypes.Float32, safetensors.F32, raw, p.Shape)
		if err != nil {
			return fmt.Errorf("peft: %s: %w", p.Name, err)
		}
		if err := c.GetVariableByScopeAndName(p.Scope(), p.Var()).SetValue(t); err != nil {
			return fmt.Errorf("peft: %s: %w", p.Name, err)
		}
	}
	return nil
}

// Merge folds the adapter into the base weights, as PEFT's merge_and_unload: for every adapted
// layer W += transpose(B·A, fan_in_fan_out) · scaling, computed in float64 and rounded once to
// W's dtype. It returns the base model, which loads and saves as a plain HF model; the adapter's
// variables are removed and m cannot be used afterwards.
func Merge(ctx context.Context, adapted models.Model) (out models.Model, err error) {
	m, ok := Of(adapted)
	if !ok {
		return nil, fmt.Errorf("peft.Merge: %s has no adapter", adapted.Architecture())
	}
	if m.merged {
		return nil, fmt.Errorf("peft.Merge: the adapter was merged already")
	}
	defer xla.Recover(&err, "peft.Merge")
	c := m.Context()
	read := func(name string) (*core.Param, []float32, dtypes.DType, error) {
		p := core.Param{Name: name}
		v := c.GetVariableByScopeAndName(p.Scope(), p.Var())
		if v == nil {
			return nil, nil, 0, fmt.Errorf("peft.Merge: %s has no variable", name)
		}
		t, err := v.Value()
		if err != nil {
			return nil, nil, 0, err
		}
		raw, err := core.TensorBytes(t, safetensors.F32)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("peft.Merge: %s: %w", name, err)
		}
		vals := make([]float32, len(raw)/4)
		if err := safetensors.DecodeFloat32(safetensors.F32, raw, vals); err != nil {
			return nil, nil, 0, err
		}
		p.Shape = v.Shape().Dimensions
		return &p, vals, v.Shape().DType, nil
	}
	scaling := m.cfg.Scaling()
	r := m.cfg.R
	for _, t := range m.targets {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		wp, w, wdt, err := read(t.Module + ".weight")
		if err != nil {
			return nil, err
		}
		_, a, _, err := read(KeyPrefix + t.Module + ".lora_A.weight")
		if err != nil {
			return nil, err
		}
		_, b, _, err := read(KeyPrefix + t.Module + ".lora_B.weight")
		if err != nil {
			return nil, err
		}
		merged := make([]float32, len(w))
		for o := range t.Out {
			for i := range t.In {
				var d float64
				for k := range r {
					d += float64(b[o*r+k]) * float64(a[k*t.In+i])
				}
				idx := o*t.In + i
				if t.Conv1D { // W is [in, out]: the delta is transposed (fan_in_fan_out)
					idx = i*t.Out + o
				}
				merged[idx] = float32(float64(w[idx]) + d*scaling)
			}
		}
		fileDT, ok := core.FileDTypeOf(wdt)
		if !ok {
			return nil, fmt.Errorf("peft.Merge: %s has dtype %s", wp.Name, wdt)
		}
		raw, err := safetensors.EncodeFloat32(fileDT, merged)
		if err != nil {
			return nil, fmt.Errorf("peft.Merge: %s: %w", wp.Name, err)
		}
		nt, err := core.DeviceTensor(m.rt.Backend(), wdt, fileDT, raw, wp.Shape)
		if err != nil {
			return nil, fmt.Errorf("peft.Merge: %s: %w", wp.Name, err)
		}
		if err := c.GetVariableByScopeAndName(wp.Scope(), wp.Var()).SetValue(nt); err != nil {
			return nil, fmt.Errorf("peft.Merge: %s: %w", wp.Name, err)
		}
	}
	for _, p := range m.params {
		if err := c.DeleteVariable(p.Scope(), p.Var()); err != nil {
			return nil, fmt.Errorf("peft.Merge: %s: %w", p.Name, err)
		}
	}
	m.merged = true
	return m.base, nil
}
