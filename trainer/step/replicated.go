package step

import (
	"context"
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads better unqualified.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/xla"
)

// Program names one of the Stepper's device programs, for ProgramGraph and StableHLO.
type Program string

const (
	// ProgramGradient is one replica's forward and backward pass on its first accumulation
	// micro-batch (later ones add an accumulator input); it has no collective.
	ProgramGradient Program = "gradient"
	// ProgramEval is the evaluation forward pass.
	ProgramEval Program = "eval"
	// ProgramReplicatedStep is the data-parallel train step, what Stepper.Step runs for a step
	// without accumulation: an SPMD program over Config.NumReplicas replicas in which each replica
	// computes its gradients, one in-graph all-reduce (sum) over all replicas combines gradients,
	// loss sum and loss-term count, and every replica applies the same clipped optimizer update —
	// torch_xla's xm.optimizer_step, with no host transfer inside the step. With accumulation,
	// Step runs a variant that also takes the replica's accumulators.
	ProgramReplicatedStep Program = "replicated_step"
)

// BatchShape is one replica's batch as a program sees it.
type BatchShape struct {
	Size, SeqLen int
	// TokenTypeIDs is set for models fed token_type_ids (BERT with segment ids).
	TokenTypeIDs bool
	// PositionIDs is set for a causal LM fed packed batches (data.PackBFD: position_ids).
	PositionIDs bool
}

// replicatedScalars is the number of per-step scalars of the update, one row of the window table
// the train step takes after the batch: lr, decay, a, b, c (window.go).
const replicatedScalars = 5

// GraphFunc is a graph function over the model's context, as context.Exec runs it.
type GraphFunc = func(c *mlctx.Context, inputs []*Node) []*Node

// ProgramGraph returns the trace specification (name, replicas, input shapes) and the graph
// function of one of the Stepper's programs for batch shape b: what StableHLO traces, and what a
// backend that executes SPMD programs compiles (ProgramReplicatedStep over Config.NumReplicas
// replicas, with the batch then the scalars lr, decay, a, b, c of hostScalars as inputs).
func (s *Stepper) ProgramGraph(p Program, b BatchShape) (xla.HLOSpec, GraphFunc, error) {
	if b.Size <= 0 || b.SeqLen <= 0 {
		return xla.HLOSpec{}, nil, fmt.Errorf("step.BatchShape: size %d × seq %d is not positive", b.Size, b.SeqLen)
	}
	if b.TokenTypeIDs && s.causal {
		return xla.HLOSpec{}, nil, fmt.Errorf("step.BatchShape.TokenTypeIDs: a causal LM's programs take no token_type_ids (no causal model reads them)")
	}
	if b.PositionIDs && !s.causal {
		return xla.HLOSpec{}, nil, fmt.Errorf("step.BatchShape.PositionIDs: packed batches are for causal LMs; this model is a sequence classifier")
	}
	spec := xla.HLOSpec{Name: fmt.Sprintf("gotpu_%s_%dx%d", p, b.Size, b.SeqLen), Inputs: s.batchShapes(b)}
	switch p {
	case ProgramGradient:
		return spec, s.gradGraph, nil
	case ProgramEval:
		return spec, s.evalGraph, nil
	case ProgramReplicatedStep:
		if s.cfg.NumReplicas < 2 {
			return xla.HLOSpec{}, nil, fmt.Errorf("step: program %s: Config.NumReplicas is %d; the replicated step needs at least 2",
				p, s.cfg.NumReplicas)
		}
		w := s.cfg.window()
		spec.Inputs = append(spec.Inputs, shapes.Make(dtypes.Float32, w*w, replicatedScalars), shapes.Make(dtypes.Int32, 3))
		spec.Name = fmt.Sprintf("%s_%dreplicas", spec.Name, s.cfg.NumReplicas)
		spec.Replicas = s.cfg.NumReplicas
		return spec, s.trainGraph, nil
	}
	return xla.HLOSpec{}, nil, fmt.Errorf("step: unknown program %q (want %s, %s or %s)",
		p, ProgramGradient, ProgramEval, ProgramReplicatedStep)
}

// StableHLO returns the StableHLO text of one of the Stepper's programs for batch shape b, as
// gotpu would hand it to a PJRT plugin — without a plugin or device (xla.StableHLOContext). The
// model's variables are read for their shapes only. It is the program Step runs on every
// backend (gotpu's CPU backend executes the same SPMD graph with its own all-reduce).
func (s *Stepper) StableHLO(ctx context.Context, p Program, b BatchShape) (string, error) {
	spec, fn, err := s.ProgramGraph(p, b)
	if err != nil {
		return "", err
	}
	return xla.StableHLOContext(ctx, spec, s.model.Context(), fn)
}

// batchShapes are the shapes of batchInputs for b.
func (s *Stepper) batchShapes(b BatchShape) []shapes.Shape {
	ids := shapes.Make(dtypes.Int32, b.Size, b.SeqLen)
	in := []shapes.Shape{ids, ids}
	if b.TokenTypeIDs || b.PositionIDs { // at most one: ProgramGraph refuses the other
		in = append(in, ids)
	}
	if s.causal {
		return append(in, ids)
	}
	return append(in, shapes.Make(dtypes.Int32, b.Size))
}

// trainGraph is the train step, ProgramReplicatedStep. Inputs: the replica's batch, then the
// window table of per-step scalars [W·W, 5] and the counter int32[3] {j, k, consecutive skips}
// (window.go), then — for the last micro-batch of an accumulating step — the replica's loss sum
// (a float32 pair, gradGraph) and loss-term count so far and its gradient accumulators. Outputs, after the updated variables:
// the global loss sum, the global number of loss terms, the pre-clip global gradient norm, 1 if
// the update was applied, and the next counter. Every output is the same on all replicas. On
// one replica there is nothing to all-reduce.
func (s *Stepper) trainGraph(c *mlctx.Context, nodes []*Node) []*Node {
	p := len(s.params)
	nb := len(nodes) - 2
	var carry []*Node
	if nb > 4 {
		nb -= carryScalars + p
		carry = nodes[nb+2:]
	}
	b := s.splitBatch(nodes[:nb])
	table, ctr := nodes[nb], nodes[nb+1]
	sum, terms, grads := s.replicaGradients(c, b)
	if carry != nil {
		sum, terms = Add(Add(carry[0], carry[1]), sum), Add(carry[2], terms)
		for i := range grads {
			grads[i] = Add(carry[carryScalars+i], grads[i])
		}
	}
	// One all-reduce for every replica-local quantity the update needs: the gradient sums and
	// the loss sum and term count (the mean's numerator and denominator over the global batch).
	local := append(append(make([]*Node, 0, p+2), grads...), sum, terms)
	global := local
	// An AutoSharding program (FSDPStableHLO) is global: its sums are over the global batch
	// already, and XLA's partitioner inserts the collectives.
	if s.cfg.NumReplicas > 1 && !s.omitAllReduce && sum.Graph().DistributedStrategy() != distributed.AutoSharding {
		global = sum.Graph().Distributed().AllReduce(local, backends.ReduceOpSum)
	}
	sc := windowScalars(table, ctr, s.cfg.window())
	norm, applied := s.update(c, global[:p], global[p+1], sc, s.allowed(ctr), nil)
	return []*Node{global[p], global[p+1], norm, ConvertDType(applied, dtypes.Float32), nextCounter(ctr, applied)}
}
