package gobackend

import (
	"fmt"
	"math"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// A fusion is a group of float32 and bfloat16 elementwise operations (with the ConvertDType
// operations between the two, and the BroadcastInDim, Reshape and bool-to-float ConvertDType
// operations that feed them) evaluated in one pass over its output: the output is cut into
// blocks of fuseBlock elements and, block by block, a small register program computes every
// member for those elements only, so intermediate values stay in cache and are never written
// to a buffer. simplego instead runs each operation over the whole tensor, writing and reading
// back every intermediate, and steps through broadcasts with a per-element iterator.
//
// Registers are float32. A bfloat16 operand is widened as it is loaded, a bfloat16 operation
// truncates its result in its register (so the register holds exactly what simplego would store),
// and a bfloat16 root is narrowed as it is stored (bf16.go): mixed-precision chains — a matmul's
// bfloat16 output, its bias, GELU, a residual, a conversion to float32 for a layer norm — run as
// one program with simplego's results.
//
// Grouping is by root: a fusible operation whose value is read outside the group (or is an
// output of the computation) is the root of a group, and a fusible operand joins its reader's
// group when every reader of it is in that group and reads it elementwise. So only the root
// is materialized, every member is an ancestor of the root, and a group can never need its own
// output as an input (which would make it impossible to run as one step).

// fuseBlock is the number of output elements a fusion computes at a time: large enough to
// amortize the interpretation of the program, small enough for its registers to stay in L1/L2.
const fuseBlock = 512

// fusedUnary and fusedBinary are the elementwise operations a fusion evaluates.
var (
	fusedUnary = map[backends.OpType]bool{
		backends.OpTypeNeg: true, backends.OpTypeAbs: true, backends.OpTypeExp: true,
		backends.OpTypeLog: true, backends.OpTypeTanh: true, backends.OpTypeSqrt: true,
		backends.OpTypeRsqrt: true, backends.OpTypeLogistic: true,
	}
	fusedBinary = map[backends.OpType]bool{
		backends.OpTypeAdd: true, backends.OpTypeSub: true, backends.OpTypeMul: true,
		backends.OpTypeDiv: true, backends.OpTypeMax: true, backends.OpTypeMin: true,
	}
)

// leafKind says how a fusion reads one of its inputs for a block of output elements.
type leafKind int

const (
	leafDirect  leafKind = iota // same flat layout as the output: a view, no copy
	leafScalar                  // one value for every element (a scalar constant is folded in)
	leafStrided                 // broadcast: gathered through per-axis strides (0 on broadcast axes)
	leafBool                    // a bool buffer in the output's layout, one bool, or (dims set) a broadcast bool, converted to 0 or 1 (ConvertDType, Where)
)

// opCopy is the instruction that copies a register (a root that is a broadcast); with round set
// it is a float32 -> bfloat16 ConvertDType.
const opCopy = backends.OpTypeInvalid

// fusedLeaf is one input of a fusion.
type fusedLeaf struct {
	kind   leafKind
	value  int     // value id of the buffer read (-1 for a folded constant)
	scalar float32 // leafScalar of a constant
	bf16   bool    // the buffer holds bfloat16 (widened as it is loaded)
	// leafStrided, and leafBool of a broadcast: the output dimensions, coalesced, and the source
	// stride of each.
	dims, strides []int
	reg           int
}

// fusedInstr computes one member: reg dst = op(reg a[, reg b]), or table[a] for a bfloat16
// transcendental function; round truncates the result to bfloat16 (a bfloat16 operation whose
// float32 result may not be a bfloat16).
type fusedInstr struct {
	op        backends.OpType
	a, b, dst int
	cond      int  // Where: the register of the condition (0 or 1), a and b the two choices
	uniform   bool // Where: a single condition for every element
	round     bool
	table     *[1 << 16]float32
}

// fusion is the compiled program of one group.
type fusion struct {
	out    int // value id of the root's output
	shape  shapes.Shape
	leaves []fusedLeaf
	instrs []fusedInstr
	nregs  int
	reads  []int // value ids of the buffers it reads, distinct
	ops    int   // members (for Stats)
	// outBF16: the root is bfloat16 (narrowed as it is stored).
	outBF16 bool
	// extra are float32 outputs besides the root's (fuse_outputs.go), stored after the block's
	// last instruction; the root's output is then float32 too.
	extra []fusedOut
	// readAhead: the fusion prefetches its operands' and outputs' blocks ahead of the one it
	// computes (fuse_exec.go's prefetch).
	readAhead bool
}

// overwritable reports whether the fusion may write its output over the buffer of value v: v has
// the output's type and is only read in the output's layout, each block before the block is
// stored.
func (f *fusion) overwritable(v int) bool {
	found := false
	for _, l := range f.leaves {
		if l.value != v {
			continue
		}
		if l.kind != leafDirect || l.bf16 != f.outBF16 {
			return false
		}
		found = true
	}
	return found
}

// fusedDType reports whether dt is a type native fusions, reductions and transposes compute in.
func fusedDType(n *node, dt dtypes.DType) bool {
	return dt == dtypes.Float32 || dt == dtypes.BFloat16 && !n.outputs[0].b.backend.cfg.FallbackBF16
}

// fusible reports whether n can be a member of a fusion.
func fusible(n *node) bool {
	if boolBroadcast(n) {
		return true
	}
	if len(n.outputs) != 1 || !fusedDType(n, n.outputs[0].shape.DType) {
		return false
	}
	out := n.outputs[0].shape
	switch {
	case fusedUnary[n.op]:
		return n.inputs[0].shape.DType == out.DType
	case fusedBinary[n.op]:
		for _, in := range n.inputs {
			if in.shape.DType != out.DType || !broadcastable(in.shape, out) {
				return false
			}
		}
		return true
	case n.op == backends.OpTypeBroadcastInDim:
		return n.inputs[0].shape.DType == out.DType && broadcastAxesOK(n)
	case n.op == backends.OpTypeReshape:
		return n.inputs[0].shape.DType == out.DType && n.inputs[0].shape.Size() == out.Size()
	case n.op == backends.OpTypeWhere:
		// A selection (the optimizer's keep-or-update of every weight and moment, masked
		// scores): the condition is a bool leaf of the output's dimensions or a single bool.
		c := n.inputs[0].shape
		if c.DType != dtypes.Bool || c.Size() != 1 && !slices.Equal(c.Dimensions, out.Dimensions) {
			return false
		}
		for _, in := range n.inputs[1:] {
			if in.shape.DType != out.DType || !broadcastable(in.shape, out) {
				return false
			}
		}
		return true
	case n.op == backends.OpTypeConvertDType:
		// bool -> float (the one-hot labels of the loss): exact, read straight from the bools;
		// float32 <-> bfloat16 (mixed precision): elementwise.
		in := n.inputs[0].shape.DType
		return (in == dtypes.Bool || fusedDType(n, in)) && slices.Equal(n.inputs[0].shape.Dimensions, out.Dimensions)
	}
	return false
}

// broadcastable reports whether an operand of an elementwise operation with output shape out
// can be read elementwise: the same dimensions, a single value, or the same rank with some
// dimensions 1 (simplego's implicit broadcasting).
func broadcastable(in, out shapes.Shape) bool {
	if in.Size() == 1 || slices.Equal(in.Dimensions, out.Dimensions) {
		return true
	}
	if in.Rank() != out.Rank() {
		return false
	}
	for i, d := range in.Dimensions {
		if d != 1 && d != out.Dimensions[i] {
			return false
		}
	}
	return true
}

func broadcastAxesOK(n *node) bool {
	axes, ok := n.attrs[1].([]int)
	in, out := n.inputs[0].shape, n.outputs[0].shape
	if !ok || len(axes) != in.Rank() {
		return false
	}
	for i, a := range axes {
		if a < 0 || a >= out.Rank() || (in.Dimensions[i] != 1 && in.Dimensions[i] != out.Dimensions[a]) {
			return false
		}
	}
	return true
}

// boolBroadcast reports whether n broadcasts a bool array, such as the attention mask to every
// head. Its only fused readers can be Where conditions (every other fused operation reads floats),
// which read the mask through the broadcast's strides, so the broadcast is never materialized:
// for GPT-2 124M that is 12 bool arrays of 6 MiB per step, built by a simplego segment and kept
// from the forward pass to the backward one. It is never the root of a fusion.
func boolBroadcast(n *node) bool {
	return n.op == backends.OpTypeBroadcastInDim && len(n.outputs) == 1 &&
		n.outputs[0].shape.DType == dtypes.Bool && n.inputs[0].shape.DType == dtypes.Bool && broadcastAxesOK(n)
}

// adapter reports whether a member reads its operand through an index mapping or from a bool
// buffer (so the operand must be a leaf, not a member).
func adapter(n *node) bool {
	return n.op == backends.OpTypeBroadcastInDim || n.op == backends.OpTypeReshape || boolConvert(n)
}

// boolConvert reports whether n is a ConvertDType from bool (read as a leafBool).
func boolConvert(n *node) bool {
	return n.op == backends.OpTypeConvertDType && n.inputs[0].shape.DType == dtypes.Bool
}

// planFusions groups the needed fusible nodes. It returns, per node id, the group's root id
// (-1 for nodes in no group, inlined for inlined adapters) and the programs by root id.
func (b *Builder) planFusions(needed, isOutput []bool, users [][]int) ([]int, map[int]*fusion, error) {
	group := make([]int, len(b.nodes))
	for i := range group {
		group[i] = -1
	}
	ok := make([]bool, len(b.nodes))
	for _, n := range b.nodes {
		ok[n.id] = needed[n.id] && fusible(n)
	}
	fusions := map[int]*fusion{}
	for r := len(b.nodes) - 1; r >= 0; r-- {
		root := b.nodes[r]
		if !ok[r] || group[r] >= 0 {
			continue
		}
		// A broadcast or reshape read elementwise (with the same dimensions) only by fusions is
		// inlined: each of them reads its operand through it, and it is never materialized.
		if adapter(root) && b.inlinable(root, group, isOutput, users) {
			group[r] = inlined
			continue
		}
		// A lone Reshape is left to simplego, which can hand the buffer on without a copy. A
		// lone broadcast of a constant too: a segment that reads it then replays it instead of
		// reading a buffer made at the start of the step (schedule.go's replayables).
		if root.op == backends.OpTypeReshape || adapter(root) && root.inputs[0].node.op == backends.OpTypeConstant || boolBroadcast(root) {
			continue
		}
		group[r] = r
		dims := root.outputs[0].shape.Dimensions
		// Members are ancestors of the root, so scanning down from it sees each candidate after
		// all of its readers.
		for id := r - 1; id >= 0; id-- {
			n := b.nodes[id]
			if !ok[id] || group[id] >= 0 || isOutput[n.outputs[0].id] || !slices.Equal(n.outputs[0].shape.Dimensions, dims) {
				continue
			}
			us := users[n.outputs[0].id]
			join := len(us) > 0
			for _, u := range us {
				if group[u] != r || adapter(b.nodes[u]) {
					join = false
					break
				}
			}
			if join {
				group[id] = r
			}
		}
	}
	// Programs are built once every group is known: whether an operand is read through an
	// inlined adapter is only decided when the scan reaches that adapter. Groups whose value is
	// cheaper to recompute than to keep are first copied into their readers (remat.go); a root
	// so dissolved keeps its group number but gets no program.
	members := b.rematerialize(b.groupMembers(group), group, isOutput, users)
	extras := b.mergeOutputs(members, isOutput, users)
	for r, ids := range members {
		f, err := b.buildFusion(r, ids, group, extras[r])
		if err != nil {
			return nil, nil, err
		}
		fusions[r] = f
	}
	return group, fusions, nil
}

// inlined marks, in planFusions' result, a broadcast or reshape that its readers compute.
const inlined = -2

// inlinable reports whether every reader of adapter n is a fused elementwise operation that
// reads it with its own dimensions (so it can read n's operand through n's index mapping).
func (b *Builder) inlinable(n *node, group []int, isOutput []bool, users [][]int) bool {
	v := n.outputs[0]
	if isOutput[v.id] || len(users[v.id]) == 0 {
		return false
	}
	for _, u := range users[v.id] {
		un := b.nodes[u]
		if group[u] < 0 || adapter(un) || !slices.Equal(un.outputs[0].shape.Dimensions, v.shape.Dimensions) {
			return false
		}
	}
	return true
}

// buildFusion compiles the program of the group rooted at r, whose members (root included) are
// the node ids in ascending order, writing the values extra too (fuse_outputs.go).
func (b *Builder) buildFusion(r int, members, group, extra []int) (*fusion, error) {
	root := b.nodes[r]
	f := &fusion{out: root.outputs[0].id, shape: root.outputs[0].shape, outBF16: root.outputs[0].shape.DType == dtypes.BFloat16}
	outDims := f.shape.Dimensions
	regOf := map[int]int{}     // member value id -> register
	leafOf := map[string]int{} // leaf key -> register, so a value read twice the same way is loaded once
	readSet := map[int]bool{}
	addLeaf := func(l fusedLeaf, key string) int {
		if reg, ok := leafOf[key]; ok {
			return reg
		}
		l.reg = f.nregs
		f.nregs++
		f.leaves = append(f.leaves, l)
		leafOf[key] = l.reg
		if l.value >= 0 && !readSet[l.value] {
			readSet[l.value] = true
			f.reads = append(f.reads, l.value)
		}
		return l.reg
	}
	// leaf returns the register holding operand v read with the given source strides over the
	// output dimensions (nil strides: same flat layout as the output).
	leaf := func(v *value, strides []int) int {
		bf16 := v.shape.DType == dtypes.BFloat16
		if v.shape.Size() == 1 {
			if c, ok := scalarConstant(v); ok {
				return addLeaf(fusedLeaf{kind: leafScalar, value: -1, scalar: c}, fmt.Sprintf("c%08x", math.Float32bits(c)))
			}
			return addLeaf(fusedLeaf{kind: leafScalar, value: v.id, bf16: bf16}, fmt.Sprintf("s%d", v.id))
		}
		if strides == nil {
			return addLeaf(fusedLeaf{kind: leafDirect, value: v.id, bf16: bf16}, fmt.Sprintf("d%d", v.id))
		}
		dims, st := coalesce(outDims, strides)
		if len(dims) == 1 && st[0] == 1 {
			return addLeaf(fusedLeaf{kind: leafDirect, value: v.id, bf16: bf16}, fmt.Sprintf("d%d", v.id))
		}
		return addLeaf(fusedLeaf{kind: leafStrided, value: v.id, bf16: bf16, dims: dims, strides: st}, fmt.Sprintf("t%d%v", v.id, strides))
	}
	boolLeaf := func(v *value) int {
		return addLeaf(fusedLeaf{kind: leafBool, value: v.id}, fmt.Sprintf("b%d", v.id))
	}
	// broadcastBool returns the register of bool array v broadcast to the output by n's axes.
	broadcastBool := func(n *node) int {
		v := n.inputs[0]
		dims, st := coalesce(outDims, broadcastStrides(v.shape, outDims, n.attrs[1].([]int)))
		if v.shape.Size() == 1 || len(dims) == 1 && st[0] == 1 {
			return boolLeaf(v)
		}
		return addLeaf(fusedLeaf{kind: leafBool, value: v.id, dims: dims, strides: st}, fmt.Sprintf("b%d%v%v", v.id, dims, st))
	}
	// condition returns the register of a Where's condition v: a member (a broadcast bool the
	// group computes), an inlined broadcast bool, or a bool buffer.
	condition := func(v *value) int {
		if reg, ok := regOf[v.id]; ok {
			return reg
		}
		if n := v.node; group[n.id] == inlined && boolBroadcast(n) {
			return broadcastBool(n)
		}
		return boolLeaf(v)
	}
	operand := func(v *value) int {
		if reg, ok := regOf[v.id]; ok {
			return reg
		}
		if n := v.node; group[n.id] == inlined {
			// Read through the inlined adapter (it has the output's dimensions).
			switch n.op {
			case backends.OpTypeBroadcastInDim:
				return leaf(n.inputs[0], broadcastStrides(n.inputs[0].shape, outDims, n.attrs[1].([]int)))
			case backends.OpTypeConvertDType:
				return boolLeaf(n.inputs[0])
			}
			return leaf(n.inputs[0], nil)
		}
		return leaf(v, implicitStrides(v.shape, outDims))
	}
	for _, id := range members {
		n := b.nodes[id]
		f.ops++
		var dst int
		switch {
		case boolBroadcast(n):
			dst = broadcastBool(n)
		case n.op == backends.OpTypeBroadcastInDim:
			dst = leaf(n.inputs[0], broadcastStrides(n.inputs[0].shape, outDims, n.attrs[1].([]int)))
		case n.op == backends.OpTypeReshape:
			dst = leaf(n.inputs[0], nil)
		case boolConvert(n):
			dst = boolLeaf(n.inputs[0])
		case n.op == backends.OpTypeConvertDType:
			a := operand(n.inputs[0])
			if n.inputs[0].shape.DType == dtypes.Float32 && n.outputs[0].shape.DType == dtypes.BFloat16 {
				dst = f.nregs
				f.nregs++
				f.instrs = append(f.instrs, fusedInstr{op: opCopy, a: a, b: -1, dst: dst, round: true})
			} else {
				// bfloat16 -> float32 is exact: the register already holds the float32 values.
				dst = a
			}
		case fusedUnary[n.op]:
			in := fusedInstr{op: n.op, a: operand(n.inputs[0]), b: -1, dst: f.nregs}
			if n.outputs[0].shape.DType == dtypes.BFloat16 && !exactBF16Unary[n.op] {
				in.table = bf16Table(n.op)
			}
			dst = f.nregs
			f.nregs++
			f.instrs = append(f.instrs, in)
		case n.op == backends.OpTypeWhere:
			// A choice between two values of the output's type: nothing to round.
			c, a, bb := condition(n.inputs[0]), operand(n.inputs[1]), operand(n.inputs[2])
			dst = f.nregs
			f.nregs++
			f.instrs = append(f.instrs, fusedInstr{op: n.op, a: a, b: bb, cond: c, dst: dst, uniform: n.inputs[0].shape.Size() == 1})
		case fusedBinary[n.op]:
			a, bb := operand(n.inputs[0]), operand(n.inputs[1])
			dst = f.nregs
			f.nregs++
			// Max and Min of bfloat16 values are one of them: nothing to round.
			round := n.outputs[0].shape.DType == dtypes.BFloat16 && n.op != backends.OpTypeMax && n.op != backends.OpTypeMin
			f.instrs = append(f.instrs, fusedInstr{op: n.op, a: a, b: bb, dst: dst, round: round})
		default:
			return nil, fmt.Errorf("gobackend: computation %q: %s #%d in a fusion (bug)", b.name, n.op, n.id)
		}
		regOf[n.outputs[0].id] = dst
	}
	if len(f.instrs) == 0 || f.instrs[len(f.instrs)-1].dst != regOf[f.out] {
		// The root is a broadcast (or a program whose last value is a leaf): copy it out.
		f.instrs = append(f.instrs, fusedInstr{op: opCopy, a: regOf[f.out], b: -1, dst: f.nregs})
		f.nregs++
	}
	for _, x := range extra {
		reg, ok := regOf[x]
		if !ok || !slices.ContainsFunc(f.instrs, func(in fusedInstr) bool { return in.dst == reg }) {
			return nil, fmt.Errorf("gobackend: computation %q: extra output #%d of fusion #%d is not computed by an instruction (bug)", b.name, x, r)
		}
		f.extra = append(f.extra, fusedOut{value: x, reg: reg})
	}
	f.allocRegisters()
	f.readAhead = f.readsAhead()
	return f, nil
}

// scalarConstant returns the value of a one-element float32 or bfloat16 constant (as float32:
// exact for a bfloat16).
func scalarConstant(v *value) (float32, bool) {
	if v.node.op != backends.OpTypeConstant {
		return 0, false
	}
	switch flat := v.node.attrs[0].(type) {
	case []float32:
		if len(flat) == 1 && v.shape.DType == dtypes.Float32 {
			return flat[0], true
		}
	case []bfloat16.BFloat16:
		if len(flat) == 1 && v.shape.DType == dtypes.BFloat16 {
			return flat[0].Float32(), true
		}
	}
	return 0, false
}

// rowMajorStrides returns the strides of a row-major array with dimensions dims.
func rowMajorStrides(dims []int) []int {
	st := make([]int, len(dims))
	s := 1
	for a := len(dims) - 1; a >= 0; a-- {
		st[a] = s
		s *= dims[a]
	}
	return st
}

// implicitStrides are the strides an elementwise operand of shape in is read with over outDims:
// nil when it has the output's dimensions, 0 on the axes where it has dimension 1.
func implicitStrides(in shapes.Shape, outDims []int) []int {
	if slices.Equal(in.Dimensions, outDims) || in.Size() == 1 {
		return nil // same layout, or a single value (read as a scalar whatever its rank)
	}
	st := rowMajorStrides(in.Dimensions)
	for a, d := range in.Dimensions {
		if d == 1 && outDims[a] != 1 {
			st[a] = 0
		}
	}
	return st
}

// broadcastStrides are the strides BroadcastInDim reads its operand with: operand axis i is
// output axis axes[i]; other output axes, and operand axes of dimension 1, repeat (stride 0).
func broadcastStrides(in shapes.Shape, outDims, axes []int) []int {
	src := rowMajorStrides(in.Dimensions)
	st := make([]int, len(outDims))
	for i, a := range axes {
		if in.Dimensions[i] != 1 {
			st[a] = src[i]
		}
	}
	return st
}

// coalesce drops axes of dimension 1 and merges neighbouring axes that the strides walk as one
// (outer stride = inner stride × inner dimension), so the common broadcasts become 1- or 2-axis
// loops. It always returns at least one axis.
func coalesce(dims, strides []int) ([]int, []int) {
	var d, s []int
	for a, n := range dims {
		if n == 1 {
			continue
		}
		if k := len(d) - 1; k >= 0 && s[k] == strides[a]*n {
			d[k] *= n
			s[k] = strides[a]
			continue
		}
		d = append(d, n)
		s = append(s, strides[a])
	}
	if len(d) == 0 {
		return []int{1}, []int{0}
	}
	return d, s
}
