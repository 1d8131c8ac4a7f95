package step

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads better unqualified.
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/models"
)

// batchArity splits a program's inputs into the batch (3 or 4 nodes: position ids or token types
// are optional, batchInputs) and what follows (extra nodes of which there are 0 or `extra`).
func batchArity(total, extra int) (batch int, hasExtra bool) {
	if total > 4 {
		return total - extra, true
	}
	return total, false
}

// gradGraph: inputs are the batch and, after the first micro-batch, the replica's accumulators
// (loss sum as a float32 pair hi+lo, loss-term count, gradient sums); outputs are the
// accumulators plus this micro-batch's loss sum, its number of loss terms and the gradients of
// its loss sum. The parameters are read, never written.
//
// The loss sum of the micro-batches so far was a float64 sum on the host when the host read it
// after each micro-batch; on the device it is kept exact as an unevaluated pair of float32 (hi,
// lo; exactSum), so the train program's float32 hi+lo is the float64 sum rounded once, as before.
func (s *Stepper) gradGraph(c *mlctx.Context, nodes []*Node) []*Node {
	p := len(s.params)
	nb, hasAcc := batchArity(len(nodes), p+carryScalars)
	b := s.splitBatch(nodes[:nb])
	sum, terms, grads := s.replicaGradients(c, b)
	hi, lo := sum, ZerosLike(sum)
	if hasAcc {
		hi, lo = exactSum(nodes[nb], nodes[nb+1], sum)
		terms = Add(nodes[nb+2], terms)
	}
	out := []*Node{hi, lo, terms}
	for i, gr := range grads {
		if hasAcc {
			gr = Add(nodes[nb+carryScalars+i], gr)
		}
		out = append(out, gr)
	}
	return out
}

// carryScalars are the scalar accumulators carried between micro-batches: loss sum hi, lo, count.
const carryScalars = 3

// exactSum adds x to the float32 pair (hi, lo) without rounding error (Knuth's TwoSum, then the
// pair renormalized so |lo| ≤ ulp(hi)/2): hi+lo stays the exact sum as long as the terms are
// within 2^24 of each other in magnitude — loss sums of micro-batches always are — and the float32
// rounding of hi+lo is then the float64 sum rounded once. XLA does not reassociate floating-point
// arithmetic (no fast-math), so the error terms survive compilation.
func exactSum(hi, lo, x *Node) (*Node, *Node) {
	twoSum := func(a, b *Node) (*Node, *Node) {
		s := Add(a, b)
		bb := Sub(s, a)
		return s, Add(Sub(a, Sub(s, bb)), Sub(b, bb))
	}
	s, e := twoSum(hi, x)
	return twoSum(s, Add(lo, e))
}

// replicaGradients builds one replica's training forward and backward pass: the sum of its loss
// terms, their number, and the float32 gradients of that sum with respect to every parameter.
func (s *Stepper) replicaGradients(c *mlctx.Context, b models.Batch) (sum, terms *Node, grads []*Node) {
	b.Training = true
	b.LabelSmoothing, b.NEFTuneAlpha = s.cfg.LabelSmoothing, s.cfg.NEFTuneAlpha
	s.mixedPrecision(c, b.InputIDs.Graph())
	var cp *models.Checkpoints // nil: graph.Gradient over the whole program
	if s.cfg.GradientCheckpointing {
		cp = models.EnableCheckpointing(c, b.InputIDs.Graph())
		// On a plugin the weights are sharded by XLA's partitioner: rebuilt layers gather theirs
		// again rather than keeping the forward pass's gathered copies (gotpu's backend gathers
		// every weight once per step, before the model runs).
		cp.SetRegatherWeights(s.auto && s.fsdp != nil && s.fsdp.cfg.Shard > 1)
	}
	loss, _ := s.model.Forward(c, b)
	g := loss.Graph()
	terms = s.lossTerms(b.Labels)
	// The model's loss is a mean over its terms; the step's loss is the mean over all terms of the
	// global batch, so each replica contributes its sum.
	sum = Mul(ConvertDType(loss, dtypes.Float32), terms)
	wrt := make([]*Node, len(s.params))
	for i, prm := range s.params {
		wrt[i] = s.variable(c, prm).ValueGraph(g)
	}
	grads = cp.Gradients(sum, wrt...)
	for i, gr := range grads {
		grads[i] = ConvertDType(gr, dtypes.Float32)
	}
	return sum, terms, grads
}

