package core

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph-building code reads far better unqualified.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// The functions here write Hugging Face's layer formulas directly rather than using GoMLX's layers
// package: v0.26.0's MultiHeadAttention scales logits by 1/d instead of 1/sqrt(d), and its norms
// and optimisers default to epsilons HF does not use. Every epsilon comes from config.json.

// ComputeDTypeParam is the graph parameter (mlctx.Context.SetGraphParam, root scope) that makes
// Weight cast float32 master weights to a half-precision compute dtype: bf16 mixed precision.
// Norms, softmax and the loss still run in float32 (toF32), as torch autocast does; gradients
// flow back through the cast into the float32 weights.
const ComputeDTypeParam = "gotpu_compute_dtype"

// Weight returns the graph value of table parameter name, found in c at Param.Scope()/Param.Var(),
// cast to the graph's compute dtype if one is set.
func Weight(c *mlctx.Context, g *Graph, name string) *Node {
	p := Param{Name: name}
	v := c.GetVariableByScopeAndName(p.Scope(), p.Var())
	if v == nil {
		panic(fmt.Errorf("model parameter %q is not in the context (scope %q, variable %q)", name, p.Scope(), p.Var()))
	}
	raw := v.ValueGraph(g)
	w := raw
	if dt, ok := c.GetGraphParam(g, ComputeDTypeParam); ok {
		if d, ok := dt.(dtypes.DType); ok && w.DType() == dtypes.Float32 {
			w = ConvertDType(w, d)
		}
	}
	if cp := checkpointsOf(c, g); cp != nil {
		w = cp.onWeight(raw, w) // gradient checkpointing (gradckpt.go)
	}
	return w
}

// Embed looks rows of table [V, E] up for integer ids [B, T]: [B, T, E].
func Embed(table, ids *Node) *Node {
	return Gather(table, ExpandAxes(ids, -1))
}

// Linear is torch.nn.Linear: x [..., in] times w [out, in] transposed, plus b [out] (b may be nil).
func Linear(x, w, b *Node) *Node {
	y := DotGeneral(x, []int{x.Rank() - 1}, nil, w, []int{1}, nil)
	if b != nil {
		y = Add(y, ExpandLeftToRank(b, y.Rank()))
	}
	return y
}

// Conv1D is transformers' Conv1D (GPT-2): w is stored [in, out], y = x @ w + b.
func Conv1D(x, w, b *Node) *Node {
	y := DotGeneral(x, []int{x.Rank() - 1}, nil, w, []int{0}, nil)
	if b != nil {
		y = Add(y, ExpandLeftToRank(b, y.Rank()))
	}
	return y
}

// toF32 upcasts half-precision activations for the steps HF computes in float32.
func toF32(x *Node) *Node {
	if x.DType() == dtypes.Float32 || x.DType() == dtypes.Float64 {
		return x
	}
	return ConvertDType(x, dtypes.Float32)
}

func toDType(x *Node, d dtypes.DType) *Node {
	if x.DType() == d {
		return x
	}
	return ConvertDType(x, d)
}

// LayerNorm is torch.nn.LayerNorm over the last axis: (x - mean) / sqrt(biased var + eps) * w + b,
// computed in float32 for half-precision inputs (as PyTorch's kernels do).
func LayerNorm(x, w, b *Node, eps float64) *Node {
	dt := x.DType()
	xf := toF32(x)
	mean := ReduceAndKeep(xf, ReduceMean, -1)
	centered := Sub(xf, mean)
	variance := ReduceAndKeep(Square(centered), ReduceMean, -1)
	// Rsqrt has no gradient in GoMLX v0.26.0; dividing by the square root is the same to an ulp.
	y := Div(centered, Sqrt(AddScalar(variance, eps)))
	y = Mul(y, ExpandLeftToRank(toF32(w), y.Rank()))
	if b != nil {
		y = Add(y, ExpandLeftToRank(toF32(b), y.Rank()))
	}
	return toDType(y, dt)
}

// RMSNorm is LlamaRMSNorm: the normalisation in float32, then cast back to the input dtype before
// the multiplication by the weight (in the weight's dtype), exactly in HF's order.
func RMSNorm(x, w *Node, eps float64) *Node {
	dt := x.DType()
	xf := toF32(x)
	variance := ReduceAndKeep(Square(xf), ReduceMean, -1)
	y := toDType(Div(xf, Sqrt(AddScalar(variance, eps))), dt)
	return Mul(ExpandLeftToRank(w, y.Rank()), toDType(y, w.DType()))
}

