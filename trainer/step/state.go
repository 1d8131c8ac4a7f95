package step

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

// HostTensor is a host copy of one variable: whole (never per device), so state saved with N
// replicas restores onto any number.
type HostTensor struct {
	Name  string
	DType dtypes.DType
	Shape []int
	Bytes []byte
}

// State is a host snapshot of everything a training run keeps in the model's context, keyed for
// checkpoints:
//   - Params by HF parameter name ("transformer.h.0.attn.c_attn.weight"),
//   - Optimizer by "<state kind>/<HF name>" ("adamw_m/transformer.h.0.attn.c_attn.weight"),
//   - Other by the variable's scope and name ("/#rngState": the dropout RNG), so that resume is exact.
type State struct {
	Params, Optimizer, Other []HostTensor
	// OptimizerStep is the number of updates applied (torch's state["step"]).
	OptimizerStep int
}

// ExportState copies the model's variables, the optimizer state and the step count to host
// memory, after every dispatched step, in one blocking read that also reads those steps' results
// (Collect returns them without another read). The copies are independent of the device
// buffers: later steps do not change them. It fails if a parameter is not finite (a checkpoint
// is never written from diverged weights).
func (s *Stepper) ExportState(ctx context.Context) (st State, err error) {
	defer xla.Recover(&err, "step.ExportState")
	err = s.read(ctx, "export state", func() error {
		var err error
		st, err = s.exportState()
		return err
	})
	if err != nil {
		return State{}, err
	}
	st.OptimizerStep = s.t
	return st, nil
}

// exportState copies the variables; it runs on the executor, in order with the steps.
func (s *Stepper) exportState() (State, error) {
	c := s.model.Context()
	st := State{}
	owned := map[*mlctx.Variable]bool{}
	for _, p := range s.params {
		v := s.variable(c, p)
		h, err := hostCopy(p.Name, v)
		if err != nil {
			return State{}, err
		}
		if !finite(h) {
			return State{}, fmt.Errorf("step.ExportState: parameter %s is not finite", p.Name)
		}
		st.Params = append(st.Params, h)
		owned[v] = true
		for _, ss := range s.stateShapes(p) {
			ov := c.GetVariableByScopeAndName(optimizerScope(ss.kind, p), p.Var())
			if ov == nil {
				return State{}, fmt.Errorf("step.ExportState: no %s state for %s", ss.kind, p.Name)
			}
			h, err := hostCopy(ss.kind+"/"+p.Name, ov)
			if err != nil {
				return State{}, err
			}
			st.Optimizer = append(st.Optimizer, h)
			owned[ov] = true
		}
	}
	for v := range c.IterVariables() {
		if owned[v] || s.frozen[v] {
			continue
		}
		h, err := hostCopy(v.ScopeAndName(), v)
		if err != nil {
			return State{}, err
		}
		st.Other = append(st.Other, h)
	}
	slices.SortFunc(st.Other, func(a, b HostTensor) int { return strings.Compare(a.Name, b.Name) })
	return st, nil
}

// ImportState restores what ExportState saved. Every parameter and optimizer variable must be
// present with its exact dtype and shape; Other variables missing from the context (the RNG
// state before the first step traced it) are created. Nothing may be pending; an open window is
// reopened at the restored step count.
func (s *Stepper) ImportState(st State) (err error) {
	defer xla.Recover(&err, "step.ImportState")
	if len(s.pending) > 0 {
		return fmt.Errorf("step.ImportState: %d dispatched steps not read yet", len(s.pending))
	}
	if st.OptimizerStep < 0 {
		return fmt.Errorf("step.ImportState: optimizer step %d is negative", st.OptimizerStep)
	}
	c := s.model.Context()
	byName := func(ts []HostTensor, what string) (map[string]HostTensor, error) {
		m := make(map[string]HostTensor, len(ts))
		for _, t := range ts {
			if _, dup := m[t.Name]; dup {
				return nil, fmt.Errorf("step.ImportState: %s %s given twice", what, t.Name)
			}
			m[t.Name] = t
		}
		return m, nil
	}
	params, err := byName(st.Params, "parameter")
	if err != nil {
		return err
	}
	opt, err := byName(st.Optimizer, "optimizer state")
	if err != nil {
		return err
	}
	type set struct {
		v *mlctx.Variable
		h HostTensor
	}
	var sets []set
	for _, p := range s.params {
		h, ok := params[p.Name]
		if !ok {
			return fmt.Errorf("step.ImportState: parameter %s is missing", p.Name)
		}
		sets = append(sets, set{s.variable(c, p), h})
		delete(params, p.Name)
		for _, ss := range s.stateShapes(p) {
			key := ss.kind + "/" + p.Name
			h, ok := opt[key]
			if !ok {
				return fmt.Errorf("step.ImportState: optimizer state %s is missing (saved with another optimizer?)", key)
			}
			if h, err = castState(h, ss.shape.DType); err != nil {
				return err
			}
			sets = append(sets, set{c.GetVariableByScopeAndName(optimizerScope(ss.kind, p), p.Var()), h})
			delete(opt, key)
		}
	}
	for name := range params {
		return fmt.Errorf("step.ImportState: parameter %s is not in the model", name)
	}
	for name := range opt {
		return fmt.Errorf("step.ImportState: optimizer state %s does not belong to this model and optimizer", name)
	}
	for _, set := range sets {
		if err := checkShape(set.h, set.v.Shape()); err != nil {
			return err
		}
	}
	for _, h := range st.Other {
		i := strings.LastIndex(h.Name, "/")
		if i < 0 || h.Name[i+1:] == "" {
			return fmt.Errorf("step.ImportState: variable name %q has no scope", h.Name)
		}
		scope, name := h.Name[:i], h.Name[i+1:]
		if scope == "" {
			scope = mlctx.RootScope
		}
		v := c.GetVariableByScopeAndName(scope, name)
		if v != nil && s.frozen[v] {
			return fmt.Errorf("step.ImportState: variable %s is a frozen parameter of the model, not training state", h.Name)
		}
		if v == nil {
			t, err := deviceless(h)
			if err != nil {
				return err
			}
			c.InAbsPath(scope).Checked(false).VariableWithValue(name, t).SetTrainable(false)
			continue
		}
		if err := checkShape(h, v.Shape()); err != nil {
			return err
		}
		sets = append(sets, set{v, h})
	}
	for _, set := range sets {
		t, err := deviceless(set.h)
		if err != nil {
			return err
		}
		if err := set.v.SetValue(t); err != nil {
			return fmt.Errorf("step.ImportState: %s: %w", set.h.Name, err)
		}
	}
	s.t, s.consec = st.OptimizerStep, 0
	if s.win.lr != nil {
		return s.openWindow()
	}
	return nil
}

