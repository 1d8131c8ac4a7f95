package xla

import (
	"fmt"

	"github.com/gomlx/go-xla/pkg/stablehlo"
	xlatypes "github.com/gomlx/go-xla/pkg/types"
	xlashapes "github.com/gomlx/go-xla/pkg/types/shapes"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// Element-wise operations of the StableHLO tracer: one go-xla call each, after GoMLX's implicit
// broadcasting of binary operands (scalars and size-1 axes).

type unaryFn func(*stablehlo.Value) (*stablehlo.Value, error)

func (b *hloBuilder) unary(what string, f unaryFn, x backends.Op) (backends.Op, error) {
	vs, err := b.values(what, x)
	if err != nil {
		return nil, err
	}
	return b.wrap(f(vs[0]))
}

func (b *hloBuilder) Identity(x backends.Op) (backends.Op, error) {
	hs, err := b.ops("Identity", x)
	if err != nil {
		return nil, err
	}
	return hs[0], nil
}

func (b *hloBuilder) Abs(x backends.Op) (backends.Op, error) { return b.unary("Abs", stablehlo.Abs, x) }
func (b *hloBuilder) Ceil(x backends.Op) (backends.Op, error) {
	return b.unary("Ceil", stablehlo.Ceil, x)
}
func (b *hloBuilder) Cos(x backends.Op) (backends.Op, error) {
	return b.unary("Cos", stablehlo.Cosine, x)
}
func (b *hloBuilder) Erf(x backends.Op) (backends.Op, error) { return b.unary("Erf", stablehlo.Erf, x) }
func (b *hloBuilder) Exp(x backends.Op) (backends.Op, error) {
	return b.unary("Exp", stablehlo.Exponential, x)
}
func (b *hloBuilder) Expm1(x backends.Op) (backends.Op, error) {
	return b.unary("Expm1", stablehlo.ExponentialMinusOne, x)
}
func (b *hloBuilder) Floor(x backends.Op) (backends.Op, error) {
	return b.unary("Floor", stablehlo.Floor, x)
}
func (b *hloBuilder) IsFinite(x backends.Op) (backends.Op, error) {
	return b.unary("IsFinite", stablehlo.IsFinite, x)
}
func (b *hloBuilder) Log(x backends.Op) (backends.Op, error) { return b.unary("Log", stablehlo.Log, x) }
func (b *hloBuilder) Log1p(x backends.Op) (backends.Op, error) {
	return b.unary("Log1p", stablehlo.LogPlusOne, x)
}
func (b *hloBuilder) LogicalNot(x backends.Op) (backends.Op, error) {
	return b.unary("LogicalNot", stablehlo.Not, x)
}
func (b *hloBuilder) BitwiseNot(x backends.Op) (backends.Op, error) {
	return b.unary("BitwiseNot", stablehlo.Not, x)
}
func (b *hloBuilder) Logistic(x backends.Op) (backends.Op, error) {
	return b.unary("Logistic", stablehlo.Logistic, x)
}
func (b *hloBuilder) Neg(x backends.Op) (backends.Op, error) {
	return b.unary("Neg", stablehlo.Negate, x)
}
func (b *hloBuilder) Round(x backends.Op) (backends.Op, error) {
	return b.unary("Round", stablehlo.RoundNearestEven, x)
}
func (b *hloBuilder) Rsqrt(x backends.Op) (backends.Op, error) {
	return b.unary("Rsqrt", stablehlo.Rsqrt, x)
}
func (b *hloBuilder) Sign(x backends.Op) (backends.Op, error) {
	return b.unary("Sign", stablehlo.Sign, x)
}
func (b *hloBuilder) Sin(x backends.Op) (backends.Op, error) {
	return b.unary("Sin", stablehlo.Sine, x)
}
func (b *hloBuilder) Sqrt(x backends.Op) (backends.Op, error) {
	return b.unary("Sqrt", stablehlo.Sqrt, x)
}
func (b *hloBuilder) Tanh(x backends.Op) (backends.Op, error) {
	return b.unary("Tanh", stablehlo.Tanh, x)
}
func (b *hloBuilder) Clz(x backends.Op) (backends.Op, error) {
	return b.unary("Clz", stablehlo.CountLeadingZeros, x)
}
func (b *hloBuilder) BitCount(x backends.Op) (backends.Op, error) {
	return b.unary("BitCount", stablehlo.Popcnt, x)
}

// IsNaN is x != x: StableHLO has no is_nan.
func (b *hloBuilder) IsNaN(x backends.Op) (backends.Op, error) { return b.NotEqual(x, x) }

type binaryFn func(lhs, rhs *stablehlo.Value) (*stablehlo.Value, error)

// broadcastPair applies GoMLX's implicit broadcasting of binary operands: a scalar takes the other
// operand's shape, and axes of size 1 stretch to the other side's size (ranks must then match).
func (b *hloBuilder) broadcastPair(what string, lhs, rhs backends.Op) (*stablehlo.Value, *stablehlo.Value, error) {
	hs, err := b.ops(what, lhs, rhs)
	if err != nil {
		return nil, nil, err
	}
	l, r := hs[0], hs[1]
	if l.shape.DType != r.shape.DType {
		return nil, nil, fmt.Errorf("xla: StableHLO trace %s: operands have dtypes %s and %s", what, l.shape.DType, r.shape.DType)
	}
	if l.shape.Equal(r.shape) {
		return l.v, r.v, nil
	}
	switch {
	case l.shape.IsScalar():
		v, err := stablehlo.BroadcastInDim(l.v, r.v.Shape(), nil)
		return v, r.v, err
	case r.shape.IsScalar():
		v, err := stablehlo.BroadcastInDim(r.v, l.v.Shape(), nil)
		return l.v, v, err
	}
	if l.shape.Rank() != r.shape.Rank() {
		return nil, nil, fmt.Errorf("xla: StableHLO trace %s: shapes %s and %s do not broadcast", what, l.shape, r.shape)
	}
	dims := make([]int, l.shape.Rank())
	axes := make([]int, l.shape.Rank())
	for i := range dims {
		ld, rd := l.shape.Dimensions[i], r.shape.Dimensions[i]
		if ld != rd && ld != 1 && rd != 1 {
			return nil, nil, fmt.Errorf("xla: StableHLO trace %s: shapes %s and %s do not broadcast (axis %d)", what, l.shape, r.shape, i)
		}
		dims[i], axes[i] = max(ld, rd), i
	}
	target := xlashapes.Make(dtypeToXLA(l.shape.DType), dims...)
	lv, rv := l.v, r.v
	if !l.shape.Equal(shapes.Make(l.shape.DType, dims...)) {
		if lv, err = stablehlo.BroadcastInDim(lv, target, axes); err != nil {
			return nil, nil, err
		}
	}
	if !r.shape.Equal(shapes.Make(r.shape.DType, dims...)) {
		if rv, err = stablehlo.BroadcastInDim(rv, target, axes); err != nil {
			return nil, nil, err
		}
	}
	return lv, rv, nil
}

func (b *hloBuilder) binary(what string, f binaryFn, lhs, rhs backends.Op) (backends.Op, error) {
	l, r, err := b.broadcastPair(what, lhs, rhs)
	if err != nil {
		return nil, err
	}
	return b.wrap(f(l, r))
}

func (b *hloBuilder) Add(l, r backends.Op) (backends.Op, error) {
	return b.binary("Add", stablehlo.Add, l, r)
}
func (b *hloBuilder) Sub(l, r backends.Op) (backends.Op, error) {
	return b.binary("Sub", stablehlo.Subtract, l, r)
}
func (b *hloBuilder) Mul(l, r backends.Op) (backends.Op, error) {
	return b.binary("Mul", stablehlo.Multiply, l, r)
}
func (b *hloBuilder) Div(l, r backends.Op) (backends.Op, error) {
	return b.binary("Div", stablehlo.Divide, l, r)
}
func (b *hloBuilder) Max(l, r backends.Op) (backends.Op, error) {
	return b.binary("Max", stablehlo.Maximum, l, r)
}
func (b *hloBuilder) Min(l, r backends.Op) (backends.Op, error) {
	return b.binary("Min", stablehlo.Minimum, l, r)
}
func (b *hloBuilder) Pow(l, r backends.Op) (backends.Op, error) {
	return b.binary("Pow", stablehlo.Power, l, r)
}
func (b *hloBuilder) Rem(l, r backends.Op) (backends.Op, error) {
	return b.binary("Rem", stablehlo.Remainder, l, r)
}
func (b *hloBuilder) LogicalAnd(l, r backends.Op) (backends.Op, error) {
	return b.binary("LogicalAnd", stablehlo.And, l, r)
}
func (b *hloBuilder) LogicalOr(l, r backends.Op) (backends.Op, error) {
	return b.binary("LogicalOr", stablehlo.Or, l, r)
}
func (b *hloBuilder) LogicalXor(l, r backends.Op) (backends.Op, error) {
	return b.binary("LogicalXor", stablehlo.Xor, l, r)
}
func (b *hloBuilder) BitwiseAnd(l, r backends.Op) (backends.Op, error) {
	return b.binary("BitwiseAnd", stablehlo.And, l, r)
}
func (b *hloBuilder) BitwiseOr(l, r backends.Op) (backends.Op, error) {
	return b.binary("BitwiseOr", stablehlo.Or, l, r)
}
func (b *hloBuilder) BitwiseXor(l, r backends.Op) (backends.Op, error) {
	return b.binary("BitwiseXor", stablehlo.Xor, l, r)
}
func (b *hloBuilder) ShiftLeft(l, r backends.Op) (backends.Op, error) {
	return b.binary("ShiftLeft", stablehlo.ShiftLeft, l, r)
}
func (b *hloBuilder) ShiftRightArithmetic(l, r backends.Op) (backends.Op, error) {
	return b.binary("ShiftRightArithmetic", stablehlo.ShiftRightArithmetic, l, r)
}
func (b *hloBuilder) ShiftRightLogical(l, r backends.Op) (backends.Op, error) {
	return b.binary("ShiftRightLogical", stablehlo.ShiftRightLogical, l, r)
}

// compare builds stablehlo.compare; totalOrder selects TOTALORDER for floats (NaNs ordered).
func (b *hloBuilder) compare(what string, dir xlatypes.ComparisonDirection, totalOrder bool, lhs, rhs backends.Op) (backends.Op, error) {
	l, r, err := b.broadcastPair(what, lhs, rhs)
	if err != nil {
		return nil, err
	}
	dt := dtypes.DType(l.Shape().DType)
	var ct xlatypes.ComparisonType
	switch {
	case dt.IsFloat() && totalOrder:
		ct = xlatypes.CompareTotalOrder
	case dt.IsFloat():
		ct = xlatypes.CompareFloat
	case dt == dtypes.Bool || dt.IsUnsigned():
		ct = xlatypes.CompareUnsigned
	default:
		ct = xlatypes.CompareSigned
	}
	return b.wrap(stablehlo.Compare(l, r, dir, ct))
}

func (b *hloBuilder) Equal(l, r backends.Op) (backends.Op, error) {
	return b.compare("Equal", xlatypes.CompareEQ, false, l, r)
}
func (b *hloBuilder) NotEqual(l, r backends.Op) (backends.Op, error) {
	return b.compare("NotEqual", xlatypes.CompareNE, false, l, r)
}
func (b *hloBuilder) GreaterThan(l, r backends.Op) (backends.Op, error) {
	return b.compare("GreaterThan", xlatypes.CompareGT, false, l, r)
}
func (b *hloBuilder) GreaterOrEqual(l, r backends.Op) (backends.Op, error) {
	return b.compare("GreaterOrEqual", xlatypes.CompareGE, false, l, r)
}
func (b *hloBuilder) LessThan(l, r backends.Op) (backends.Op, error) {
	return b.compare("LessThan", xlatypes.CompareLT, false, l, r)
}
func (b *hloBuilder) LessOrEqual(l, r backends.Op) (backends.Op, error) {
	return b.compare("LessOrEqual", xlatypes.CompareLE, false, l, r)
}
func (b *hloBuilder) EqualTotalOrder(l, r backends.Op) (backends.Op, error) {
	return b.compare("EqualTotalOrder", xlatypes.CompareEQ, true, l, r)
}
func (b *hloBuilder) NotEqualTotalOrder(l, r backends.Op) (backends.Op, error) {
	return b.compare("NotEqualTotalOrder", xlatypes.CompareNE, true, l, r)
}
func (b *hloBuilder) GreaterThanTotalOrder(l, r backends.Op) (backends.Op, error) {
	return b.compare("GreaterThanTotalOrder", xlatypes.CompareGT, true, l, r)
}
func (b *hloBuilder) GreaterOrEqualTotalOrder(l, r backends.Op) (backends.Op, error) {
	return b.compare("GreaterOrEqualTotalOrder", xlatypes.CompareGE, true, l, r)
}
func (b *hloBuilder) LessThanTotalOrder(l, r backends.Op) (backends.Op, error) {
	return b.compare("LessThanTotalOrder", xlatypes.CompareLT, true, l, r)
}
func (b *hloBuilder) LessOrEqualTotalOrder(l, r backends.Op) (backends.Op, error) {
	return b.compare("LessOrEqualTotalOrder", xlatypes.CompareLE, true, l, r)
}
