package xla

import (
	"context"
	"errors"
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

// ErrInvalidHLOSpec is wrapped by the error StableHLO and StableHLOContext return for an HLOSpec
// that cannot describe a program (the message names the field).
var ErrInvalidHLOSpec = errors.New("invalid xla.HLOSpec")

// maxMeshDevices bounds the devices of an HLOSpec.Mesh (a trace allocates per-device records).
const maxMeshDevices = 1 << 16

// HLOSpec describes a program to trace to StableHLO text.
//
// Three kinds of program: single-device (neither Replicas above 1 nor Mesh), SPMD (Replicas above 1:
// one program per replica, collectives written by the graph), and AutoSharding (Mesh set: one
// global-view program whose arguments and results carry Shardy sharding annotations over a named
// device mesh, partitioned by XLA's Shardy over the mesh's devices). Replicas above 1 and Mesh are
// mutually exclusive.
type HLOSpec struct {
	// Name is the module's name.
	Name string
	// Replicas above 1 make an SPMD program over that many replicas (the module's num_replicas):
	// one program that every replica runs on its own inputs, synchronised only by the collectives
	// the graph function builds with graph.Graph.Distributed(). 0 or 1 is a single-device program.
	Replicas int
	// Inputs are the shapes of the program's inputs: one replica's for an SPMD program, the global
	// (unsharded) shapes for an AutoSharding program.
	Inputs []shapes.Shape

	// Mesh makes an AutoSharding program over its devices (the module's num_partitions, with
	// num_replicas 1, and an `sdy.mesh @<name>` declaration), as GoMLX's graph.Graph.SetAutoSharding
	// builds it. Every sharding spec of the trace — InputShardings, OutputShardings and the context
	// variables' (Variable.SetShardingSpec) — must be over this very *DeviceMesh: GoMLX matches
	// meshes by pointer. Its name must be a valid identifier (distributed.DefaultMeshName, "mesh",
	// unless SetName changed it); its LogicalDeviceAssignment is not written, as GoMLX v0.26.0's XLA
	// backend does not write it either. The graph function must not build collectives
	// (graph.Graph.Distributed() panics in an AutoSharding graph): Shardy inserts them.
	Mesh *distributed.DeviceMesh
	// InputShardings, for an AutoSharding program, gives the sharding of each of Inputs (same
	// length, or empty): the argument is annotated with it. A nil entry (or an empty slice) is a
	// replicated input, annotated as such (distributed.NewReplicatedShardingSpec(Mesh)), so every
	// argument of an AutoSharding trace carries an sdy.sharding annotation.
	InputShardings []*distributed.ShardingSpec
	// OutputShardings, for an AutoSharding program, gives the sharding of each output the graph
	// function returns (same length as its outputs, or empty); nil entries, or an empty slice, are
	// replicated. The outputs StableHLOContext adds for updated variables, before the function's,
	// always carry their variable's sharding and take no entry here.
	OutputShardings []*distributed.ShardingSpec
}

// autoSharding reports whether the spec describes an AutoSharding program.
func (s HLOSpec) autoSharding() bool { return s.Mesh != nil }

func (s HLOSpec) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidHLOSpec, fmt.Sprintf(format, args...))
	}
	if s.Name == "" {
		return bad("xla.HLOSpec.Name: empty")
	}
	if s.Replicas < 0 || s.Replicas > maxVirtualDevices {
		return bad("xla.HLOSpec.Replicas: %d is not in [0, %d]", s.Replicas, maxVirtualDevices)
	}
	for i, in := range s.Inputs {
		if !in.Ok() || in.IsTuple() {
			return bad("xla.HLOSpec.Inputs[%d]: invalid shape %s", i, in)
		}
	}
	if s.Mesh == nil {
		if len(s.InputShardings) > 0 || len(s.OutputShardings) > 0 {
			return bad("xla.HLOSpec.InputShardings/OutputShardings: shardings need a Mesh (an AutoSharding program)")
		}
		return nil
	}
	if s.Replicas > 1 {
		return bad("xla.HLOSpec.Replicas %d and xla.HLOSpec.Mesh are mutually exclusive: a program is SPMD or AutoSharding", s.Replicas)
	}
	if !distributed.IsNameValid(s.Mesh.Name()) {
		return bad("xla.HLOSpec.Mesh: name %q is not an identifier (a letter, then letters, digits or _)", s.Mesh.Name())
	}
	if n := s.Mesh.NumDevices(); n < 1 || n > maxMeshDevices {
		return bad("xla.HLOSpec.Mesh: %d devices (axes %v of sizes %v) is not in [1, %d]",
			n, s.Mesh.AxesNames(), s.Mesh.AxesSizes(), maxMeshDevices)
	}
	for i, size := range s.Mesh.AxesSizes() {
		if size < 1 {
			return bad("xla.HLOSpec.Mesh: axis %q has size %d", s.Mesh.AxesNames()[i], size)
		}
	}
	if len(s.InputShardings) > 0 && len(s.InputShardings) != len(s.Inputs) {
		return bad("xla.HLOSpec.InputShardings: %d specs for %d inputs (give one per input, or none)",
			len(s.InputShardings), len(s.Inputs))
	}
	for i, spec := range s.InputShardings {
		if err := s.checkSharding(spec, s.Inputs[i].Rank()); err != nil {
			return bad("xla.HLOSpec.InputShardings[%d]: %v", i, err)
		}
	}
	for i, spec := range s.OutputShardings {
		if err := s.checkSharding(spec, -1); err != nil {
			return bad("xla.HLOSpec.OutputShardings[%d]: %v", i, err)
		}
	}
	return nil
}