// mixedPrecision switches the model's graph to bfloat16 compute when configured.
func (s *Stepper) mixedPrecision(c *mlctx.Context, g *Graph) {
	if s.cfg.BF16 {
		models.SetComputeDType(c, g, dtypes.BFloat16)
	}
}

// evalGraph: inputs are the batch; outputs the loss sum, the number of loss terms and the logits.
func (s *Stepper) evalGraph(c *mlctx.Context, nodes []*Node) []*Node {
	b := s.splitBatch(nodes)
	// HF's prediction_step calls compute_loss, so the eval loss is label-smoothed too; NEFTune's
	// hook does nothing in eval mode (Training is false here).
	b.LabelSmoothing = s.cfg.LabelSmoothing
	s.mixedPrecision(c, nodes[0].Graph())
	loss, logits := s.model.Forward(c, b)
	logits = ConvertDType(logits, dtypes.Float32)
	terms := s.lossTerms(b.Labels)
	return []*Node{Mul(ConvertDType(loss, dtypes.Float32), terms), terms, logits}
}

// updateScalars are the per-step scalars the host computes (window.go).
type updateScalars struct{ lr, decay, a, b, c *Node }

// update turns the global batch's gradient sums into the mean over its count loss terms, clips
// them by global norm and applies the optimizer to every parameter and its state in place, unless
// the gradients are not finite or allow is false. It returns the pre-clip global norm and
// whether it applied.
//
// wholeSums, when not nil, are the whole gradient sums of an FSDP step whose sums are shards (an
// FSDP step without accumulation all-reduces them whole before keeping its shards): the norm is
// then computed from them exactly as data parallelism computes it, so the step is bitwise the
// data-parallel one.
func (s *Stepper) update(c *mlctx.Context, sums []*Node, count *Node, sc updateScalars, allow *Node, wholeSums []*Node) (norm, finite *Node) {
	g := count.Graph()
	mean := func(sums []*Node) []*Node {
		out := make([]*Node, len(sums))
		for i, sum := range sums {
			out[i] = Div(sum, Max(count, OnesLike(count)))
		}
		return out
	}
	grads := mean(sums)
	// Gradients of bf16 (float16) parameters are rounded to their dtype, as torch's are
	// (lowprec.go); float32 parameters' programs are unchanged.
	s.roundGrads(c, grads)
	low := s.commonLowPrecision(c)
	switch {
	case wholeSums != nil:
		whole := mean(wholeSums)
		s.roundGrads(c, whole)
		norm = s.lowPrecisionNorm(g, whole, low, true)
	case low != dtypes.InvalidDType:
		norm = s.lowPrecisionNorm(g, grads, low, false)
	default:
		norm = Sqrt(s.gradSumSq(g, grads))
	}
	if low != dtypes.InvalidDType {
		norm = clipLowPrecision(norm, grads, s.cfg.Optimizer.MaxGradNorm, low)
		finite = LogicalAnd(IsFinite(norm), allow)
	} else {
		finite = LogicalAnd(IsFinite(norm), allow)
		if maxNorm := s.cfg.Optimizer.MaxGradNorm; maxNorm > 0 {
			// torch.nn.utils.clip_grad_norm_: coef = max_norm / (total_norm + 1e-6), clamped to 1.
			coef := Min(Div(Scalar(g, dtypes.Float32, maxNorm), AddScalar(norm, 1e-6)), Scalar(g, dtypes.Float32, 1))
			for i, prm := range s.params {
				grads[i] = Mul(grads[i], coef)
				if dt := s.variable(c, prm).Shape().DType; lowPrecision(dt) {
					grads[i] = roundTo(grads[i], dt) // torch's in-place mul_ of a bf16 gradient
				}
			}
		}
	}
	for i, prm := range s.params {
		v := s.variable(c, prm)
		x := v.ValueGraph(g)
		d := sc.decay
		if prm.NoDecay || s.cfg.Optimizer.WeightDecay == 0 {
			d = Scalar(g, dtypes.Float32, 1)
		}
		var nx *Node
		switch {
		case s.cfg.Optimizer.Name == "adamw" && lowPrecision(x.DType()):
			// State in the parameter's dtype, torch's rounding points (lowprec.go).
			nx = s.adamwLowPrecision(c, prm, x, grads[i], d, sc.a, sc.b, sc.c, finite)
		case s.cfg.Optimizer.Name == "adamw":
			nx = s.adamw(c, prm, ConvertDType(x, dtypes.Float32), grads[i], d, sc.a, sc.b, sc.c, finite)
		default:
			// transformers' Adafactor upcasts a bf16 parameter and its gradient to float32, keeps
			// its state in float32 and copies the result back (p.copy_: rounded to nearest even).
			nx = s.adafactor(c, prm, ConvertDType(x, dtypes.Float32), grads[i], d, sc.lr, sc.b, finite)
			if lowPrecision(x.DType()) {
				nx = roundTo(nx, x.DType())
			}
		}
		v.SetValueGraph(Where(finite, ConvertDType(nx, x.DType()), x))
	}
	return norm, finite
}

