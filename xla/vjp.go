package xla

import (
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// GoMLX v0.26.0 builds the gradient of Dot/DotGeneral as a broadcast multiply followed by a ReduceSum,
// which materialises a [batch, lhsCross, rhsCross, contracting] tensor. XLA's algebraic simplifier
// rewrites that back into a dot, so it goes unnoticed on PJRT, but the pure-Go backend executes it
// literally: a GPT-2-shaped step took 139 s and 20 GB. The correct vector-Jacobian product of a
// DotGeneral is itself a DotGeneral (plus a transpose), which is what the functions below build.
//
// graph.VJPRegistration is GoMLX's exported table of gradient functions; we replace the two entries
// once per process. The replacement is numerically the same function, so it is safe for every graph,
// including graphs built by code that never heard of gotpu.

var (
	registerOnce sync.Once
	// stockDotGeneralVJP and stockDotVJP keep GoMLX's originals, used when a runtime asks for them
	// (benchmarks comparing both) and as the fallback when a node cannot be introspected.
	stockDotGeneralVJP graph.VJP
	stockDotVJP        graph.VJP

	// stockBackends holds the backends whose graphs must use the stock VJPs (Config.StockDotGradients).
	// It is keyed by backend instance, so the choice is per runtime, not per process.
	stockBackends sync.Map // map[backends.Backend]struct{}
)

// registerDotGradients installs gotpu's Dot and DotGeneral VJPs into GoMLX's registry, once.
//
// It must run before any graph is differentiated; Open calls it before returning a runtime, and every
// gotpu graph needs a runtime, so in practice it always has.
func registerDotGradients() {
	registerOnce.Do(func() {
		stockDotGeneralVJP = graph.VJPRegistration[graph.NodeTypeDotGeneral]
		stockDotVJP = graph.VJPRegistration[graph.NodeTypeDot]
		graph.VJPRegistration[graph.NodeTypeDotGeneral] = dispatchVJP(dotGeneralGrad, func() graph.VJP { return stockDotGeneralVJP })
		graph.VJPRegistration[graph.NodeTypeDot] = dispatchVJP(dotGrad, func() graph.VJP { return stockDotVJP })
	})
}

// dispatchVJP returns a graph.VJP that uses ours unless the node's backend asked for GoMLX's stock one.
func dispatchVJP(ours func(node, v *graph.Node) []*graph.Node, stock func() graph.VJP) graph.VJP {
	return func(node *graph.Node, vjpOutputs []*graph.Node, outputShape shapes.Shape) []*graph.Node {
		if usesStockGradients(node.Graph().Backend()) {
			return stock()(node, vjpOutputs, outputShape)
		}
		grads := ours(node, vjpOutputs[0])
		if grads == nil { // Not introspectable: stay correct, if slow.
			return stock()(node, vjpOutputs, outputShape)
		}
		return grads
	}
}

func usesStockGradients(b backends.Backend) bool {
	if b == nil {
		return false
	}
	_, ok := stockBackends.Load(b)
	return ok
}

// DotGeneralAxes are the axis numbers of a DotGeneral node.
type DotGeneralAxes struct {
	LHSContracting, LHSBatch, RHSContracting, RHSBatch []int
}

// dotGeneralRe matches the description GoMLX v0.26.0 gives of a DotGeneral node (Node.String).
// GoMLX keeps the axes in an unexported struct; String is the only public view of them.
var dotGeneralRe = regexp.MustCompile(`^DotGeneral\(lhs=\[#(\d+)\], lhsContractingAxes=\[([\d ]*)\], ` +
	`lhsBatchAxes=\[([\d ]*)\], rhs=\[#(\d+)\], rhsContractingAxes=\[([\d ]*)\], rhsBatchAxes=\[([\d ]*)\]\)`)

// warnOnce reports, once per process, that a node could not be introspected.
var warnOnce sync.Once

// dotGeneralAxesOf recovers the axes of a DotGeneral node, checking them against the operands'
// shapes so that a changed description format can never yield wrong axes, only "unknown".
func dotGeneralAxesOf(node *graph.Node) (DotGeneralAxes, error) {
	inputs := node.Inputs()
	if node.Type() != graph.NodeTypeDotGeneral || len(inputs) != 2 {
		return DotGeneralAxes{}, fmt.Errorf("node %d is %s, not a DotGeneral with two inputs", node.Id(), node.Type())
	}
	// Skip a user alias, which is printed first and could itself contain any text.
	desc := strings.TrimPrefix(node.String(), fmt.Sprintf("[%q] ", node.GetAlias()))
	m := dotGeneralRe.FindStringSubmatch(desc)
	if m == nil {
		return DotGeneralAxes{}, fmt.Errorf("unrecognised DotGeneral description %q", desc)
	}
	lhsID, _ := strconv.Atoi(m[1])
	rhsID, _ := strconv.Atoi(m[4])
	if graph.NodeId(lhsID) != inputs[0].Id() || graph.NodeId(rhsID) != inputs[1].Id() {
		return DotGeneralAxes{}, fmt.Errorf("DotGeneral description %q does not name its inputs #%d, #%d",
			desc, inputs[0].Id(), inputs[1].Id())
	}
	var ax DotGeneralAxes
	for i, dst := range []*[]int{&ax.LHSContracting, &ax.LHSBatch, nil, &ax.RHSContracting, &ax.RHSBatch} {
		if dst == nil {
			continue
		}
		for _, f := range strings.Fields(m[i+2]) {
			n, err := strconv.Atoi(f)
			if err != nil {
				return DotGeneralAxes{}, fmt.Errorf("DotGeneral description %q: %w", desc, err)
			}
			*dst = append(*dst, n)
		}
	}
	if err := ax.check(inputs[0].Shape(), inputs[1].Shape(), node.Shape()); err != nil {
		return DotGeneralAxes{}, fmt.Errorf("DotGeneral description %q: %w", desc, err)
	}
	return ax, nil
}

// check verifies that the axes describe a DotGeneral from lhs and rhs to out.
func (ax DotGeneralAxes) check(lhs, rhs, out shapes.Shape) error {
	if len(ax.LHSContracting) != len(ax.RHSContracting) || len(ax.LHSBatch) != len(ax.RHSBatch) {
		return fmt.Errorf("unpaired axes %+v", ax)
	}
	valid := func(rank int, lists ...[]int) bool {
		seen := make([]bool, rank)
		for _, l := range lists {
			for _, a := range l {
				if a < 0 || a >= rank || seen[a] {
					return false
				}
				seen[a] = true
			}
		}
		return true
	}
	if !valid(lhs.Rank(), ax.LHSContracting, ax.LHSBatch) || !valid(rhs.Rank(), ax.RHSContracting, ax.RHSBatch) {
		return fmt.Errorf("axes %+v out of range for %s x %s", ax, lhs, rhs)
	}
	for i := range ax.LHSContracting {
		if lhs.Dimensions[ax.LHSContracting[i]] != rhs.Dimensions[ax.RHSContracting[i]] {
			return fmt.Errorf("contracting dimensions differ for %s x %s", lhs, rhs)
		}
	}
	want := make([]int, 0, out.Rank())
	for _, a := range ax.LHSBatch {
		want = append(want, lhs.Dimensions[a])
	}
	for _, a := range freeAxes(lhs.Rank(), ax.LHSContracting, ax.LHSBatch) {
		want = append(want, lhs.Dimensions[a])
	}
	for _, a := range freeAxes(rhs.Rank(), ax.RHSContracting, ax.RHSBatch) {
		want = append(want, rhs.Dimensions[a])
	}
	if fmt.Sprint(want) != fmt.Sprint(out.Dimensions) {
		return fmt.Errorf("axes %+v give dimensions %v, node has %v", ax, want, out.Dimensions)
	}
	return nil
}

// freeAxes lists, in increasing order, the axes that are neither contracted nor batch: the order in
// which DotGeneral emits them.
func freeAxes(rank int, contracting, batch []int) []int {
	used := make([]bool, rank)
	for _, a := range contracting {
		used[a] = true
	}
	for _, a := range batch {
		used[a] = true
	}
	free := make([]int, 0, rank)
	for a := range rank {
		if !used[a] {
			free = append(free, a)
		}
	}
	return free
}

// dotGeneralGrad returns [dL/dlhs, dL/drhs] for out = DotGeneral(lhs, rhs) and v = dL/dout, or nil if
// the node's axes cannot be recovered.
//
// out's axes are [batch..., lhsFree..., rhsFree...]. The gradient for lhs contracts v's rhsFree axes
// with rhs's free axes (batching over the batch axes); what remains is [batch..., lhsFree...,
// rhsContracting (in rhs order)...], which one transpose puts back into lhs's layout. Symmetrically
// for rhs.
func dotGeneralGrad(node, v *graph.Node) []*graph.Node {
	ax, err := dotGeneralAxesOf(node)
	if err != nil {
		warnOnce.Do(func() {
			slog.Warn("gotpu: falling back to GoMLX's slow DotGeneral gradient", "error", err)
		})
		return nil
	}
	lhs, rhs := node.Inputs()[0], node.Inputs()[1]
	return []*graph.Node{
		operandGrad(v, rhs, lhs.Rank(), ax.LHSContracting, ax.LHSBatch, ax.RHSContracting, ax.RHSBatch, true),
		operandGrad(v, lhs, rhs.Rank(), ax.RHSContracting, ax.RHSBatch, ax.LHSContracting, ax.LHSBatch, false),
	}
}

// operandGrad computes the gradient of one DotGeneral operand ("this") given v and the other operand.
// thisFirst tells whether this operand's free axes come before the other's in the output.
func operandGrad(v, other *graph.Node, thisRank int, thisContracting, thisBatch, otherContracting, otherBatch []int,
	thisFirst bool) *graph.Node {
	numBatch := len(thisBatch)
	thisFree := freeAxes(thisRank, thisContracting, thisBatch)
	otherFree := freeAxes(other.Rank(), otherContracting, otherBatch)

	// Axes of v holding the other operand's free dimensions.
	vOtherFree := make([]int, len(otherFree))
	start := numBatch
	if thisFirst {
		start += len(thisFree)
	}
	for i := range otherFree {
		vOtherFree[i] = start + i
	}
	vBatch := make([]int, numBatch)
	for i := range vBatch {
		vBatch[i] = i
	}
	// g: [batch..., thisFree..., otherContracting sorted by other's axis...] -- or, when "this" is the
	// rhs, v's free axes are [otherFree..., thisFree...] and the contraction removes otherFree, leaving
	// the same layout.
	g := graph.DotGeneral(v, vOtherFree, vBatch, other, otherFree, otherBatch)

	// Position in g of each of other's contracting axes: after batch and thisFree, in increasing
	// order of the other operand's axis number (DotGeneral emits free axes in increasing order).
	otherFreeOfG := freeAxes(other.Rank(), otherFree, otherBatch) // == otherContracting, sorted.
	posInG := make(map[int]int, len(otherFreeOfG))
	for i, a := range otherFreeOfG {
		posInG[a] = numBatch + len(thisFree) + i
	}
	perm := make([]int, thisRank)
	for i, a := range thisBatch {
		perm[a] = i
	}
	for i, a := range thisFree {
		perm[a] = numBatch + i
	}
	for i, a := range thisContracting {
		perm[a] = posInG[otherContracting[i]]
	}
	identity := true
	for i, p := range perm {
		identity = identity && i == p
	}
	if !identity {
		g = graph.TransposeAllAxes(g, perm...)
	}
	return g
}

// dotGrad handles GoMLX's Dot node (vector.vector, matrix.vector, matrix.matrix), whose semantics are
// fully determined by its operands' ranks.
func dotGrad(node, v *graph.Node) []*graph.Node {
	in := node.Inputs()
	if len(in) != 2 {
		return nil
	}
	lhs, rhs := in[0], in[1]
	switch {
	case lhs.Rank() == 1 && rhs.Rank() == 1: // v is a scalar.
		return []*graph.Node{graph.Mul(v, rhs), graph.Mul(v, lhs)}
	case lhs.Rank() == 2 && rhs.Rank() == 1: // [i,j].[j] -> [i]
		return []*graph.Node{
			graph.DotGeneral(v, nil, nil, rhs, nil, nil), // outer product [i]x[j] -> [i,j]
			graph.DotGeneral(v, []int{0}, nil, lhs, []int{0}, nil),
		}
	case lhs.Rank() == 2 && rhs.Rank() == 2: // [i,j].[j,k] -> [i,k]
		return []*graph.Node{
			graph.DotGeneral(v, []int{1}, nil, rhs, []int{1}, nil), // [i,k].[j,k] -> [i,j]
			graph.DotGeneral(lhs, []int{0}, nil, v, []int{0}, nil), // [i,j].[i,k] -> [j,k]
		}
	}
	return nil
}