// Activation returns HF's ACT2FN[name] for the names the supported configs use.
func Activation(name string) (func(*Node) *Node, error) {
	switch name {
	case "gelu":
		// GELUActivation: exact erf form.
		return func(x *Node) *Node {
			return Mul(MulScalar(x, 0.5), OnePlus(Erf(MulScalar(x, 1/math.Sqrt2))))
		}, nil
	case "gelu_new", "gelu_pytorch_tanh":
		// NewGELUActivation / the tanh-approximate F.gelu: the same formula.
		return func(x *Node) *Node {
			inner := MulScalar(Add(x, MulScalar(Mul(x, Square(x)), 0.044715)), math.Sqrt(2/math.Pi))
			return Mul(MulScalar(x, 0.5), OnePlus(Tanh(inner)))
		}, nil
	case "gelu_fast":
		return func(x *Node) *Node {
			inner := Mul(MulScalar(x, 0.7978845608), OnePlus(MulScalar(Square(x), 0.044715)))
			return Mul(MulScalar(x, 0.5), OnePlus(Tanh(inner)))
		}, nil
	case "quick_gelu":
		return func(x *Node) *Node { return Mul(x, Sigmoid(MulScalar(x, 1.702))) }, nil
	case "relu":
		return func(x *Node) *Node { return Max(x, ZerosLike(x)) }, nil
	case "silu", "swish":
		return func(x *Node) *Node { return Mul(x, Sigmoid(x)) }, nil
	case "tanh":
		return Tanh, nil
	case "sigmoid":
		return Sigmoid, nil
	}
	return nil, fmt.Errorf("activation %q is not supported (gelu, gelu_new, gelu_pytorch_tanh, gelu_fast, quick_gelu, relu, silu, swish, tanh, sigmoid)", name)
}

// Dropout is torch.nn.functional.dropout: zero with probability p and scale the rest by 1/(1-p). It
// is the identity when not training or p == 0. Random bits come from the context's RNG state.
func Dropout(c *mlctx.Context, x *Node, p float64, training bool) *Node {
	if !training || p <= 0 {
		return x
	}
	if p >= 1 {
		return ZerosLike(x)
	}
	u := c.RandomUniform(x.Graph(), shapes.Make(dtypes.Float32, x.Shape().Dimensions...))
	keep := GreaterOrEqual(u, Scalar(x.Graph(), dtypes.Float32, p))
	return Where(keep, MulScalar(x, 1/(1-p)), ZerosLike(x))
}

// MinValue is torch.finfo(dtype).min, the value HF's eager attention gives masked scores.
func MinValue(g *Graph, dt dtypes.DType) *Node {
	switch dt {
	case dtypes.Float64:
		return Scalar(g, dt, -math.MaxFloat64)
	case dtypes.BFloat16:
		return Scalar(g, dt, -3.3895313892515355e38)
	case dtypes.Float16:
		return Scalar(g, dt, -65504.0)
	}
	return Scalar(g, dtypes.Float32, -math.MaxFloat32)
}

// AttentionOpts are the per-architecture details of scaled dot-product attention.
type AttentionOpts struct {
	// Either ScaleDiv (scores / ScaleDiv, GPT-2 and BERT) or ScaleMul (scores * ScaleMul, Llama) —
	// HF divides in some models and multiplies in others; both are kept to round the same way.
	ScaleDiv, ScaleMul float64
	// Allowed is [B, T, S] bool (true: query t may attend key s), nil for all.
	Allowed *Node
	// DropP is attention-probability dropout (applied only when Training).
	DropP    float64
	Training bool
}