func checkShape(h HostTensor, want shapes.Shape) error {
	if h.DType != want.DType || !slices.Equal(h.Shape, want.Dimensions) {
		return fmt.Errorf("step.ImportState: %s is %s%v, the model has %s", h.Name, h.DType, h.Shape, want)
	}
	return nil
}

// hostCopy copies a variable's value into a new byte slice.
func hostCopy(name string, v *mlctx.Variable) (HostTensor, error) {
	t, owned, err := wholeValue(v)
	if err != nil {
		return HostTensor{}, fmt.Errorf("step: reading %s: %w", name, err)
	}
	if owned {
		defer t.FinalizeAll()
	}
	sh := t.Shape()
	h := HostTensor{Name: name, DType: sh.DType, Shape: slices.Clone(sh.Dimensions)}
	if sh.Size() == 0 {
		h.Bytes = []byte{}
		return h, nil
	}
	if err := t.ConstBytes(func(b []byte) { h.Bytes = slices.Clone(b) }); err != nil {
		return HostTensor{}, fmt.Errorf("step: copying %s to the host: %w", name, err)
	}
	return h, nil
}

// deviceless builds a host tensor from h.
func deviceless(h HostTensor) (*tensors.Tensor, error) {
	sh := shapes.Make(h.DType, h.Shape...)
	if int64(len(h.Bytes)) != int64(sh.Memory()) {
		return nil, fmt.Errorf("step.ImportState: %s: %d bytes for %s (%d bytes)", h.Name, len(h.Bytes), sh, sh.Memory())
	}
	t := tensors.FromShape(sh)
	if sh.Size() == 0 {
		return t, nil
	}
	if err := t.MutableBytes(func(b []byte) { copy(b, h.Bytes) }); err != nil {
		return nil, fmt.Errorf("step.ImportState: %s: %w", h.Name, err)
	}
	return t, nil
}

// finite reports whether a float32, bfloat16 or float16 tensor holds only finite values (other
// dtypes: true): a value is not finite when its exponent bits are all ones.
func finite(h HostTensor) bool {
	switch h.DType {
	case dtypes.Float32:
		for i := 0; i+4 <= len(h.Bytes); i += 4 {
			bits := uint32(h.Bytes[i]) | uint32(h.Bytes[i+1])<<8 | uint32(h.Bytes[i+2])<<16 | uint32(h.Bytes[i+3])<<24
			f := math.Float32frombits(bits)
			if math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) {
				return false
			}
		}
	case dtypes.BFloat16, dtypes.Float16:
		exp := uint16(0x7f80) // bfloat16: 8 exponent bits
		if h.DType == dtypes.Float16 {
			exp = 0x7c00 // float16: 5
		}
		for i := 0; i+2 <= len(h.Bytes); i += 2 {
			if (uint16(h.Bytes[i])|uint16(h.Bytes[i+1])<<8)&exp == exp {
				return false
			}
		}
	}
	return true
}

// castState converts saved optimizer state h to dtype want when both are floating-point dtypes
// of the same size in elements, as torch's Optimizer.load_state_dict casts a state tensor to its
// parameter's dtype: a checkpoint whose AdamW state is float32 (saved by a gotpu that kept the
// state of bf16 parameters in float32) resumes with bf16 state, rounded to nearest even, and the
// other way round. Other mismatches are left to checkShape's error.
func castState(h HostTensor, want dtypes.DType) (HostTensor, error) {
	from, ok1 := models.FileDTypeOf(h.DType)
	to, ok2 := models.FileDTypeOf(want)
	if h.DType == want || !ok1 || !ok2 {
		return h, nil
	}
	n := 1
	for _, d := range h.Shape {
		n *= d
	}
	vals := make([]float32, n)
	if err := safetensors.DecodeFloat32(from, h.Bytes, vals); err != nil {
		return HostTensor{}, fmt.Errorf("step.ImportState: %s: %w", h.Name, err)
	}
	b, err := safetensors.EncodeFloat32(to, vals)
	if err != nil {
		return HostTensor{}, fmt.Errorf("step.ImportState: %s: %w", h.Name, err)
	}
	h.DType, h.Bytes = want, b
	return h, nil
}

// wholeValue returns v's whole value. A sharded variable's shards are merged into a new tensor
// the caller owns (owned): GoMLX's Variable.Value would keep the merged copy in the variable,
// doubling what a save holds until the next step.
func wholeValue(v *mlctx.Variable) (t *tensors.Tensor, owned bool, err error) {
	if spec := v.ShardingSpec(); spec != nil && !spec.IsReplicated() {
		dv, err := v.DistributedValue()
		if err != nil {
			return nil, false, err
		}
		t, err := dv.Merge()
		return t, err == nil, err
	}
	t, err = v.Value()
	return t, false, err
}
