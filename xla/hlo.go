package xla

import (
	"context"
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// ReplicaAxis is the name of the one device-mesh axis of the SPMD programs StableHLO traces: a
// graph function reduces over all replicas with g.Distributed().AllReduce (or
// .Along(ReplicaAxis)).
const ReplicaAxis = "replica"

// HLOSpec describes a program to trace to StableHLO text.
type HLOSpec struct {
	// Name is the module's name.
	Name string
	// Replicas above 1 make an SPMD program over that many replicas (the module's num_replicas):
	// one program that every replica runs on its own inputs, synchronised only by the collectives
	// the graph function builds with graph.Graph.Distributed(). 0 or 1 is a single-device program.
	Replicas int
	// Inputs are the shapes of the program's inputs (one replica's, for an SPMD program).
	Inputs []shapes.Shape
}

func (s HLOSpec) validate() error {
	if s.Name == "" {
		return fmt.Errorf("xla.HLOSpec.Name: empty")
	}
	if s.Replicas < 0 || s.Replicas > maxVirtualDevices {
		return fmt.Errorf("xla.HLOSpec.Replicas: %d is not in [0, %d]", s.Replicas, maxVirtualDevices)
	}
	for i, in := range s.Inputs {
		if !in.Ok() || in.IsTuple() {
			return fmt.Errorf("xla.HLOSpec.Inputs[%d]: invalid shape %s", i, in)
		}
	}
	return nil
}

// StableHLO traces build for spec's inputs and returns the StableHLO module that gotpu would hand
// to a PJRT plugin for it, as text. It needs no device, no plugin and no cgo (it works in -tags
// noxla binaries): the graph is built by the same GoMLX graph code as always, on a tracing backend
// that writes each operation with go-xla's StableHLO builder — the library GoMLX's XLA backend
// writes its programs with — instead of compiling it. Nothing runs.
//
// Graph-building errors (GoMLX panics) come back as *PanicError; an operation the tracer does not
// translate wraps ErrHLOUnsupported. ctx is checked before and after tracing, which itself cannot
// be interrupted.
func StableHLO(ctx context.Context, spec HLOSpec, build func(inputs []*graph.Node) []*graph.Node) (string, error) {
	return trace(ctx, spec, func(_ *graph.Graph, in []*graph.Node) []*graph.Node { return build(in) })
}

// StableHLOContext is StableHLO for a graph function over a GoMLX context (a model's variables), as
// context.Exec runs it: each variable the function reads becomes an input after spec.Inputs, and
// the new values of the variables it sets (Variable.SetValueGraph) become outputs before the
// function's own, in the context's variable order. Variables are read for their shapes only; their
// values are neither read nor changed. As for every graph context.Exec builds, each variable used
// keeps GoMLX's small per-graph record of its nodes afterwards (GoMLX has no API to drop it), so
// trace a program when needed, not in a loop.
func StableHLOContext(ctx context.Context, spec HLOSpec, c *mlctx.Context,
	build func(c *mlctx.Context, inputs []*graph.Node) []*graph.Node) (string, error) {
	if c == nil {
		return "", fmt.Errorf("xla.StableHLOContext %s: nil context", spec.Name)
	}
	return trace(ctx, spec, func(g *graph.Graph, in []*graph.Node) []*graph.Node {
		outs := build(c, in)
		var all []*graph.Node
		for v := range c.IterVariables() {
			if v.ChangedInGraph(g) {
				all = append(all, v.ValueGraph(g))
			}
		}
		return append(all, outs...)
	})
}

func trace(ctx context.Context, spec HLOSpec, build func(*graph.Graph, []*graph.Node) []*graph.Node) (text string, err error) {
	if err := spec.validate(); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("xla.StableHLO %s: %w", spec.Name, err)
	}
	registerDotGradients() // the gradients gotpu's runtimes build, also when no runtime was opened
	defer Recover(&err, "xla.StableHLO "+spec.Name)
	be := newHLOBackend(spec.Replicas)
	g := graph.NewGraph(be, spec.Name)
	defer g.Finalize()
	if spec.Replicas > 1 {
		mesh, err := distributed.NewDeviceMesh([]int{spec.Replicas}, []string{ReplicaAxis})
		if err != nil {
			return "", fmt.Errorf("xla.StableHLO %s: %w", spec.Name, err)
		}
		if err := g.SetSPMD(mesh); err != nil {
			return "", fmt.Errorf("xla.StableHLO %s: %w", spec.Name, err)
		}
	}
	in := make([]*graph.Node, len(spec.Inputs))
	for i, s := range spec.Inputs {
		in[i] = graph.Parameter(g, fmt.Sprintf("arg%d", i), s)
	}
	outs := build(g, in)
	if len(outs) == 0 {
		return "", fmt.Errorf("xla.StableHLO %s: the graph function returned no outputs", spec.Name)
	}
	g.Compile(outs...)
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("xla.StableHLO %s: %w", spec.Name, err)
	}
	return string(be.text), nil
}