// checkSharding checks that spec (nil: replicated) is over the spec's mesh, names only its axes
// (each once) and, when rank >= 0, describes no more axes than the tensor has.
func (s HLOSpec) checkSharding(spec *distributed.ShardingSpec, rank int) error {
	if spec == nil {
		return nil
	}
	if spec.Mesh != s.Mesh {
		name := "<nil>"
		if spec.Mesh != nil {
			name = spec.Mesh.Name()
		}
		return fmt.Errorf("its mesh %q is not xla.HLOSpec.Mesh (%q; GoMLX matches meshes by pointer)", name, s.Mesh.Name())
	}
	if err := spec.Validate(); err != nil {
		return fmt.Errorf("%v (mesh %q has axes %v)", err, s.Mesh.Name(), s.Mesh.AxesNames())
	}
	if rank >= 0 && spec.Rank() > rank {
		return fmt.Errorf("%s describes %d axes of a rank-%d tensor", spec, spec.Rank(), rank)
	}
	return nil
}

// sharding returns spec, or the replicated spec over the mesh for nil.
func (s HLOSpec) sharding(spec *distributed.ShardingSpec) *distributed.ShardingSpec {
	if spec == nil {
		return distributed.NewReplicatedShardingSpec(s.Mesh)
	}
	return spec
}

// StableHLO traces build for spec's inputs and returns the StableHLO module that gotpu would hand
// to a PJRT plugin for it, as text. It needs no device, no plugin and no cgo (it works in -tags
// noxla binaries): the graph is built by the same GoMLX graph code as always, on a tracing backend
// that writes each operation with go-xla's StableHLO builder — the library GoMLX's XLA backend
// writes its programs with — instead of compiling it. Nothing runs.
//
// Spec validation errors wrap ErrInvalidHLOSpec. Graph-building errors (GoMLX panics) come back as
// *PanicError; an operation the tracer does not translate wraps ErrHLOUnsupported. ctx is checked
// before and after tracing, which itself cannot be interrupted.
func StableHLO(ctx context.Context, spec HLOSpec, build func(inputs []*graph.Node) []*graph.Node) (string, error) {
	return trace(ctx, spec, func(_ *graph.Graph, in []*graph.Node) ([]*graph.Node, []*distributed.ShardingSpec) {
		return build(in), nil
	})
}

