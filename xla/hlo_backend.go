package xla

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gomlx/go-xla/pkg/stablehlo"
	xladtypes "github.com/gomlx/go-xla/pkg/types/dtypes"
	xlabf16 "github.com/gomlx/go-xla/pkg/types/dtypes/bfloat16"
	xlashapes "github.com/gomlx/go-xla/pkg/types/shapes"
	"github.com/gomlx/go-xla/pkg/types/shardy"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/notimplemented"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// hloBackendName is the name the tracing backend reports (it appears in GoMLX's error messages).
const hloBackendName = "gotpu-stablehlo-trace"

// ErrHLOUnsupported is wrapped by the error a trace returns when the traced graph uses an operation
// the StableHLO tracer does not translate (see hlo_ops.go for the list it does).
var ErrHLOUnsupported = errors.New("operation not supported by the StableHLO tracer")

// hloBackend is a GoMLX backend that turns a graph into StableHLO text and nothing else: it has no
// device, holds no data and cannot execute. GoMLX v0.26.0's own XLA backend builds the same text
// with go-xla's stablehlo package but refuses to create a builder until a PJRT plugin is loaded,
// and prints the program only inside Compile; this backend drives go-xla's builder directly so the
// text of any gotpu program is available on a machine with no plugin (and without cgo).
//
// One backend traces one program: Compile stores the module text in text.
type hloBackend struct {
	notimplemented.Backend // data transfers: a trace never moves data, so they all fail

	numDevices int
	text       []byte
	compiled   bool
}

var _ backends.Backend = (*hloBackend)(nil)

func newHLOBackend(numDevices int) *hloBackend {
	return &hloBackend{numDevices: max(numDevices, 1)}
}

func (b *hloBackend) Name() string        { return hloBackendName }
func (b *hloBackend) String() string      { return hloBackendName }
func (b *hloBackend) Description() string { return "StableHLO text tracer (no device, cannot execute)" }
func (b *hloBackend) NumDevices() int     { return b.numDevices }
func (b *hloBackend) IsFinalized() bool   { return false }
func (b *hloBackend) Finalize()           {}

func (b *hloBackend) DeviceDescription(d backends.DeviceNum) string {
	return fmt.Sprintf("StableHLO trace device %d of %d", d, b.numDevices)
}

// Capabilities lists the operations hloBuilder translates and every dtype go-xla can write.
func (b *hloBackend) Capabilities() backends.Capabilities {
	c := backends.Capabilities{Operations: map[backends.OpType]bool{}, DTypes: map[dtypes.DType]bool{}}
	for _, op := range hloSupportedOps {
		c.Operations[op] = true
	}
	for _, dt := range []dtypes.DType{dtypes.Bool, dtypes.Int8, dtypes.Int16, dtypes.Int32, dtypes.Int64,
		dtypes.Uint8, dtypes.Uint16, dtypes.Uint32, dtypes.Uint64, dtypes.Float16, dtypes.BFloat16,
		dtypes.Float32, dtypes.Float64} {
		c.DTypes[dt] = true
	}
	return c
}

func (b *hloBackend) Builder(name string) backends.Builder {
	hb := &hloBuilder{
		backend:   b,
		name:      name,
		module:    stablehlo.New(stablehlo.NormalizeIdentifier(name)),
		reduceFns: map[reduceKey]*stablehlo.Function{},
	}
	hb.ErrFn = func(op backends.OpType) error {
		return fmt.Errorf("%w: %s (in program %q)", ErrHLOUnsupported, op, name)
	}
	hb.fn = hb.module.Main()
	return hb
}

// hloBuilder implements backends.Builder on go-xla's StableHLO builder. Operations it does not
// translate fall through to the embedded notimplemented.Builder, which returns ErrHLOUnsupported
// naming the operation.
type hloBuilder struct {
	notimplemented.Builder

	backend *hloBackend
	name    string
	module  *stablehlo.Builder
	fn      *stablehlo.Function

	numReplicas int // SPMD programs (DistributedSPMD)
	// meshes are the Shardy meshes of an AutoSharding program (DistributedAutoSharding), nil
	// otherwise; numDevices is the devices of the program: its replicas or its mesh's devices.
	meshes     []*shardy.DeviceMesh
	numDevices int
	// reduceFns caches the scalar reduction closures (add, max, ...) per dtype: StableHLO needs one
	// region per reducing op, and go-xla lets a closure be shared by the ops of its function.
	reduceFns map[reduceKey]*stablehlo.Function
}

type reduceKey struct {
	dtype dtypes.DType
	kind  backends.ReduceOpType
	// logical distinguishes and/or/xor reductions (kind is then ReduceOpUndefined).
	logical string
}

// hloOp is the backends.Op of hloBuilder: a go-xla value and its GoMLX shape.
type hloOp struct {
	v     *stablehlo.Value
	shape shapes.Shape
	b     *hloBuilder
}

func (b *hloBuilder) Name() string { return b.name }

