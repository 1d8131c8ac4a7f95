package gobackend

import (
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// step is one unit of execution: a fallback segment or a native operation.
type step struct {
	seg *segment
	nat *nativeOp
	// release lists the values whose last reader is this step; their buffers are freed after it
	// (or donated to it, for a segment) unless they are outputs of the program.
	release []int
}

// segment is a run of fallback operations compiled into one simplego executable.
type segment struct {
	name    string
	exec    backends.Executable
	inputs  []int // value ids fed as the executable's parameters, in order
	outputs []int // value ids of its outputs, in order
}

// nativeOp is an operation gotpu runs itself: exactly one of its plans is set.
type nativeOp struct {
	dot   *dotPlan       // DotGeneral or Dot on the GEMM: reads[0] x reads[1]
	fus   *fusion        // a fused group of elementwise operations
	red   *reducePlan    // ReduceSum or ReduceMax
	trans *transposePlan // Transpose
	cmp   *comparePlan   // a comparison (compare.go)
	cp    *copyPlan      // Reshape, Identity or Slice (view.go)
	ar    *allReducePlan // AllReduce: reads[i] reduced across replicas into outs[i]
	rows  bool           // with ar: a row gather (gather.go) of reads[0] by the mask reads[1] into outs[0]
	rng   *rngPlan       // RNGBitGenerator: reads[0] the state, outs the new state and the bits
	reads []int          // value ids of the buffers it reads
	out   int            // value id of its output (all but AllReduce and RNGBitGenerator)
	outs  []int          // value ids of AllReduce's and RNGBitGenerator's outputs
	fouts []int          // a fusion with extra outputs: out, then the extra values (fuse_outputs.go)
	name  string         // the operation, for errors
}

// transposePlan is a float32 or bfloat16 Transpose, run with the same copy loop as the GEMM's
// packing.
type transposePlan struct {
	dims, perm []int
	bf16       bool
}

// Compile partitions the recorded graph into native operations and fallback segments and
// compiles the segments (see the package documentation).
func (b *Builder) Compile(outputs []backends.Op, shardings []*backends.ShardingSpec) (backends.Executable, error) {
	if len(shardings) > 0 {
		return nil, fmt.Errorf("gobackend: computation %q: output sharding specs are not supported (SPMD with explicit collectives is)", b.name)
	}
	if b.compiled {
		return nil, fmt.Errorf("gobackend: computation %q is already compiled", b.name)
	}
	outs, err := b.ops(backends.OpTypeInvalid, outputs)
	if err != nil {
		return nil, fmt.Errorf("gobackend: Compile outputs: %w", err)
	}
	b.compiled = true
	start := time.Now()
	e, err := b.compile(outs)
	b.backend.compiles.Add(1)
	b.backend.compileNanos.Add(int64(time.Since(start)))
	// The shape builder is no longer needed; drop it (and the simplego nodes it holds).
	b.shadow = nil
	for _, v := range b.values {
		v.shadow = nil
	}
	if err != nil {
		return nil, err
	}
	return e, nil
}

func (b *Builder) compile(outs []*value) (*Executable, error) {
	b.foldTransposes()
	// Liveness: only nodes some output depends on are executed.
	needed := make([]bool, len(b.nodes))
	for _, v := range outs {
		needed[v.node.id] = true
	}
	for i := len(b.nodes) - 1; i >= 0; i-- {
		if !needed[i] {
			continue
		}
		for _, in := range b.nodes[i].inputs {
			needed[in.node.id] = true
		}
	}

	isOutput := make([]bool, len(b.values))
	for _, v := range outs {
		isOutput[v.id] = true
	}
	// users[v] lists the needed nodes that read value v.
	users := make([][]int, len(b.values))
	for _, n := range b.nodes {
		if !needed[n.id] {
			continue
		}
		for _, in := range n.inputs {
			if len(users[in.id]) == 0 || users[in.id][len(users[in.id])-1] != n.id {
				users[in.id] = append(users[in.id], n.id)
			}
		}
	}

	// Native plans: products, then fusions of elementwise operations, reductions, transposes.
	// native[id] is set for the nodes that run as native steps; absorbed[id] for the members of
	// a fusion other than its root (computed inside the root's step, never materialized).
	native := make([]*nativeOp, len(b.nodes))
	for _, n := range b.nodes {
		if !needed[n.id] {
			continue
		}
		ax, ok := dotAxesOf(n)
		if !ok || !nativeDotDType(n.outputs[0].shape.DType) {
			continue
		}
		outShape := n.outputs[0].shape
		if n.outStrides != nil {
			// Planned with its natural axis order, then written through outStrides.
			outShape = shapes.Make(outShape.DType, naturalDims(n.inputs[0].shape, n.inputs[1].shape, ax)...)
		}
		if n.outerAt != nil {
			// Planned with the vector's axis last, then written with it at outerAt.
			outShape = shapes.Make(outShape.DType, append(slices.Clone(n.inputs[0].shape.Dimensions), n.inputs[1].shape.Dimensions[0])...)
		}
		p, err := planDot(n.inputs[0].shape, n.inputs[1].shape, outShape, ax)
		if err == nil && n.outerAt != nil {
			p.vec.q, p.out = 1, n.outputs[0].shape
			for _, d := range n.inputs[0].shape.Dimensions[*n.outerAt:] {
				p.vec.q *= d
			}
		}
		if err == nil && n.outStrides != nil {
			nl := n.inputs[0].shape.Rank() - len(ax.lhsBatch) - len(ax.lhsContracting)
			err = p.placeOutput(outShape.Dimensions, n.outStrides, len(ax.lhsBatch), nl, n.outputs[0].shape)
		}
		if err != nil {
			// The shape builder accepted this product, so a plan failure is a bug here, not in
			// the graph; fail loudly rather than fall back silently.
			return nil, fmt.Errorf("gobackend: computation %q: %s #%d (%s x %s): %w",
				b.name, n.op, n.id, n.inputs[0].shape, n.inputs[1].shape, err)
		}
		native[n.id] = &nativeOp{dot: p, reads: []int{n.inputs[0].id, n.inputs[1].id}, out: n.outputs[0].id, name: n.op.String()}
	}
	group, fusions, err := b.planFusions(needed, isOutput, users)
	if err != nil {
		return nil, err
	}
	absorbed := make([]bool, len(b.nodes))
	for id, r := range group {
		switch {
		case r == inlined:
			absorbed[id] = true
		case r < 0:
		case r == id && fusions[id] == nil:
			absorbed[id] = true // dissolved into its readers (remat.go)
		case r == id:
			f := fusions[id]
			native[id] = &nativeOp{fus: f, reads: f.reads, out: f.out, name: "fusion of " + b.nodes[id].op.String()}
			if len(f.extra) > 0 {
				native[id].fouts = []int{f.out}
				for _, o := range f.extra {
					native[id].fouts = append(native[id].fouts, o.value)
				}
			}
		default:
			absorbed[id] = true
		}
	}
	replicas := max(b.numDevices, 1)
	for _, n := range b.nodes {
		if !needed[n.id] || native[n.id] != nil || absorbed[n.id] {
			continue
		}
		if n.op == backends.OpTypeAllReduce {
			p, err := planAllReduce(n, replicas)
			if err != nil {
				return nil, fmt.Errorf("gobackend: computation %q: %s #%d: %w", b.name, n.op, n.id, err)
			}
			nat := &nativeOp{ar: p, out: -1, name: n.op.String()}
			if isRows(n) {
				nat.rows, nat.name = true, "all-gather (rows)"
				nat.reads = []int{n.inputs[0].id, n.inputs[1].id}
				nat.outs = []int{n.outputs[0].id}
			} else {
				for i, in := range n.inputs {
					nat.reads = append(nat.reads, in.id)
					nat.outs = append(nat.outs, n.outputs[i].id)
				}
			}
			native[n.id] = nat
		} else if n.op == backends.OpTypeRNGBitGenerator && nativeRNG(n) {
			native[n.id] = &nativeOp{rng: &rngPlan{}, reads: []int{n.inputs[0].id},
				outs: []int{n.outputs[0].id, n.outputs[1].id}, out: -1, name: n.op.String()}
		} else if p := planCompare(n); p != nil {
			reads := []int{p.a.value}
			if p.b.value != p.a.value {
				reads = append(reads, p.b.value)
			}
			native[n.id] = &nativeOp{cmp: p, reads: reads, out: n.outputs[0].id, name: n.op.String()}
		} else if p := planReduce(n); p != nil {
			native[n.id] = &nativeOp{red: p, reads: []int{p.in}, out: p.out, name: n.op.String()}
		} else if n.op == backends.OpTypeTranspose && fusedDType(n, n.outputs[0].shape.DType) {
			p := &transposePlan{dims: n.inputs[0].shape.Dimensions, perm: n.attrs[0].([]int),
				bf16: n.outputs[0].shape.DType == dtypes.BFloat16}
			native[n.id] = &nativeOp{trans: p, reads: []int{n.inputs[0].id}, out: n.outputs[0].id, name: n.op.String()}
		} else if p := planCopy(n); p != nil && (n.inputs[0].node.op == backends.OpTypeParameter || native[n.inputs[0].node.id] != nil) {
			// Only of a buffer a native step or the caller makes: one a segment makes is
			// reshaped there, and a constant is replayed where it is read.
			native[n.id] = &nativeOp{cp: p, reads: []int{n.inputs[0].id}, out: n.outputs[0].id, name: n.op.String()}
		}
	}
	b.fuseReduceSources(native, absorbed, users, isOutput)
	isNative := func(id int) bool { return native[id] != nil || absorbed[id] }

	// Scheduling, as soon as possible: segment s runs at time 2s and native wave w at 2w+1. A
	// value made at time t can be read by anything at a later time, and by later operations of
	// its own segment or wave (a wave runs its operations in recording order); parameters exist
	// before time 0. Each operation gets the earliest slot of its kind whose time is not before
	// any of its operands'. Fusion members are scheduled as native operations, so their root
	// comes after every input of the group.
	avail := make([]int, len(b.values))
	slot := make([]int, len(b.nodes)) // segment or wave number
	maxSlot := 0
	for _, n := range b.nodes {
		if !needed[n.id] {
			continue
		}
		s := 0
		for _, in := range n.inputs {
			a := avail[in.id]
			if isNative(n.id) {
				s = max(s, max(a, 0)/2) // wave w (time 2w+1) follows times <= 2w+1
			} else {
				s = max(s, (a+1)/2) // segment s (time 2s) follows times <= 2s: ceil(a/2)
			}
		}
		slot[n.id] = s
		maxSlot = max(maxSlot, s)
		t := 2 * s
		switch {
		case n.op == backends.OpTypeParameter:
			t = -1
		case isNative(n.id):
			t = 2*s + 1
		}
		for _, v := range n.outputs {
			avail[v.id] = t
		}
	}

	replayable := b.replayables(needed, isNative, isOutput)

	// Who reads each value, and whether a reader is in another step (then the value must be
	// exported from its segment).
	exported := make([]bool, len(b.values))
	for _, n := range b.nodes {
		if !needed[n.id] || isNative(n.id) {
			continue
		}
		for _, in := range n.inputs {
			producer := in.node
			switch {
			case producer.op == backends.OpTypeParameter:
			case replayable[producer.id]:
				// Constants, and cheap operations of constants alone, are replayed into each
				// segment that reads them, not passed as buffers (schedule.go).
			case isNative(producer.id) || slot[n.id] != slot[producer.id]:
				exported[in.id] = true
			}
		}
	}
	// A native operation reads buffers: every value it reads that a segment makes is exported
	// (constants included; scalar constants folded into fusions are not read).
	for _, nat := range native {
		if nat == nil {
			continue
		}
		for _, v := range nat.reads {
			if b.values[v].node.op != backends.OpTypeParameter {
				exported[v] = true
			}
		}
	}
	for _, v := range outs {
		if v.node.op != backends.OpTypeParameter {
			exported[v.id] = true
		}
	}

	e := &Executable{backend: b.backend, name: b.name, numValues: len(b.values), replicas: replicas, devices: b.devices}
	e.valueShapes = make([]shapes.Shape, len(b.values))
	for _, v := range b.values {
		e.valueShapes[v.id] = v.shape
	}
	for _, p := range b.params {
		e.inputs = append(e.inputs, p.outputs[0].id)
		e.inputNames = append(e.inputNames, p.paramName)
		e.inputShapes = append(e.inputShapes, p.outputs[0].shape.Clone())
	}
	for _, v := range outs {
		e.outputs = append(e.outputs, v.id)
		e.outputShapes = append(e.outputShapes, v.shape.Clone())
	}
	e.isOutput = isOutput

	ok := false
	defer func() {
		if !ok {
			e.Finalize()
		}
	}()
	for s := 0; s <= maxSlot; s++ {
		seg, err := b.buildSegment(s, needed, isNative, slot, exported, replayable)
		if err != nil {
			return nil, err
		}
		if seg != nil {
			e.steps = append(e.steps, step{seg: seg})
		}
		for _, n := range b.nodes {
			if nat := native[n.id]; needed[n.id] && nat != nil && slot[n.id] == s {
				e.steps = append(e.steps, step{nat: nat})
			}
		}
	}

	// Last readers, for freeing and donating intermediate buffers.
	lastUse := make([]int, len(b.values))
	for i := range lastUse {
		lastUse[i] = -1
	}
	for i, st := range e.steps {
		if st.seg != nil {
			for _, v := range st.seg.inputs {
				lastUse[v] = i
			}
		} else {
			for _, v := range st.nat.reads {
				lastUse[v] = i
			}
		}
	}
	for v, i := range lastUse {
		if i >= 0 && !isOutput[v] {
			e.steps[i].release = append(e.steps[i].release, v)
		}
	}
	e.lastUse = lastUse
	e.planLocal()
	e.planSpares()

	e.nodes = len(b.nodes)
	st := e.Stats()
	slog.Debug("gobackend: compiled", "computation", b.name, "nodes", st.Nodes, "segments", st.Segments,
		"native", st.Native, "packed_operands", st.PackedOperands, "fusions", st.Fusions, "fused_ops", st.FusedOps, "fusion_extra_outputs", st.FusionExtraOutputs,
		"reductions", st.Reductions, "transposes", st.Transposes, "comparisons", st.Comparisons, "all_reduces", st.AllReduces, "replicas", replicas)
	ok = true
	return e, nil
}

// buildSegment replays the fallback operations of slot s into a simplego builder and compiles
// them; it returns nil if the slot has none that anything reads.
func (b *Builder) buildSegment(s int, needed []bool, isNative func(int) bool, slot []int, exported, replayable []bool) (*segment, error) {
	var members []*node
	hasExport := false
	for _, n := range b.nodes {
		if !needed[n.id] || isNative(n.id) || slot[n.id] != s || n.op == backends.OpTypeParameter {
			continue
		}
		if replayable[n.id] && !exported[n.outputs[0].id] {
			continue // replayed where read
		}
		members = append(members, n)
		for _, v := range n.outputs {
			hasExport = hasExport || exported[v.id]
		}
	}
	if !hasExport {
		return nil, nil
	}
	name := fmt.Sprintf("%s/segment-%d", b.name, s)
	sb := b.backend.sg.Builder(name)
	seg := &segment{name: name}
	local := map[int]backends.Op{}
	// operand returns the segment's op for value v: made in this segment, a replayed constant, or
	// a new parameter fed from another step.
	var operand func(v *value) (backends.Op, error)
	operand = func(v *value) (backends.Op, error) {
		if op, ok := local[v.id]; ok {
			return op, nil
		}
		var op backends.Op
		var err error
		if replayable[v.node.id] && !exported[v.id] {
			// Replayed here, its own operands first (constants, or replayable in turn).
			in := make([]backends.Op, len(v.node.inputs))
			for i, x := range v.node.inputs {
				if in[i], err = operand(x); err != nil {
					return nil, err
				}
			}
			var outs []backends.Op
			outs, err = v.node.replay(sb, in)
			if err == nil {
				op = outs[0]
			}
		} else {
			op, err = sb.Parameter(fmt.Sprintf("v%d", v.id), v.shape, nil)
			seg.inputs = append(seg.inputs, v.id)
		}
		if err != nil {
			return nil, err
		}
		local[v.id] = op
		return op, nil
	}
	var exports []backends.Op
	for _, n := range members {
		in := make([]backends.Op, len(n.inputs))
		for i, v := range n.inputs {
			op, err := operand(v)
			if err != nil {
				return nil, fmt.Errorf("gobackend: computation %q: %s #%d operand %d: %w", b.name, n.op, n.id, i, err)
			}
			in[i] = op
		}
		outs, err := n.replay(sb, in)
		if err != nil {
			return nil, fmt.Errorf("gobackend: computation %q: fallback of %s #%d: %w", b.name, n.op, n.id, err)
		}
		for i, v := range n.outputs {
			if i >= len(outs) {
				return nil, fmt.Errorf("gobackend: computation %q: fallback of %s #%d returned %d outputs, recorded %d",
					b.name, n.op, n.id, len(outs), len(n.outputs))
			}
			local[v.id] = outs[i]
			if exported[v.id] {
				exports = append(exports, outs[i])
				seg.outputs = append(seg.outputs, v.id)
			}
		}
	}
	exec, err := sb.Compile(exports, nil)
	if err != nil {
		return nil, fmt.Errorf("gobackend: computation %q: compiling %s: %w", b.name, name, err)
	}
	seg.exec = exec
	return seg, nil
}

// Executable runs a compiled computation: its steps in order, passing simplego buffers between
// them. It is safe for concurrent use.
type Executable struct {
	backend *Backend
	name    string
	// replicas is the number of SPMD replicas (1 for a single-device computation); devices the
	// device assignment (nil: replicas 0..replicas-1, or portable if single-device).
	replicas     int
	devices      []backends.DeviceNum
	numValues    int
	inputs       []int
	inputNames   []string
	inputShapes  []shapes.Shape
	outputs      []int
	outputShapes []shapes.Shape
	valueShapes  []shapes.Shape // by value id, for native outputs
	steps        []step
	nodes        int
	isOutput     []bool
	lastUse      []int
	// local marks the values held in an execution's arena (arena.go) at localOff, in a block of
	// arenaSize bytes; localRoot is the value whose place each shares (itself if its own).
	local     []bool
	localOff  []int64
	localRoot []int
	arenaSize int64
	// sharedSteps counts the steps SPMD executions ran once for all replicas (spmd.go), for tests
	// and benchmarks.
	sharedSteps atomic.Int64
	// tables are idle value tables of finished executions, reused so that an execution allocates
	// (almost) nothing: training runs the same executables every step, and per-step garbage
	// would grow the resident set until the next garbage collection.
	tablesMu sync.Mutex
	tables   []*valueTable
	// spare holds freed buffers of native output shapes for the next execution, at most
	// spareCap of each (spare.go).
	spareMu  sync.Mutex
	spare    map[spareKey][]backends.Buffer
	spareCap map[spareKey]int
	// spareTakes counts the buffers of each shape the running executions took (trimSpares).
	spareTakes map[spareKey]int
}

// valueTable is one execution's buffers and ownership by value id.
type valueTable struct {
	env   []backends.Buffer
	owned []bool
	// local holds the views of the table's arena (arena.go), made at its first execution that
	// uses one.
	local []localBuf
}

// table returns a cleared value table.
func (e *Executable) table() *valueTable {
	e.tablesMu.Lock()
	defer e.tablesMu.Unlock()
	if n := len(e.tables); n > 0 {
		t := e.tables[n-1]
		e.tables = e.tables[:n-1]
		return t
	}
	return &valueTable{env: make([]backends.Buffer, e.numValues), owned: make([]bool, e.numValues)}
}

// putTable clears t and keeps it for the next execution.
func (e *Executable) putTable(t *valueTable) {
	clear(t.env)
	clear(t.owned)
	e.tablesMu.Lock()
	e.tables = append(e.tables, t)
	e.tablesMu.Unlock()
}

var _ backends.Executable = (*Executable)(nil)

// Finalize releases the segments' executables and the kept buffers.
func (e *Executable) Finalize() {
	e.dropSpares()
	for _, st := range e.steps {
		if st.seg != nil && st.seg.exec != nil {
			st.seg.exec.Finalize()
		}
	}
}

func (e *Executable) Inputs() ([]string, []shapes.Shape) {
	shs := make([]shapes.Shape, len(e.inputShapes))
	for i, s := range e.inputShapes {
		shs[i] = s.Clone()
	}
	return append([]string(nil), e.inputNames...), shs
}

func (e *Executable) Outputs() []shapes.Shape {
	shs := make([]shapes.Shape, len(e.outputShapes))
	for i, s := range e.outputShapes {
		shs[i] = s.Clone()
	}
	return shs
}

// Stats describes how a computation was split.
type Stats struct {
	Nodes          int // operations recorded
	Segments       int // fallback segments (simplego executables)
	Native         int // native products
	PackedOperands int // operands of native products transposed into a packed buffer first
	Fusions        int // native fused elementwise programs (ReducedFusions included)
	FusedOps       int // operations computed inside them
	ReducedFusions int // fusions computed inside the reduction reading them, never stored (reduce_fused.go)
	// FusionExtraOutputs counts the outputs fusions write besides their roots' (fuse_outputs.go).
	FusionExtraOutputs int
	Reductions         int // native reductions
	Transposes         int // native transposes
	Comparisons        int // native comparisons
	Copies             int // native reshapes, identities and slices (most of them free: view.go)
	AllReduces         int // all-reduces
	AllGathers         int // all-gathers recognised in all-reduces (row gathers, gather.go)
	RNGs               int // random bit generators
}

// Stats reports how the computation was split (tests and benchmarks log it).
func (e *Executable) Stats() Stats {
	s := Stats{Nodes: e.nodes}
	for _, st := range e.steps {
		nat := st.nat
		if st.seg != nil {
			s.Segments++
			continue
		}
		switch {
		case nat.dot != nil:
			s.Native++
			if nat.dot.lhs.perm != nil {
				s.PackedOperands++
			}
			if nat.dot.rhs.perm != nil {
				s.PackedOperands++
			}
		case nat.fus != nil:
			s.Fusions++
			s.FusedOps += nat.fus.ops
			s.FusionExtraOutputs += len(nat.fus.extra)
		case nat.red != nil:
			s.Reductions++
			if nat.red.src != nil {
				s.Fusions++
				s.FusedOps += nat.red.src.ops
				s.ReducedFusions++
			}
		case nat.trans != nil:
			s.Transposes++
		case nat.cmp != nil:
			s.Comparisons++
		case nat.cp != nil:
			s.Copies++
		case nat.ar != nil && nat.rows:
			s.AllGathers++
		case nat.ar != nil:
			s.AllReduces++
		case nat.rng != nil:
			s.RNGs++
		}
	}
	return s
}