// StableHLOContext is StableHLO for a graph function over a GoMLX context (a model's variables), as
// context.Exec runs it: each variable the function reads becomes an input after spec.Inputs, and
// the new values of the variables it sets (Variable.SetValueGraph) become outputs before the
// function's own, in the context's variable order. Variables are read for their shapes only; their
// values are neither read nor changed. As for every graph context.Exec builds, each variable used
// keeps GoMLX's small per-graph record of its nodes afterwards (GoMLX has no API to drop it), so
// trace a program when needed, not in a loop.
//
// In an AutoSharding trace (spec.Mesh set) a variable's input is its global shape annotated with
// its sharding spec (Variable.SetShardingSpec, over spec.Mesh), and its output, when the function
// updates it, carries the same annotation: context.Exec reads an updated variable's output shards
// back with the variable's spec, so the program must produce them that way. A variable without a
// spec is replicated — the default context.Exec.AutoSharding gives the context — and is annotated
// so: for the trace only, StableHLOContext sets the replicated spec on the context's variables that
// have none and clears it again afterwards (GoMLX would keep it), so the trace must not run
// concurrently with other uses of the context. The text is then what GoMLX's XLA backend builds
// for context.Exec configured with AutoSharding(spec.Mesh), WithInputShardingSpecs(the inputs'
// specs) and WithOutputShardingSpecs(the updated variables' specs, then the function outputs'),
// each nil spec spelled distributed.NewReplicatedShardingSpec(spec.Mesh).
func StableHLOContext(ctx context.Context, spec HLOSpec, c *mlctx.Context,
	build func(c *mlctx.Context, inputs []*graph.Node) []*graph.Node) (string, error) {
	if c == nil {
		return "", fmt.Errorf("xla.StableHLOContext %s: nil context", spec.Name)
	}
	if spec.autoSharding() && spec.validate() == nil {
		// context.Exec.AutoSharding makes replicated the default spec of the context's variables;
		// that default is unexported, so set it on each variable for this trace.
		replicated := distributed.NewReplicatedShardingSpec(spec.Mesh)
		var defaulted []*mlctx.Variable
		for v := range c.IterVariables() {
			if v.ShardingSpec() == nil {
				if err := v.SetShardingSpec(replicated); err != nil {
					return "", fmt.Errorf("xla.StableHLOContext %s: variable %s: %w", spec.Name, v.ScopeAndName(), err)
				}
				defaulted = append(defaulted, v)
			}
		}
		defer func() {
			for _, v := range defaulted {
				_ = v.SetShardingSpec(nil) // a plain field write in GoMLX v0.26.0 (no value is resharded)
			}
		}()
	}
	return trace(ctx, spec, func(g *graph.Graph, in []*graph.Node) ([]*graph.Node, []*distributed.ShardingSpec) {
		outs := build(c, in)
		var all []*graph.Node
		var specs []*distributed.ShardingSpec
		for v := range c.IterVariables() {
			if v.ChangedInGraph(g) {
				all = append(all, v.ValueGraph(g))
				specs = append(specs, v.ShardingSpec())
			}
		}
		return append(all, outs...), specs
	})
}

// trace builds spec's program. build returns the outputs and, for an AutoSharding program, the
// shardings of its leading outputs (updated variables); spec.OutputShardings cover the rest.
func trace(ctx context.Context, spec HLOSpec,
	build func(*graph.Graph, []*graph.Node) ([]*graph.Node, []*distributed.ShardingSpec)) (text string, err error) {
	if err := spec.validate(); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("xla.StableHLO %s: %w", spec.Name, err)
	}
	registerDotGradients() // the gradients gotpu's runtimes build, also when no runtime was opened
	defer Recover(&err, "xla.StableHLO "+spec.Name)
	numDevices := spec.Replicas
	if spec.autoSharding() {
		numDevices = spec.Mesh.NumDevices()
	}
	be := newHLOBackend(numDevices)
	g := graph.NewGraph(be, spec.Name)
	defer g.Finalize()
	switch {
	case spec.autoSharding():
		if err := g.SetAutoSharding(spec.Mesh); err != nil {
			return "", fmt.Errorf("xla.StableHLO %s: %w", spec.Name, err)
		}
	case spec.Replicas > 1:
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
		name := fmt.Sprintf("arg%d", i)
		if spec.autoSharding() {
			var sh *distributed.ShardingSpec
			if i < len(spec.InputShardings) {
				sh = spec.InputShardings[i]
			}
			in[i] = graph.ShardedParameter(g, name, s, spec.sharding(sh))
		} else {
			in[i] = graph.Parameter(g, name, s)
		}
	}
	outs, leading := build(g, in)
	if len(outs) == 0 {
		return "", fmt.Errorf("xla.StableHLO %s: the graph function returned no outputs", spec.Name)
	}
	if !spec.autoSharding() {
		g.Compile(outs...)
	} else {
		own := len(outs) - len(leading)
		if len(spec.OutputShardings) > 0 && len(spec.OutputShardings) != own {
			return "", fmt.Errorf("%w: xla.HLOSpec.OutputShardings: %d specs for the %d outputs of the graph function %s "+
				"(give one per output, or none)", ErrInvalidHLOSpec, len(spec.OutputShardings), own, spec.Name)
		}
		specs := make([]*distributed.ShardingSpec, len(outs))
		for i := range outs {
			var sh *distributed.ShardingSpec
			if i < len(leading) {
				sh = leading[i]
			} else if k := i - len(leading); k < len(spec.OutputShardings) {
				sh = spec.OutputShardings[k]
			}
			specs[i] = spec.sharding(sh)
			if err := spec.checkSharding(specs[i], outs[i].Rank()); err != nil {
				if k := i - len(leading); k >= 0 {
					return "", fmt.Errorf("%w: xla.HLOSpec.OutputShardings[%d] (output #%d of %s): %v",
						ErrInvalidHLOSpec, k, i, spec.Name, err)
				}
				return "", fmt.Errorf("xla.StableHLO %s: output #%d (an updated variable): %w", spec.Name, i, err)
			}
		}
		g.CompileWithSharding(outs, specs)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("xla.StableHLO %s: %w", spec.Name, err)
	}
	return string(be.text), nil
}