func (b *hloBuilder) wrap(v *stablehlo.Value, err error) (backends.Op, error) {
	if err != nil {
		return nil, err
	}
	s, err := shapeFromXLA(v.Shape())
	if err != nil {
		return nil, err
	}
	return &hloOp{v: v, shape: s, b: b}, nil
}

// ops converts backends.Ops to this builder's values, rejecting foreign or nil ones.
func (b *hloBuilder) ops(what string, in ...backends.Op) ([]*hloOp, error) {
	out := make([]*hloOp, len(in))
	for i, op := range in {
		h, ok := op.(*hloOp)
		if !ok || h == nil {
			return nil, fmt.Errorf("xla: StableHLO trace %s: operand #%d is %T, not an op of this trace", what, i, op)
		}
		if h.b != b {
			return nil, fmt.Errorf("xla: StableHLO trace %s: operand #%d belongs to another program", what, i)
		}
		out[i] = h
	}
	return out, nil
}

func (b *hloBuilder) values(what string, in ...backends.Op) ([]*stablehlo.Value, error) {
	hs, err := b.ops(what, in...)
	if err != nil {
		return nil, err
	}
	vs := make([]*stablehlo.Value, len(hs))
	for i, h := range hs {
		vs[i] = h.v
	}
	return vs, nil
}

func (b *hloBuilder) OpShape(op backends.Op) (shapes.Shape, error) {
	hs, err := b.ops("OpShape", op)
	if err != nil {
		return shapes.Invalid(), err
	}
	return hs[0].shape, nil
}

// Parameter writes a function argument; with a sharding (AutoSharding programs only) it carries
// the sdy.sharding annotation, as GoMLX's XLA backend writes it.
func (b *hloBuilder) Parameter(name string, shape shapes.Shape, sharding *backends.ShardingSpec) (backends.Op, error) {
	xs, err := shapeToXLA(shape)
	if err != nil {
		return nil, fmt.Errorf("xla: StableHLO trace parameter %q: %w", name, err)
	}
	spec, err := b.shardySpec(sharding)
	if err != nil {
		return nil, fmt.Errorf("xla: StableHLO trace parameter %q: %w", name, err)
	}
	return b.wrap(b.fn.NamedInputWithSharding(name, xs, spec))
}

