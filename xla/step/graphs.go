package step

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads better unqualified.
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/models"
)

// batchArity splits a program's inputs into the batch (3 or 4 nodes: token types are optional) and
// what follows (extra nodes of which there are 0 or `extra`).
func batchArity(total, extra int) (batch int, hasExtra bool) {
	if total > 4 {
		return total - extra, true
	}
	return total, false
}

// gradGraph: inputs are the batch and, after the first micro-batch, the replica's gradient
// accumulator; outputs are the replica's loss sum, its number of loss terms, and the accumulator
// plus the gradients of the loss sum. The parameters are read, never written.
func (s *Stepper) gradGraph(c *mlctx.Context, nodes []*Node) []*Node {
	p := len(s.params)
	nb, hasAcc := batchArity(len(nodes), p)
	b, _ := splitBatch(nodes[:nb], nb == 4)
	b.Training = true
	s.mixedPrecision(c, nodes[0].Graph())
	loss, _ := s.model.Forward(c, b)
	g := loss.Graph()
	terms := s.lossTerms(b.Labels)
	// The model's loss is a mean over its terms; the step's loss is the mean over all terms of the
	// global batch, so each replica contributes its sum.
	sum := Mul(ConvertDType(loss, dtypes.Float32), terms)
	wrt := make([]*Node, p)
	for i, prm := range s.params {
		wrt[i] = s.variable(c, prm).ValueGraph(g)
	}
	grads := Gradient(sum, wrt...)
	out := []*Node{sum, terms}
	for i, gr := range grads {
		gr = ConvertDType(gr, dtypes.Float32)
		if hasAcc {
			gr = Add(nodes[nb+i], gr)
		}
		out = append(out, gr)
	}
	return out
}

// mixedPrecision switches the model's graph to bfloat16 compute when configured.
func (s *Stepper) mixedPrecision(c *mlctx.Context, g *Graph) {
	if s.cfg.BF16 {
		models.SetComputeDType(c, g, dtypes.BFloat16)
	}
}

// evalGraph: inputs are the batch; outputs the loss sum, the number of loss terms and the logits.
func (s *Stepper) evalGraph(c *mlctx.Context, nodes []*Node) []*Node {
	b, _ := splitBatch(nodes, len(nodes) == 4)
	s.mixedPrecision(c, nodes[0].Graph())
	loss, logits := s.model.Forward(c, b)
	logits = ConvertDType(logits, dtypes.Float32)
	terms := s.lossTerms(b.Labels)
	return []*Node{Mul(ConvertDType(loss, dtypes.Float32), terms), terms, logits}
}

// applyGraph: inputs are the host scalars (count, lr, decay, a, b, c: see hostScalars) and the N
// replicas' accumulators; it all-reduces them, clips, and updates parameters and optimizer state
// in place, unless the gradients are not finite. Outputs: pre-clip global norm, 1 if applied.
func (s *Stepper) applyGraph(c *mlctx.Context, nodes []*Node) []*Node {
	count, decay, sa, sb, sc := nodes[0], nodes[2], nodes[3], nodes[4], nodes[5]
	lr := nodes[1]
	accs := nodes[6:]
	p := len(s.params)
	n := len(accs) / p
	g := count.Graph()

	// All-reduce (sum over replicas), then the mean over the global batch's loss terms.
	grads := make([]*Node, p)
	for i := range p {
		sum := accs[i]
		for r := 1; r < n; r++ {
			sum = Add(sum, accs[r*p+i])
		}
		grads[i] = Div(sum, Max(count, OnesLike(count)))
	}
	sumSq := Scalar(g, dtypes.Float32, 0)
	for _, gr := range grads {
		sumSq = Add(sumSq, ReduceAllSum(Square(gr)))
	}
	norm := Sqrt(sumSq)
	finite := IsFinite(norm)
	if maxNorm := s.cfg.Optimizer.MaxGradNorm; maxNorm > 0 {
		// torch.nn.utils.clip_grad_norm_: coef = max_norm / (total_norm + 1e-6), clamped to 1.
		coef := Min(Div(Scalar(g, dtypes.Float32, maxNorm), AddScalar(norm, 1e-6)), Scalar(g, dtypes.Float32, 1))
		for i := range grads {
			grads[i] = Mul(grads[i], coef)
		}
	}
	for i, prm := range s.params {
		v := s.variable(c, prm)
		x := v.ValueGraph(g)
		xf := ConvertDType(x, dtypes.Float32)
		d := decay
		if prm.NoDecay || s.cfg.Optimizer.WeightDecay == 0 {
			d = Scalar(g, dtypes.Float32, 1)
		}
		var nx *Node
		if s.cfg.Optimizer.Name == "adamw" {
			nx = s.adamw(c, prm, xf, grads[i], d, sa, sb, sc, finite)
		} else {
			nx = s.adafactor(c, prm, xf, grads[i], d, lr, sb, finite)
		}
		v.SetValueGraph(Where(finite, ConvertDType(nx, x.DType()), x))
	}
	return []*Node{norm, ConvertDType(finite, dtypes.Float32)}
}

// adamw is torch.optim.AdamW's single-tensor update for step t (scalars from the host):
// p *= 1 - lr·wd; m = lerp(m, g, 1-β1); v = β2·v + (1-β2)·g²;
// p -= step_size · m / (sqrt(v)/bias_correction2_sqrt + eps).
func (s *Stepper) adamw(c *mlctx.Context, prm paramT, x, gr, decay, stepSize, bc2Sqrt, eps, finite *Node) *Node {
	o := s.cfg.Optimizer
	mv := c.GetVariableByScopeAndName(optimizerScope("adamw_m", prm), prm.Var())
	vv := c.GetVariableByScopeAndName(optimizerScope("adamw_v", prm), prm.Var())
	m, v := mv.ValueGraph(x.Graph()), vv.ValueGraph(x.Graph())
	nm := Add(m, MulScalar(Sub(gr, m), 1-o.Beta1))
	nv := Add(MulScalar(v, o.Beta2), MulScalar(Square(gr), 1-o.Beta2))
	denom := Add(Div(Sqrt(nv), bc2Sqrt), eps)
	nx := Sub(Mul(x, decay), Mul(stepSize, Div(nm, denom)))
	mv.SetValueGraph(Where(finite, nm, m))
	vv.SetValueGraph(Where(finite, nv, v))
	return nx
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
