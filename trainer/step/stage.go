package step

import (
	"context"
	"fmt"

	"slices"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/xla"
)

// StagedTensor describes one tensor of a StateSource, whole (never a shard).
type StagedTensor struct {
	Name  string
	DType dtypes.DType
	Shape []int
}

// Bytes is the tensor's size.
func (t StagedTensor) Bytes() int64 {
	n := int64(t.DType.Size())
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// State parts of a StateSource, keyed as State's.
const (
	PartParams = iota
	PartOptimizer
	PartOther
)

// StateSource is the training state left on the devices, staged to the host one tensor at a time
// (checkpoint.TensorSource, through the trainer): a save holds about one tensor in host memory,
// not the whole model and optimizer state as ExportState does. A sharded tensor's shards are
// copied from their devices straight into the caller's buffer, in place.
//
// It is valid until the stepper runs another step: Dispatch donates the variables' buffers.
type StateSource struct {
	s     *Stepper
	parts [3][]StagedTensor
	vars  [3][]*mlctx.Variable
	// OptimizerStep is the number of updates applied (torch's state["step"]).
	OptimizerStep int
}

// StateSource reads every dispatched step's results (one blocking read, like ExportState; Collect
// or TakeCollected returns them) and describes the state for staging: parameters by HF name,
// optimizer state by "<kind>/<HF name>", other variables by scope and name.
func (s *Stepper) StateSource(ctx context.Context) (src *StateSource, err error) {
	defer xla.Recover(&err, "step.StateSource")
	if err := s.read(ctx, "stage state", nil); err != nil {
		return nil, err
	}
	c := s.model.Context()
	src = &StateSource{s: s, OptimizerStep: s.t}
	add := func(part int, name string, v *mlctx.Variable) {
		sh := v.Shape()
		src.parts[part] = append(src.parts[part], StagedTensor{Name: name, DType: sh.DType, Shape: slices.Clone(sh.Dimensions)})
		src.vars[part] = append(src.vars[part], v)
	}
	owned := map[*mlctx.Variable]bool{}
	for _, p := range s.params {
		v := s.variable(c, p)
		add(PartParams, p.Name, v)
		owned[v] = true
		for _, ss := range s.stateShapes(p) {
			ov := c.GetVariableByScopeAndName(optimizerScope(ss.kind, p), p.Var())
			if ov == nil {
				return nil, fmt.Errorf("step.StateSource: no %s state for %s", ss.kind, p.Name)
			}
			add(PartOptimizer, ss.kind+"/"+p.Name, ov)
			owned[ov] = true
		}
	}
	var other []*mlctx.Variable
	for v := range c.IterVariables() {
		if !owned[v] && !s.frozen[v] {
			other = append(other, v)
		}
	}
	slices.SortFunc(other, func(a, b *mlctx.Variable) int {
		if a.ScopeAndName() < b.ScopeAndName() {
			return -1
		}
		if a.ScopeAndName() > b.ScopeAndName() {
			return 1
		}
		return 0
	})
	for _, v := range other {
		add(PartOther, v.ScopeAndName(), v)
	}
	return src, nil
}

// Tensors lists part's tensors (PartParams, PartOptimizer, PartOther).
func (src *StateSource) Tensors(part int) []StagedTensor { return slices.Clone(src.parts[part]) }

// Stage copies tensor i of part, whole, into dst (exactly its size), on the runtime's executor
// after everything dispatched before. A parameter that is not finite is an error: a checkpoint
// is never written from diverged weights.
func (src *StateSource) Stage(ctx context.Context, part, i int, dst []byte) (err error) {
	defer xla.Recover(&err, "step.StateSource.Stage")
	if part < 0 || part > PartOther || i < 0 || i >= len(src.parts[part]) {
		return fmt.Errorf("step.StateSource.Stage: no tensor %d in part %d", i, part)
	}
	t := src.parts[part][i]
	if int64(len(dst)) != t.Bytes() {
		return fmt.Errorf("step.StateSource.Stage: %s: %d bytes for a %d-byte tensor", t.Name, len(dst), t.Bytes())
	}
	v := src.vars[part][i]
	return src.s.stream.Read(ctx, "stage "+t.Name, func() error {
		if err := stageVariable(v, dst); err != nil {
			return fmt.Errorf("step: staging %s: %w", t.Name, err)
		}
		if part == PartParams && !finite(HostTensor{DType: t.DType, Bytes: dst}) {
			return fmt.Errorf("step: parameter %s is not finite", t.Name)
		}
		return nil
	})
}

// stageVariable copies v's whole value into dst. A variable sharded along one dimension over
// the fsdp axis is gathered from the devices of data coordinate 0 (device k holds shard k):
// for each index of the dimensions before the sharded one, shard k's rows land at k × the
// shard's size along it. Other variables are copied whole.
func stageVariable(v *mlctx.Variable, dst []byte) error {
	spec := v.ShardingSpec()
	dim := -1
	if spec != nil && !spec.IsReplicated() {
		for d, axes := range spec.Axes {
			if len(axes) > 0 {
				if dim >= 0 {
					return fmt.Errorf("sharded along more than one dimension")
				}
				dim = d
			}
		}
	}
	if dim < 0 {
		t, err := v.Value()
		if err != nil {
			return err
		}
		return copyBytes(t, dst)
	}
	dv, err := v.DistributedValue()
	if err != nil {
		return err
	}
	shape := v.Shape()
	n := spec.NumDevicesShardingAxis(dim)
	shards := dv.Shards()
	if n < 1 || len(shards) < n || shape.Dimensions[dim]%n != 0 {
		return fmt.Errorf("%d shards for %d along dimension %d of %s", len(shards), n, dim, shape)
	}
	outer := 1
	for _, d := range shape.Dimensions[:dim] {
		outer *= d
	}
	inner := shape.DType.Size()
	for _, d := range shape.Dimensions[dim+1:] {
		inner *= d
	}
	rows := shape.Dimensions[dim] / n
	block := rows * inner
	for k := range n {
		var err2 error
		err := shards[k].ConstBytes(func(b []byte) {
			if len(b) != outer*block {
				err2 = fmt.Errorf("shard %d has %d bytes, want %d", k, len(b), outer*block)
				return
			}
			for o := range outer {
				copy(dst[(o*n+k)*block:(o*n+k+1)*block], b[o*block:(o+1)*block])
			}
		})
		if err != nil {
			return err
		}
		if err2 != nil {
			return err2
		}
	}
	return nil
}

func copyBytes(t *tensors.Tensor, dst []byte) error {
	var err2 error
	err := t.ConstBytes(func(b []byte) {
		if len(b) != len(dst) {
			err2 = fmt.Errorf("%d bytes, want %d", len(b), len(dst))
			return
		}
		copy(dst, b)
	})
	if err != nil {
		return err
	}
	return err2
}