// shardySpec converts a GoMLX sharding spec (nil: none) to go-xla's, over the program's mesh of
// that name, as GoMLX's XLA backend does.
func (b *hloBuilder) shardySpec(sharding *backends.ShardingSpec) (*shardy.ShardingSpec, error) {
	if sharding == nil {
		return nil, nil
	}
	if b.meshes == nil {
		return nil, fmt.Errorf("sharding over mesh %q in program %q, which is not an AutoSharding program", sharding.Mesh, b.name)
	}
	var mesh *shardy.DeviceMesh
	for _, m := range b.meshes {
		if m.Name() == sharding.Mesh {
			mesh = m
			break
		}
	}
	if mesh == nil {
		return nil, fmt.Errorf("sharding over mesh %q, which program %q does not declare", sharding.Mesh, b.name)
	}
	spec := shardy.NewShardingSpec(mesh)
	for _, axes := range sharding.Axes {
		if len(axes) == 0 {
			spec.AddReplicated()
		} else {
			spec.AddShardedAxis(axes...)
		}
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return spec, nil
}

func (b *hloBuilder) Constant(flat any, dims ...int) (backends.Op, error) {
	if bf, ok := flat.([]bfloat16.BFloat16); ok {
		// GoMLX and go-xla each define their own bfloat16 type (same bits).
		conv := make([]xlabf16.BFloat16, len(bf))
		for i, x := range bf {
			conv[i] = xlabf16.BFloat16(x)
		}
		flat = conv
	}
	return b.wrap(b.fn.ConstantFromFlatAndDimensions(flat, dims...))
}

// DistributedSPMD makes the module an SPMD program over numDevices replicas: one program, each
// replica with its own inputs, synchronised only by collectives (AllReduce).
func (b *hloBuilder) DistributedSPMD(numDevices int) error {
	if numDevices < 1 {
		return fmt.Errorf("xla: StableHLO trace: %d replicas", numDevices)
	}
	if b.meshes != nil {
		return fmt.Errorf("xla: StableHLO trace: program %q is already an AutoSharding program", b.name)
	}
	b.numReplicas, b.numDevices = numDevices, numDevices
	b.module.WithNumReplicas(numDevices)
	return nil
}

// DistributedAutoSharding makes the module an AutoSharding program, exactly as GoMLX's XLA backend
// does: the meshes are declared (sdy.mesh), num_replicas is 1 and num_partitions the devices of
// the largest mesh; Shardy partitions the global-view program from its arguments' and results'
// shardings. Meshes' logical device assignments are not written (GoMLX v0.26.0 drops them too).
func (b *hloBuilder) DistributedAutoSharding(meshes ...backends.Mesh) error {
	if b.numReplicas > 0 || b.meshes != nil {
		return fmt.Errorf("xla: StableHLO trace: program %q already has a distribution strategy", b.name)
	}
	if len(meshes) == 0 {
		return fmt.Errorf("xla: StableHLO trace: AutoSharding program %q without a mesh", b.name)
	}
	sm := make([]*shardy.DeviceMesh, len(meshes))
	n := 0
	for i, m := range meshes {
		var err error
		if sm[i], err = shardy.NewDeviceMesh(m.Name, m.AxesSizes, m.AxesNames); err != nil {
			return fmt.Errorf("xla: StableHLO trace: mesh %q of program %q: %w", m.Name, b.name, err)
		}
		if d := sm[i].NumDevices(); d < 1 || d > b.backend.numDevices {
			return fmt.Errorf("xla: StableHLO trace: mesh %q has %d devices, the trace %d", m.Name, d, b.backend.numDevices)
		}
		n = max(n, sm[i].NumDevices())
	}
	b.meshes, b.numDevices = sm, n
	b.module.WithShardy(sm...)
	b.module.WithNumReplicas(1)
	b.module.WithNumPartitions(n)
	return nil
}

// DeviceAssignment accepts the identity assignment GoMLX sets for multi-device graphs; the text
// does not carry one (PJRT takes it as a compile option).
func (b *hloBuilder) DeviceAssignment(devices ...backends.DeviceNum) error {
	if want := max(b.numDevices, 1); len(devices) != want {
		return fmt.Errorf("xla: StableHLO trace: device assignment of %d devices for a program of %d", len(devices), want)
	}
	return nil
}

// Compile finishes the module and stores its text in the backend. Output shardings (AutoSharding
// programs only; one per output, nil for none) annotate the results, as GoMLX's XLA backend writes
// them. The returned executable cannot run: executing a traced program is an error naming the
// program.
func (b *hloBuilder) Compile(outputs []backends.Op, shardings []*backends.ShardingSpec) (backends.Executable, error) {
	var specs []*shardy.ShardingSpec
	if len(shardings) > 0 {
		if b.meshes == nil {
			return nil, fmt.Errorf("xla: StableHLO trace: output shardings in program %q, which is not an AutoSharding program", b.name)
		}
		if len(shardings) != len(outputs) {
			return nil, fmt.Errorf("xla: StableHLO trace: %d output shardings for %d outputs in program %q", len(shardings), len(outputs), b.name)
		}
		specs = make([]*shardy.ShardingSpec, len(shardings))
		for i, s := range shardings {
			var err error
			if specs[i], err = b.shardySpec(s); err != nil {
				return nil, fmt.Errorf("xla: StableHLO trace output #%d: %w", i, err)
			}
		}
	}
	if b.backend.compiled {
		return nil, fmt.Errorf("xla: StableHLO trace backend already holds a program; trace %q with a new one", b.name)
	}
	hs, err := b.ops("Compile", outputs...)
	if err != nil {
		return nil, err
	}
	vals := make([]*stablehlo.Value, len(hs))
	outShapes := make([]shapes.Shape, len(hs))
	for i, h := range hs {
		vals[i], outShapes[i] = h.v, h.shape
	}
	if err := b.fn.ReturnWithShardingAndAttributes(vals, specs, nil); err != nil {
		return nil, fmt.Errorf("xla: StableHLO trace %q: %w", b.name, err)
	}
	text, err := b.module.Build()
	if err != nil {
		return nil, fmt.Errorf("xla: StableHLO trace %q: %w", b.name, err)
	}
	b.backend.text, b.backend.compiled = text, true
	return &hloExecutable{name: b.name, outputs: outShapes}, nil
}

// hloExecutable is what Compile returns: a traced program has no device code.
type hloExecutable struct {
	name    string
	outputs []shapes.Shape
}

func (e *hloExecutable) Finalize()                                  {}
func (e *hloExecutable) Inputs() (names []string, s []shapes.Shape) { return nil, nil }
func (e *hloExecutable) Outputs() []shapes.Shape                    { return slices.Clone(e.outputs) }
func (e *hloExecutable) Execute([]backends.Buffer, []bool, backends.DeviceNum) ([]backends.Buffer, error) {
	return nil, fmt.Errorf("xla: program %q was traced to StableHLO text only; it cannot execute", e.name)
}

// dtypeToXLA maps GoMLX's dtype enumeration onto go-xla's. Both follow XLA's PrimitiveType
// numbering (TestHLODTypesAgree pins it), so the conversion is by value.
func dtypeToXLA(dt dtypes.DType) xladtypes.DType { return xladtypes.DType(dt) }

func shapeToXLA(s shapes.Shape) (xlashapes.Shape, error) {
	if !s.Ok() || s.IsTuple() {
		return xlashapes.Invalid(), fmt.Errorf("invalid or tuple shape %s", s)
	}
	return xlashapes.Make(dtypeToXLA(s.DType), slices.Clone(s.Dimensions)...), nil
}

func shapeFromXLA(s xlashapes.Shape) (shapes.Shape, error) {
	if !s.Ok() || s.IsTuple() {
		return shapes.Invalid(), fmt.Errorf("xla: StableHLO trace produced an invalid or tuple shape %s", s)
	}
	return shapes.Make(dtypes.DType(s.DType), slices.Clone(s.Dimensions)...), nil
}
