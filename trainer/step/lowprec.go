package step

import (
	"math"

	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads better unqualified.
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/x448/float16"

	"github.com/gotpu/gotpu/internal/safetensors"
)

// Low-precision parameters: a model loaded with torch_dtype bfloat16 (or float16) trains with
// its variables in that dtype, as Hugging Face trains a bf16 model without mixed precision.
// torch.optim.AdamW then keeps exp_avg and exp_avg_sq in the parameter's dtype (zeros_like(p)),
// the gradient of such a parameter is in its dtype too, and every in-place tensor op of the
// update rounds its result to that dtype. The programs here compute each of torch's ops in
// float32 and round where torch's op writes its result, so the state and the parameters are the
// values torch computes (torch 1.13's CPU kernels, checked element by element against
// testdata/bf16adamw/gen.py; the exceptions are exact ties that torch's fused multiply-add
// breaks differently, a few values in 10^5 of exp_avg_sq, each by one ulp).
//
// Rounding is to nearest, ties to even, as torch's and XLA's conversions round: roundTo does it
// with float32 arithmetic (Veltkamp's split), because GoMLX's pure-Go conversion from float32
// to bfloat16 truncates (xla/internal/gobackend/bf16.go), which would bias every update toward
// zero; the rounded value then converts exactly on every backend.

// lowPrecision says whether parameters of dtype dt keep their AdamW state in dt.
func lowPrecision(dt dtypes.DType) bool { return dt == dtypes.BFloat16 || dt == dtypes.Float16 }

// veltkamp returns the constant 2^s+1 that splits a float32 into its leading 24-s bits, and the
// smallest magnitude for which the split is exact (below it, in dt's or float32's subnormal
// range, the backend's conversion rounds instead).
func veltkamp(dt dtypes.DType) (c, tiny float64) {
	if dt == dtypes.Float16 {
		return 1<<13 + 1, math.Ldexp(1, -14) // 11 significant bits; float16 subnormals below 2^-14
	}
	return 1<<16 + 1, math.Ldexp(1, -126) // 8 significant bits; float32 (and bfloat16) subnormals
}

// roundTo rounds the float32 values of x to the nearest value of dt (ties to even), as float32
// values that convert to dt exactly. Veltkamp's split, hi = c·x − (c·x − x), is the rounding to
// nearest even of x to dt's precision for every normal float32 (checked against integer rounding
// of the bits on 20M random float32 and on every tie and near-tie of 11 binades);
// XLA does not reassociate floating-point arithmetic, so the subtraction survives compilation.
// Values whose c·x overflows, non-finite values and subnormals are left to the conversion.
func roundTo(x *Node, dt dtypes.DType) *Node {
	c, tiny := veltkamp(dt)
	cx := MulScalar(x, c)
	hi := Sub(cx, Sub(cx, x))
	abs := Abs(x)
	ok := LogicalAnd(IsFinite(cx), GreaterOrEqual(abs, Scalar(x.Graph(), dtypes.Float32, tiny)))
	return Where(ok, hi, x)
}

// roundScalar rounds a host constant as torch rounds a Python scalar operand of a bf16 tensor op
// (the double converted to float32, then to the tensor's dtype, to nearest even).
func roundScalar(x float64, dt dtypes.DType) float64 {
	f := float32(x)
	if dt == dtypes.BFloat16 {
		return float64(math.Float32frombits(uint32(safetensors.Float32ToBF16Bits(f)) << 16))
	}
	return float64(float16.Fromfloat32(f).Float32())
}

// commonLowPrecision is the dtype of all trained parameters when they share one low-precision
// dtype (then the dtype of torch's clip_grad_norm_ total norm), else InvalidDType.
func (s *Stepper) commonLowPrecision(c *mlctx.Context) dtypes.DType {
	common := dtypes.InvalidDType
	for i, prm := range s.params {
		dt := s.variable(c, prm).Shape().DType
		if !lowPrecision(dt) {
			return dtypes.InvalidDType
		}
		if i == 0 {
			common = dt
		} else if dt != common {
			common = dtypes.InvalidDType
		}
	}
	return common
}

// roundGrads rounds, in place, grads[i] to the dtype of parameter i where that is low precision:
// torch's gradient of a bf16 parameter is bf16 (gotpu's are float32 sums of the backward pass,
// divided by the loss-term count in update).
func (s *Stepper) roundGrads(c *mlctx.Context, grads []*Node) {
	for i, prm := range s.params {
		if dt := s.variable(c, prm).Shape().DType; lowPrecision(dt) {
			grads[i] = roundTo(grads[i], dt)
		}
	}
}

