package core

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph-building code reads far better unqualified.
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// Gradient checkpointing (HF's gradient_checkpointing, torch.utils.checkpoint per decoder layer).
//
// GoMLX v0.26.0 differentiates a whole graph at once (graph.Gradient) and has no custom
// vector-Jacobian products for multi-input functions, so a layer cannot be marked "recompute me"
// for its one Gradient call. Instead the training program is differentiated piece by piece:
//
//   - forward: every checkpointed layer runs on StopGradient of its input with StopGradient
//     weights, so nothing differentiates through it and its intermediate values die as soon as
//     the next layer has read them; only the layers' inputs (the checkpoints) stay live;
//   - the loss is differentiated back to the last layer's output and the weights read after
//     the layers (final norm, head): one Gradient call that stops at that output;
//   - from the last layer to the first, each layer is built again from its checkpoint and
//     differentiated alone — Gradient of sum(layer(x) · g), g the gradient arriving at its output —
//     giving its weights' gradients and the gradient at its input, which the layer below takes;
//   - the weights read before the layers (embeddings) get theirs from the first checkpoint.
//
// Each layer's gradient is then the same vector-Jacobian product, op for op, as graph.Gradient
// builds over the whole graph, and contributions to one weight (tied embeddings: the head and the
// lookup) are added in the order graph.Gradient adds them (the later use first), so losses,
// gradients and parameters are bitwise those of the program without checkpointing.
//
// The rebuilt layer reads its checkpoint through x + 0·s, s one element of the gradient arriving
// at the layer's output. The value is x (s is finite whenever the update applies; a non-finite
// gradient skips the update either way), but a compiler cannot prove it — XLA folds x·0 only for
// integers, because 0·inf is NaN — so XLA's CSE cannot merge the recomputation into the forward
// pass (which JAX's remat prevents with an optimization barrier, an operation GoMLX v0.26.0's
// graph API lacks), and the data dependency schedules the recomputation when the backward pass
// reaches the layer, not before. Dropout draws the same bits when rebuilt: the context's RNG
// state is set back to the value it had before the layer's forward pass, and restored after.

// CheckpointParam is the graph parameter (root scope) holding a training graph's *Checkpoints
// (EnableCheckpointing).
const CheckpointParam = "gotpu_checkpoints"

// checkpointPhase says where in the program the model's code is being built.
type checkpointPhase int

const (
	phasePre       checkpointPhase = iota // before the first checkpointed layer
	phaseLayer                            // inside a layer's forward pass
	phasePost                             // after a layer (the head, or between layers)
	phaseRecompute                        // rebuilding a layer for the backward pass
)

// Checkpoints records a training graph's checkpointed layers while the model is built, and
// builds the graph's gradients from them (Gradients).
type Checkpoints struct {
	c     *mlctx.Context
	g     *Graph
	phase checkpointPhase
	// layers in forward order; pre and post the weight nodes read before the first layer and
	// after the last one (each once, in order of first read).
	layers    []*checkpointLayer
	pre, post []*Node
	cur       *checkpointLayer
	// regather makes a rebuilt layer read its weights through the same x + 0·s as its input
	// (SetRegatherWeights); zero is that layer's 0·s while it is rebuilt.
	regather bool
	zero     *Node
}

// SetRegatherWeights makes the rebuilt layers read their weights through the same opaque
// identity as their input, so that a compiler cannot reuse values computed from the weights in
// the forward pass either. Under XLA's SPMD partitioner, with weights sharded (FSDP), those values
// are the layers' gathered weights: without this, XLA's CSE merges the backward pass's all-gather
// of a layer into the forward pass's and keeps every layer's whole weights live from the forward
// pass to the backward pass; with it each layer is gathered again when it is rebuilt, as FSDP
// gathers again in the backward pass (torch's reshard_after_forward). The values are unchanged.
func (cp *Checkpoints) SetRegatherWeights(on bool) { cp.regather = on }

// checkpointLayer is one checkpointed layer: its input (the checkpoint) and output in the forward
// pass, the function that builds it, the RNG state before it (nil when the context has no RNG)
// and the weight nodes it read.
type checkpointLayer struct {
	in, out *Node
	fn      func(x *Node) *Node
	rng     *Node
	weights []*Node
}