// Attention computes softmax(q k^T scaled, masked) v with grouped-query heads, HF's eager path.
// q is [B, T, H, D]; k and v are [B, S, KV, D] with H a multiple of KV (query head h reads kv head
// h / (H/KV), as repeat_kv arranges). The softmax runs in float32. Returns [B, T, H*D].
func Attention(c *mlctx.Context, q, k, v *Node, o AttentionOpts) *Node {
	dims := q.Shape().Dimensions
	B, T, H, D := dims[0], dims[1], dims[2], dims[3]
	S, KV := k.Shape().Dimensions[1], k.Shape().Dimensions[2]
	G := H / KV
	q5 := Reshape(q, B, T, KV, G, D)
	scores := DotGeneral(q5, []int{4}, []int{0, 2}, k, []int{3}, []int{0, 2}) // [B, KV, T, G, S]
	switch {
	case o.ScaleDiv != 0:
		scores = DivScalar(scores, o.ScaleDiv)
	case o.ScaleMul != 0:
		scores = MulScalar(scores, o.ScaleMul)
	}
	scores = toF32(scores)
	if o.Allowed != nil {
		m := BroadcastToDims(Reshape(o.Allowed, B, 1, T, 1, S), B, KV, T, G, S)
		scores = Where(m, scores, BroadcastToDims(MinValue(q.Graph(), scores.DType()), B, KV, T, G, S))
	}
	probs := toDType(Softmax(scores, -1), q.DType())
	probs = Dropout(c, probs, o.DropP, o.Training)
	out := DotGeneral(probs, []int{4}, []int{0, 1}, v, []int{1}, []int{0, 2}) // [B, KV, T, G, D]
	out = TransposeAllAxes(out, 0, 2, 1, 3, 4)
	return Reshape(out, B, T, H*D)
}

// Heads reshapes [B, T, N*D] into [B, T, N, D].
func Heads(x *Node, n, d int) *Node {
	dims := x.Shape().Dimensions
	return Reshape(x, dims[0], dims[1], n, d)
}

// CausalMask returns [B, T, S] bool: query t (at absolute position offset+t) may see key s when
// s <= offset+t, the key is not padding (keyMask [B, S] of 0/1, may be nil), and, with window > 0,
// offset+t - s < window (HF's sliding window). offset is a scalar int32 node or nil for 0.
func CausalMask(g *Graph, batch, T, S int, offset *Node, keyMask *Node, window int) *Node {
	qpos := Iota(g, shapes.Make(dtypes.Int32, T, S), 0)
	if offset != nil {
		qpos = Add(qpos, ConvertDType(offset, dtypes.Int32))
	}
	kpos := Iota(g, shapes.Make(dtypes.Int32, T, S), 1)
	allowed := LessOrEqual(kpos, qpos)
	if window > 0 {
		allowed = LogicalAnd(allowed, LessThan(Sub(qpos, kpos), Scalar(g, dtypes.Int32, window)))
	}
	allowed = BroadcastToDims(Reshape(allowed, 1, T, S), batch, T, S)
	if keyMask != nil {
		allowed = LogicalAnd(allowed, KeyMask(keyMask, T))
	}
	return allowed
}

// KeyMask turns an attention_mask [B, S] (nonzero = real token) into [B, T, S] bool.
func KeyMask(mask *Node, T int) *Node {
	dims := mask.Shape().Dimensions
	keep := NotEqual(mask, ZerosLike(mask))
	return BroadcastToDims(Reshape(keep, dims[0], 1, dims[1]), dims[0], T, dims[1])
}

// Select takes index i of axis (of size n) and removes that axis. It is a DotGeneral with a one-hot
// constant rather than a Slice because GoMLX v0.26.0 differentiates Slice with Pad, which the
// pure-Go backend does not implement; the contraction costs n reads per output element.
func Select(x *Node, axis, i int) *Node {
	if axis < 0 {
		axis += x.Rank()
	}
	n := x.Shape().Dim(axis)
	onehot := make([]float64, n)
	onehot[i] = 1
	sel := ConstAsDType(x.Graph(), x.DType(), onehot)
	y := DotGeneral(x, []int{axis}, nil, sel, []int{0}, nil)
	return y
}

// SplitLast splits the last axis of x into k equal chunks (differentiable on every backend).
func SplitLast(x *Node, k int) []*Node {
	dims := x.Shape().Dimensions
	last := dims[len(dims)-1]
	split := append(append([]int(nil), dims[:len(dims)-1]...), k, last/k)
	xr := Reshape(x, split...)
	out := make([]*Node, k)
	for i := range k {
		out[i] = Select(xr, len(split)-2, i)
	}
	return out
}