// lowPrecisionNorm is the global L2 norm of grads as torch.nn.utils.clip_grad_norm_ computes it
// when every gradient has dtype dt (dt is not InvalidDType): each tensor's norm is a dt value, and
// the total is the norm of those, a dt value (clipLowPrecision rounds it). Where the gradients are
// whole tensors (whole, or no FSDP, or XLA's partitioner's global program) the per-tensor norms
// are rounded as torch's are; an FSDP step's shards have no per-tensor norm until the fsdp group
// adds them, so there the float32 total is rounded once, at most an ulp of dt from torch's. With
// dt InvalidDType (whole float32 sums of an FSDP step) it is wholeSumSq's norm.
func (s *Stepper) lowPrecisionNorm(g *Graph, grads []*Node, dt dtypes.DType, whole bool) *Node {
	switch {
	case dt == dtypes.InvalidDType && whole:
		return Sqrt(s.wholeSumSq(g, grads))
	case !whole && s.fsdp != nil && g.DistributedStrategy() != distributed.AutoSharding:
		return Sqrt(s.gradSumSq(g, grads))
	}
	sumSq := Scalar(g, dtypes.Float32, 0)
	for _, gr := range grads {
		n := roundTo(Sqrt(sumSquares(gr)), dt)
		sumSq = Add(sumSq, Mul(n, n))
	}
	return Sqrt(sumSq)
}

// clipLowPrecision is torch.nn.utils.clip_grad_norm_ for gradients that are all of dtype dt:
// the total norm is a dt tensor (lowPrecisionNorm), and
// clip_coef = max_norm / (total_norm + 1e-6), clamped to 1, is computed in dt with its scalars
// rounded to dt; each gradient's product with it is rounded to dt. It returns the rounded norm,
// the one HF Trainer logs.
func clipLowPrecision(norm *Node, grads []*Node, maxNorm float64, dt dtypes.DType) *Node {
	g := norm.Graph()
	norm = roundTo(norm, dt)
	if maxNorm <= 0 {
		return norm
	}
	den := roundTo(AddScalar(norm, roundScalar(1e-6, dt)), dt)
	coef := roundTo(Div(Scalar(g, dtypes.Float32, roundScalar(maxNorm, dt)), den), dt)
	coef = Min(coef, Scalar(g, dtypes.Float32, 1))
	for i := range grads {
		grads[i] = roundTo(Mul(grads[i], coef), dt)
	}
	return norm
}

// adamwLowPrecision is torch 1.13's _single_tensor_adamw for a parameter x of low-precision dtype
// dt with state of dtype dt, one rounding to dt per in-place op:
//
//	param.mul_(1 - lr·wd)                      the scalar rounded to dt, then the product
//	exp_avg.mul_(β1).add_(grad, alpha=1-β1)    scalars rounded to dt; two roundings
//	exp_avg_sq.mul_(β2).addcmul_(g, g, value=1-β2)  β2 rounded; value kept float32
//	denom = (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)  the divisor and eps rounded; three roundings
//	param.addcdiv_(exp_avg, denom, value=-step_size)  value kept float32
//
// (torch ≥ 2.0 writes exp_avg.lerp_(grad, 1-β1), one rounding: at most an ulp of exp_avg apart.)
// gr is the float32 gradient, already a dt value (roundGrads, clipLowPrecision). The moments'
// keep-or-update is that of adamw; the new parameter is returned as float32 holding a dt value.
func (s *Stepper) adamwLowPrecision(c *mlctx.Context, prm paramT, x, gr, decay, stepSize, bc2Sqrt, eps, finite *Node) *Node {
	o := s.cfg.Optimizer
	dt := x.DType()
	g := x.Graph()
	f32 := func(n *Node) *Node { return ConvertDType(n, dtypes.Float32) }
	r := func(n *Node) *Node { return roundTo(n, dt) }
	mv := c.GetVariableByScopeAndName(optimizerScope("adamw_m", prm), prm.Var())
	vv := c.GetVariableByScopeAndName(optimizerScope("adamw_v", prm), prm.Var())
	m, v := mv.ValueGraph(g), vv.ValueGraph(g)
	mf, vf := f32(m), f32(v)
	xd := r(Mul(f32(x), r(decay)))
	nm := r(Add(r(MulScalar(mf, roundScalar(o.Beta1, dt))), MulScalar(gr, roundScalar(1-o.Beta1, dt))))
	// torch's addcmul_ computes value·g·g + v with a fused multiply-add: here the product is
	// rounded to float32 first, which only matters where the float32 sum is an exact tie in dt.
	nv := r(Add(r(MulScalar(vf, roundScalar(o.Beta2, dt))), Mul(MulScalar(gr, 1-o.Beta2), gr)))
	nm, nv = Where(finite, nm, mf), Where(finite, nv, vf)
	mv.SetValueGraph(ConvertDType(nm, dt))
	vv.SetValueGraph(ConvertDType(nv, dt))
	denom := r(Add(r(Div(r(Sqrt(nv)), r(bc2Sqrt))), r(eps)))
	return r(Sub(xd, Mul(stepSize, Div(nm, denom))))
}