// EnableCheckpointing makes the models' checkpointed layers (RecomputedLayer) in g recompute their
// activations in the backward pass; the caller then differentiates with Gradients. It must be
// called before the model's forward pass is built.
func EnableCheckpointing(c *mlctx.Context, g *Graph) *Checkpoints {
	cp := &Checkpoints{c: c, g: g}
	c.InAbsPath("/").SetGraphParam(g, CheckpointParam, cp)
	return cp
}

// checkpointsOf returns g's *Checkpoints, or nil when checkpointing is off for g.
func checkpointsOf(c *mlctx.Context, g *Graph) *Checkpoints {
	v, ok := c.GetGraphParam(g, CheckpointParam)
	if !ok {
		return nil
	}
	cp, _ := v.(*Checkpoints)
	return cp
}

// RecomputedLayer builds one decoder layer, fn, on x. Without EnableCheckpointing (evaluation,
// generation, a training graph without gradient_checkpointing) it is fn(x), adding nothing to the
// graph. With it, the layer's forward pass is built on StopGradient(x) with StopGradient weights
// and the layer is recorded for Gradients. fn must read its weights with Weight (directly or
// through Proj and the norms), must take the previous checkpointed layer's output as its input,
// and must not differentiate through values built outside it other than x (masks, rotary
// tables and other functions of the batch alone are fine).
func RecomputedLayer(c *mlctx.Context, x *Node, fn func(x *Node) *Node) *Node {
	cp := checkpointsOf(c, x.Graph())
	if cp == nil || cp.phase == phaseRecompute {
		return fn(x)
	}
	if cp.phase == phaseLayer {
		panic(fmt.Errorf("gradient checkpointing: a checkpointed layer is built inside another"))
	}
	if n := len(cp.layers); n > 0 {
		if cp.layers[n-1].out != x {
			panic(fmt.Errorf("gradient checkpointing: layer %d's input is not layer %d's output", n, n-1))
		}
		if len(cp.post) > 0 {
			panic(fmt.Errorf("gradient checkpointing: weights read between layer %d and layer %d, outside both", n-1, n))
		}
	}
	l := &checkpointLayer{in: x, fn: fn}
	if v := cp.rngVar(); v != nil {
		l.rng = v.ValueGraph(cp.g)
		// The layer draws its dropout bits from a state that depends on its input (the same
		// state where the input is finite), so that XLA cannot generate every layer's bits at the
		// program's start and hold them all (measured: the random bits of every layer were live
		// at the peak of a checkpointed LoRA step, XLA CPU).
		v.SetValueGraph(opaqueState(l.rng, firstElement(x)))
	}
	cp.phase, cp.cur = phaseLayer, l
	l.out = fn(StopGradient(x))
	if l.rng == nil && cp.rngVar() != nil {
		// The layer created the RNG state: its value before the layer is not reachable here.
		panic(fmt.Errorf("gradient checkpointing: layer %d draws random numbers (dropout) but the context had no RNG state before it; set one (Context.SetRNGStateFromSeed) before building the program", len(cp.layers)))
	}
	cp.phase, cp.cur = phasePost, nil
	cp.layers = append(cp.layers, l)
	return l.out
}

// rngVar is the context's RNG state variable, or nil when the context has none (no dropout or
// noise can be drawn then).
func (cp *Checkpoints) rngVar() *mlctx.Variable {
	return cp.c.GetVariableByScopeAndName(mlctx.RootScope, mlctx.RNGStateVariableName)
}

// onWeight is Weight's hook: raw is the variable's node, w what Weight returns (raw, or raw cast
// to the compute dtype). It records which part of the program read raw and hides w from the
// gradient inside a layer's forward pass.
func (cp *Checkpoints) onWeight(raw, w *Node) *Node {
	add := func(list []*Node) []*Node {
		for _, n := range list {
			if n == raw {
				return list
			}
		}
		return append(list, raw)
	}
	switch cp.phase {
	case phasePre:
		cp.pre = add(cp.pre)
	case phaseLayer:
		cp.cur.weights = add(cp.cur.weights)
		return StopGradient(w)
	case phasePost:
		cp.post = add(cp.post)
	case phaseRecompute:
		if cp.regather && cp.zero != nil {
			rw := Add(raw, ConvertDType(cp.zero, raw.DType()))
			if w != raw {
				rw = ConvertDType(rw, w.DType())
			}
			return rw
		}
	}
	return w
}