// adamw is torch.optim.AdamW's single-tensor update for step t (scalars from the host):
// p *= 1 - lr·wd; m = lerp(m, g, 1-β1); v = β2·v + (1-β2)·g²;
// p -= step_size · m / (sqrt(v)/bias_correction2_sqrt + eps).
//
// The new parameter is computed from the kept-or-updated moments (the variables' new values),
// not from the updated ones: where the step applies they are the same values, and where it does
// not the caller keeps the old parameter, whatever this returns. So each moment's update and its
// keep-or-update are one elementwise pass that reads the old moment and the gradient and writes
// the new moment, instead of a pass that writes the updated moment and another that selects.
func (s *Stepper) adamw(c *mlctx.Context, prm paramT, x, gr, decay, stepSize, bc2Sqrt, eps, finite *Node) *Node {
	o := s.cfg.Optimizer
	mv := c.GetVariableByScopeAndName(optimizerScope("adamw_m", prm), prm.Var())
	vv := c.GetVariableByScopeAndName(optimizerScope("adamw_v", prm), prm.Var())
	m, v := mv.ValueGraph(x.Graph()), vv.ValueGraph(x.Graph())
	nm := Where(finite, Add(m, MulScalar(Sub(gr, m), 1-o.Beta1)), m)
	nv := Where(finite, Add(MulScalar(v, o.Beta2), MulScalar(Square(gr), 1-o.Beta2)), v)
	mv.SetValueGraph(nm)
	vv.SetValueGraph(nv)
	denom := Add(Div(Sqrt(nv), bc2Sqrt), eps)
	return Sub(Mul(x, decay), Mul(stepSize, Div(nm, denom)))
}

// adafactor is transformers.Adafactor as HF Trainer configures it (external lr, no parameter
// scaling, no relative step, no first moment, eps1 1e-30, clip_threshold 1, decay_rate -0.8):
// factored second moments for matrices, RMS-clipped update, decoupled decay p -= wd·lr·p.
func (s *Stepper) adafactor(c *mlctx.Context, prm paramT, x, gr, decay, lr, beta2t, finite *Node) *Node {
	g := x.Graph()
	one := Scalar(g, dtypes.Float32, 1)
	upd := AddScalar(Square(gr), 1e-30)
	var u *Node
	if len(prm.Shape) >= 2 {
		rv := c.GetVariableByScopeAndName(optimizerScope("adafactor_row", prm), prm.Var())
		cv := c.GetVariableByScopeAndName(optimizerScope("adafactor_col", prm), prm.Var())
		row, col := rv.ValueGraph(g), cv.ValueGraph(g)
		rank := len(prm.Shape)
		nrow := Add(Mul(beta2t, row), Mul(Sub(one, beta2t), ReduceMean(upd, rank-1)))
		ncol := Add(Mul(beta2t, col), Mul(Sub(one, beta2t), ReduceMean(upd, rank-2)))
		rFactor := InsertAxes(Rsqrt(Div(nrow, ReduceAndKeep(nrow, ReduceMean, rank-2))), rank-1)
		cFactor := InsertAxes(Rsqrt(ncol), rank-2)
		u = Mul(Mul(rFactor, cFactor), gr)
		rv.SetValueGraph(Where(finite, nrow, row))
		cv.SetValueGraph(Where(finite, ncol, col))
	} else {
		vv := c.GetVariableByScopeAndName(optimizerScope("adafactor_v", prm), prm.Var())
		v := vv.ValueGraph(g)
		nv := Add(Mul(beta2t, v), Mul(Sub(one, beta2t), upd))
		u = Mul(Rsqrt(nv), gr)
		vv.SetValueGraph(Where(finite, nv, v))
	}
	rms := Sqrt(ReduceAllMean(Square(u)))
	u = Div(u, Max(one, rms)) // clip_threshold 1
	return Sub(Mul(x, decay), Mul(u, lr))
}

// paramT is the parameter description the update functions take.
type paramT = models.Param
