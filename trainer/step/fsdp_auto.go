package step

import (
	"cmp"
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads better unqualified.
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
	"github.com/gomlx/gomlx/pkg/support/xslices"
)

// On a PJRT plugin an FSDP step is the AutoSharding program FSDPStableHLO prints: the gradient and
// train programs of data parallelism on one device (gradGraph, trainGraph), over the global batch,
// with every input, variable and output annotated over the mesh, for XLA's Shardy to partition.
// GoMLX's context.Exec feeds each device its shards (the batch's rows, the variables' layouts) and
// reads each device's shards of the results back into the variables. (GoMLX v0.26.0's XLA backend
// cannot run the SPMD form there: it refuses the sharding spec context.Exec.SPMD gives every
// variable of an SPMD program, "mesh not found".)

// autoExec makes e an AutoSharding program over the FSDP mesh, on the runtime's first devices.
//
// The device assignment is given explicitly: GoMLX v0.26.0 sets a default one only for a mesh of
// more than one device (graph.setupBuilderDistribution, taking a one-device program for a
// portable one), but an AutoSharding program is not portable and go-xla's compile refuses one
// without an assignment ("no device assignment given to Client.Compile()"). So a 1 × 1 mesh
// (fsdp full_shard on one device) runs on device 0, where the data-parallel one-device step runs.
func (s *Stepper) autoExec(e *mlctx.Exec) {
	e.AutoSharding(s.fsdp.mesh)
	e.WithDeviceAssignment(xslices.Iota(backends.DeviceNum(0), s.fsdp.mesh.NumDevices()))
}

// autoOutputs wraps a graph function of an AutoSharding program so that, once it has built its
// graph, the Exec's output shardings are set: the updated variables' layouts (context.Exec returns
// them first, in the context's order; which variables a program updates is known only now) and
// then the function's own outputs, which outSpecs gives (nil: replicated).
func (s *Stepper) autoOutputs(e **mlctx.Exec, fn GraphFunc, outSpecs func(outs []*Node) []*distributed.ShardingSpec) GraphFunc {
	return func(c *mlctx.Context, nodes []*Node) []*Node {
		outs := fn(c, nodes)
		g := nodes[0].Graph()
		replicated := distributed.NewReplicatedShardingSpec(s.fsdp.mesh)
		var specs []*distributed.ShardingSpec
		for v := range c.IterVariables() {
			if v.ChangedInGraph(g) {
				specs = append(specs, cmp.Or(v.ShardingSpec(), replicated))
			}
		}
		for _, sp := range outSpecs(outs) {
			specs = append(specs, cmp.Or(sp, replicated))
		}
		(*e).WithOutputShardingSpecs(specs...)
		return outs
	}
}

// gradOutputSpecs are gradGraph's outputs' shardings: the loss sum pair and term count replicated,
// each gradient sum laid out as its parameter (the accumulators stay sharded between micro-batches).
func (s *Stepper) gradOutputSpecs([]*Node) []*distributed.ShardingSpec {
	specs := make([]*distributed.ShardingSpec, carryScalars, carryScalars+len(s.params))
	return append(specs, s.fsdp.specs...)
}

// trainOutputSpecs: trainGraph's five outputs are scalars and the counter, all replicated (as
// are evalGraph's loss sum, term count and logits).
func (s *Stepper) trainOutputSpecs(outs []*Node) []*distributed.ShardingSpec {
	return make([]*distributed.ShardingSpec, len(outs))
}

// autoInputSpecs are the input shardings of an AutoSharding gradient or train program whose
// inputs are nb batch tensors, then extra replicated ones (the train program's window table and
// counter), then, when acc, the accumulators (gradOutputSpecs' layout).
func (s *Stepper) autoInputSpecs(batch []int, extra int, acc bool) ([]*distributed.ShardingSpec, error) {
	var specs []*distributed.ShardingSpec
	for _, rank := range batch {
		axes := make([]distributed.AxisSpec, rank)
		axes[0] = distributed.AxisSpec{DataAxis, FSDPAxis}
		sp, err := distributed.NewShardingSpec(s.fsdp.mesh, axes...)
		if err != nil {
			return nil, fmt.Errorf("step: batch sharding: %w", err)
		}
		specs = append(specs, sp)
	}
	replicated := distributed.NewReplicatedShardingSpec(s.fsdp.mesh)
	for range extra {
		specs = append(specs, replicated)
	}
	if acc {
		for _, sp := range s.gradOutputSpecs(nil) {
			specs = append(specs, cmp.Or(sp, replicated))
		}
	}
	return specs, nil
}

// autoEvalInputs puts a whole evaluation batch on every device of an AutoSharding stepper (the
// evaluation program takes it replicated: autoEvalSpecs): the weights stay sharded (XLA gathers
// what each device needs), so evaluating never puts the whole model on one device. It returns the
// per-device arguments.
func (s *Stepper) autoEvalInputs(in []*tensors.Tensor) ([]*tensors.Tensor, error) {
	// Copies for the other devices are made on the host first: a transfer may drop the host copy.
	args := make([]*tensors.Tensor, 0, len(in)*s.cfg.NumReplicas)
	release := func() {
		for _, a := range args[len(in):] {
			a.FinalizeAll()
		}
	}
	args = append(args, in...)
	for range s.cfg.NumReplicas - 1 {
		for _, t := range in {
			c, err := t.LocalClone()
			if err != nil {
				release()
				return nil, fmt.Errorf("evaluation batch: %w", err)
			}
			args = append(args, c)
		}
	}
	for r := range s.cfg.NumReplicas {
		if err := s.rt.Transfer(r, args[r*len(in):(r+1)*len(in)]...); err != nil {
			release()
			return nil, fmt.Errorf("evaluation batch on device %d: %w", r, err)
		}
	}
	return args, nil
}

// autoEvalSpecs configures the evaluation program's n inputs as replicated. It runs on the
// executor goroutine, where the program is built, as execute configures the step programs.
func (s *Stepper) autoEvalSpecs(n int) {
	replicated := distributed.NewReplicatedShardingSpec(s.fsdp.mesh)
	specs := make([]*distributed.ShardingSpec, n)
	for i := range specs {
		specs[i] = replicated
	}
	s.eval.WithInputShardingSpecs(specs...)
}