// Gradients returns the gradients of the scalar loss with respect to wrt (the trained weights'
// variable nodes), as graph.Gradient(loss, wrt...) would, building each checkpointed layer again
// in the backward pass. Without checkpointed layers it is graph.Gradient.
func (cp *Checkpoints) Gradients(loss *Node, wrt ...*Node) []*Node {
	if cp == nil || len(cp.layers) == 0 {
		return Gradient(loss, wrt...)
	}
	index := make(map[*Node]int, len(wrt))
	for i, n := range wrt {
		index[n] = i
	}
	// contrib[i] collects wrt[i]'s gradient contributions, later uses first (as graph.Gradient
	// accumulates a node's consumers in reverse order).
	contrib := make([][]*Node, len(wrt))
	differentiate := func(out *Node, x *Node, weights []*Node) *Node {
		nodes := []*Node{x}
		for _, w := range weights {
			if _, ok := index[w]; ok {
				nodes = append(nodes, w)
			}
		}
		gs := Gradient(out, nodes...)
		for k, w := range nodes[1:] {
			i := index[w]
			contrib[i] = append(contrib[i], gs[k+1])
		}
		return gs[0]
	}
	last := cp.layers[len(cp.layers)-1]
	grad := differentiate(loss, last.out, cp.post)

	var rngVar *mlctx.Variable
	var rngAfter *Node
	if v := cp.rngVar(); v != nil && cp.layers[0].rng != nil {
		rngVar, rngAfter = v, v.ValueGraph(cp.g)
	}
	cp.phase = phaseRecompute
	for i := len(cp.layers) - 1; i >= 0; i-- {
		l := cp.layers[i]
		upstream := StopGradient(grad)
		cp.zero = MulScalar(firstElement(upstream), 0)
		x := Add(StopGradient(l.in), ConvertDType(cp.zero, l.in.DType()))
		if rngVar != nil {
			// The same opacity for the RNG state: a rebuilt layer's dropout bits would otherwise
			// be the forward pass's, merged by CSE and kept live from the forward pass to the
			// backward pass (measured: 646 MB a layer of a 1024-wide Llama with lora_dropout at
			// 4 × 512 tokens, XLA CPU). Where s is finite the state is l.rng itself.
			rngVar.SetValueGraph(opaqueState(l.rng, cp.zero))
		}
		y := l.fn(x)
		if !y.Shape().Equal(upstream.Shape()) {
			panic(fmt.Errorf("gradient checkpointing: layer %d rebuilt with shape %s, its forward output was %s", i, y.Shape(), upstream.Shape()))
		}
		grad = differentiate(ReduceAllSum(Mul(y, upstream)), x, l.weights)
	}
	if rngVar != nil {
		rngVar.SetValueGraph(rngAfter)
	}
	cp.phase, cp.zero = phasePost, nil
	if len(cp.pre) > 0 {
		first := cp.layers[0]
		differentiate(ReduceAllSum(Mul(first.in, StopGradient(grad))), first.in, cp.pre)
	}

	out := make([]*Node, len(wrt))
	for i, cs := range contrib {
		switch len(cs) {
		case 0:
			out[i] = ZerosLike(wrt[i])
		default:
			sum := cs[0]
			for _, c := range cs[1:] {
				sum = Add(sum, c)
			}
			out[i] = sum
		}
	}
	return out
}

// firstElement is x's first element as a scalar.
func firstElement(x *Node) *Node {
	if x.Rank() == 0 {
		return x
	}
	spec := make([]SliceAxisSpec, x.Rank())
	for i := range spec {
		spec[i] = AxisElem(0)
	}
	return Reshape(Slice(x, spec...))
}

// opaqueState is the RNG state rng where s is finite (and rng + 1 where it is not): to a
// compiler, a state that depends on s.
func opaqueState(rng, s *Node) *Node {
	finite := BroadcastToShape(IsFinite(s), rng.Shape())
	return Where(finite, rng, AddScalar(rng, 1))
}
