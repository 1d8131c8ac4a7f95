package gobackend

import (
	"fmt"
	"reflect"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/notimplemented"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// replayFunc issues a recorded operation, with its recorded attributes, on another builder,
// taking that builder's ops for the operands (flattened in argument order).
type replayFunc func(t backends.Builder, in []backends.Op) ([]backends.Op, error)

// node is one recorded operation: gotpu's IR. Nodes are numbered in recording order, which is a
// topological order (an operand is always recorded before its users).
type node struct {
	id     int
	op     backends.OpType
	inputs []*value // operands, flattened in argument order
	// attrs are the non-operand arguments in argument order (copies: the caller may reuse its
	// slices). For a DotGeneral: lhsContractingAxes, lhsBatchAxes, rhsContractingAxes, rhsBatchAxes.
	attrs   []any
	outputs []*value
	replay  replayFunc
	// axes, for a native product, replaces the axes of attrs: it reads the operand of a
	// Transpose in place of the transposed value (fold.go).
	axes *dotAxes
	// outerAt, for a native outer product with a short vector, is where the vector's axis is in
	// the output (a transpose folded into it, fold.go); nil: last.
	outerAt *int
	// outStrides, for a native product, are the strides of its natural output axes
	// ([batch..., lhsFree..., rhsFree...]) in its output, a transpose of them folded into it
	// (fold.go); nil: row-major.
	outStrides []int

	// Parameters only.
	paramName  string
	paramIndex int
}

// value is one output of a node; it is the backends.Op the builder hands out.
type value struct {
	b     *Builder
	node  *node
	index int // output number within node
	id    int // dense number over the builder's values
	shape shapes.Shape
	// shadow is the same value in the shape builder.
	shadow backends.Op
}

func (v *value) String() string {
	return fmt.Sprintf("%s#%d.%d %s", v.node.op, v.node.id, v.index, v.shape)
}

// Builder records a computation (see the package documentation). Every operation of
// backends.StandardOps and backends.CollectiveOps is recorded by a generated method (gen_ops.go);
// Compile turns the record into an Executable.
//
// Output shapes and argument validation come from replaying each operation on a simplego builder
// as it is recorded (the shape builder): the fallback segments run on simplego, so this gives
// them exactly the shapes and errors they will see, and native operations are cross-checked
// against it at Compile.
type Builder struct {
	notimplemented.Builder // only for the few Builder methods that are not operations

	backend *Backend
	name    string
	nodes   []*node
	values  []*value
	params  []*node
	shadow  backends.Builder
	// compiled is set by Compile; a builder compiles once.
	compiled bool
	// numDevices is the number of replicas of an SPMD computation (DistributedSPMD), 0 for a
	// single-device one; devices is the device assignment (DeviceAssignment), nil for the default
	// (0..numDevices-1, or a portable single-device computation).
	numDevices int
	devices    []backends.DeviceNum
}

var _ backends.Builder = (*Builder)(nil)

func newBuilder(b *Backend, name string) *Builder {
	bld := &Builder{backend: b, name: name, shadow: b.sg.Builder(name + "#shapes")}
	bld.ErrFn = func(op backends.OpType) error {
		return fmt.Errorf("gobackend: operation %s is not supported (computation %q)", op, name)
	}
	return bld
}

func (b *Builder) Name() string { return b.name }

// ops converts operands to this builder's values, rejecting nil and foreign ones with an error
// naming the operation and the operand.
func (b *Builder) ops(op backends.OpType, in []backends.Op) ([]*value, error) {
	out := make([]*value, len(in))
	for i, x := range in {
		v, ok := x.(*value)
		if !ok || v == nil {
			return nil, fmt.Errorf("gobackend: %s (computation %q): operand #%d is %T, not an op of the gotpu backend", op, b.name, i, x)
		}
		if v.b != b {
			return nil, fmt.Errorf("gobackend: %s (computation %q): operand #%d belongs to computation %q", op, b.name, i, v.b.name)
		}
		out[i] = v
	}
	return out, nil
}

// record adds a node: it validates the operands, replays the operation on the shape builder for
// the output shapes (and simplego's argument checks), and returns the new values as ops.
func (b *Builder) record(op backends.OpType, in []backends.Op, attrs []any, replay replayFunc) ([]backends.Op, error) {
	if b.compiled {
		return nil, fmt.Errorf("gobackend: %s: computation %q is already compiled", op, b.name)
	}
	vals, err := b.ops(op, in)
	if err != nil {
		return nil, err
	}
	shadowIn := make([]backends.Op, len(vals))
	for i, v := range vals {
		shadowIn[i] = v.shadow
	}
	shadowOut, err := replay(b.shadow, shadowIn)
	if err != nil {
		return nil, fmt.Errorf("gobackend: %s (computation %q): %w", op, b.name, err)
	}
	n := &node{id: len(b.nodes), op: op, inputs: vals, attrs: attrs, replay: replay}
	outs := make([]backends.Op, len(shadowOut))
	for i, so := range shadowOut {
		s, err := b.shadow.OpShape(so)
		if err != nil {
			return nil, fmt.Errorf("gobackend: %s (computation %q): output %d: %w", op, b.name, i, err)
		}
		v := &value{b: b, node: n, index: i, id: len(b.values), shape: s, shadow: so}
		b.values = append(b.values, v)
		n.outputs = append(n.outputs, v)
		outs[i] = v
	}
	b.nodes = append(b.nodes, n)
	return outs, nil
}

func (b *Builder) OpShape(op backends.Op) (shapes.Shape, error) {
	vs, err := b.ops(backends.OpTypeInvalid, []backends.Op{op})
	if err != nil {
		return shapes.Invalid(), err
	}
	return vs[0].shape.Clone(), nil
}

// Parameter records an input of the computation. An SPMD program's parameters are each replica's
// own, with the replica's shape: a sharding spec describes how a variable is laid out over the
// devices (GoMLX gives each replica its shard of a sharded variable, and the program exchanges
// what it needs through collectives: gotpu's FSDP step), so it is accepted and only checked to be
// that of an SPMD program. Auto-sharding, where the backend would partition a global-view program,
// is not supported.
func (b *Builder) Parameter(name string, shape shapes.Shape, sharding *backends.ShardingSpec) (backends.Op, error) {
	if sharding != nil && b.numDevices <= 1 {
		for axis, mesh := range sharding.Axes {
			if len(mesh) > 0 {
				return nil, fmt.Errorf("gobackend: parameter %q of %q: axis %d is sharded over mesh axes %v outside an SPMD program; only SPMD programs (explicit collectives) take sharded parameters",
					name, b.name, axis, mesh)
			}
		}
	}
	shape = shape.Clone()
	outs, err := b.record(backends.OpTypeParameter, nil, []any{name, shape},
		func(t backends.Builder, _ []backends.Op) ([]backends.Op, error) {
			o, err := t.Parameter(name, shape, nil)
			return []backends.Op{o}, err
		})
	if err != nil {
		return nil, err
	}
	n := b.nodes[len(b.nodes)-1]
	n.paramName, n.paramIndex = name, len(b.params)
	b.params = append(b.params, n)
	return outs[0], nil
}

// Constant records a constant; flat is copied.
func (b *Builder) Constant(flat any, dims ...int) (backends.Op, error) {
	rv := reflect.ValueOf(flat)
	if rv.Kind() != reflect.Slice {
		return nil, fmt.Errorf("gobackend: Constant (computation %q): flat is %T, not a slice", b.name, flat)
	}
	cp := reflect.MakeSlice(rv.Type(), rv.Len(), rv.Len())
	reflect.Copy(cp, rv)
	data := cp.Interface()
	dims = slices.Clone(dims)
	outs, err := b.record(backends.OpTypeConstant, nil, []any{data, dims},
		func(t backends.Builder, _ []backends.Op) ([]backends.Op, error) {
			o, err := t.Constant(data, dims...)
			return []backends.Op{o}, err
		})
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// DistributedSPMD makes the computation an SPMD program over numDevices replicas: Execute runs
// every replica on its own inputs, concurrently, synchronised only by the collectives (AllReduce).
func (b *Builder) DistributedSPMD(numDevices int) error {
	if numDevices < 1 || numDevices > b.backend.numDevices {
		return fmt.Errorf("gobackend: computation %q: SPMD over %d devices, the backend has %d", b.name, numDevices, b.backend.numDevices)
	}
	if len(b.nodes) > 0 {
		return fmt.Errorf("gobackend: computation %q: DistributedSPMD after operations were recorded", b.name)
	}
	b.numDevices = numDevices
	return nil
}

func (b *Builder) DistributedAutoSharding(...backends.Mesh) error {
	return fmt.Errorf("gobackend: computation %q: auto-sharding is not supported (SPMD with explicit collectives is)", b.name)
}

// DeviceAssignment fixes the devices the computation runs on: replica i on devices[i] (one
// device for a single-device computation, which is then not portable).
func (b *Builder) DeviceAssignment(devices ...backends.DeviceNum) error {
	if want := max(b.numDevices, 1); len(devices) != want {
		return fmt.Errorf("gobackend: computation %q: device assignment %v for %d replicas", b.name, devices, want)
	}
	seen := map[backends.DeviceNum]bool{}
	for _, d := range devices {
		if err := b.backend.checkDevice(d); err != nil {
			return fmt.Errorf("gobackend: computation %q: device assignment %v: %w", b.name, devices, err)
		}
		if seen[d] {
			return fmt.Errorf("gobackend: computation %q: device assignment %v names device %d twice", b.name, devices, d)
		}
		seen[d] = true
	}
	b.devices = slices.Clone(devices)
	return nil
}

// cloneIntLists deep-copies a list of int lists (AllReduce's replica groups).
func cloneIntLists(l [][]int) [][]int {
	if l == nil {
		return nil
	}
	out := make([][]int, len(l))
	for i, x := range l {
		out[i] = slices.Clone(x)
	}
	return out
}

// operands hands a replayed call its flattened operands back in argument order: one() for an
// argument of type Op, many(n) for a []Op or ...Op argument recorded with n elements. Go evaluates
// call arguments left to right, so the generated calls consume them in order.
type operands struct {
	in  []backends.Op
	cur int
}

func (o *operands) one() backends.Op {
	o.cur++
	return o.in[o.cur-1]
}

func (o *operands) many(n int) []backends.Op {
	o.cur += n
	return o.in[o.cur-n : o.cur : o.cur]
}
