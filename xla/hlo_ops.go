package xla

import (
	"fmt"
	"math"
	"reflect"

	"github.com/gomlx/go-xla/pkg/stablehlo"
	xlatypes "github.com/gomlx/go-xla/pkg/types"
	xlashapes "github.com/gomlx/go-xla/pkg/types/shapes"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/x448/float16"
)

// The translations below follow GoMLX's backend contract (backends.StandardOps): element-wise
// binary ops broadcast scalars and size-1 axes, Where broadcasts scalar branches, reductions with
// no axes reduce everything, Round rounds half to even. Operations gotpu's models and optimizers
// do not use (convolutions, FFT, batch norm, windows, ArgMinMax, complex numbers) are left to the
// embedded notimplemented.Builder and fail the trace with ErrHLOUnsupported naming them.

// hloSupportedOps is what Capabilities reports; keep it in step with the methods of hloBuilder
// here and in hlo_elementwise.go.
var hloSupportedOps = []backends.OpType{
	backends.OpTypeParameter, backends.OpTypeConstant, backends.OpTypeIdentity,
	backends.OpTypeAbs, backends.OpTypeCeil, backends.OpTypeCos, backends.OpTypeErf, backends.OpTypeExp,
	backends.OpTypeExpm1, backends.OpTypeFloor, backends.OpTypeIsFinite, backends.OpTypeIsNaN, backends.OpTypeLog,
	backends.OpTypeLog1p, backends.OpTypeLogicalNot, backends.OpTypeLogistic, backends.OpTypeNeg,
	backends.OpTypeRound, backends.OpTypeRsqrt, backends.OpTypeSign, backends.OpTypeSin, backends.OpTypeSqrt,
	backends.OpTypeTanh, backends.OpTypeBitwiseNot, backends.OpTypeClz, backends.OpTypeBitCount,
	backends.OpTypeAdd, backends.OpTypeSub, backends.OpTypeMul, backends.OpTypeDiv, backends.OpTypeMax,
	backends.OpTypeMin, backends.OpTypePow, backends.OpTypeRem, backends.OpTypeLogicalAnd, backends.OpTypeLogicalOr,
	backends.OpTypeLogicalXor, backends.OpTypeBitwiseAnd, backends.OpTypeBitwiseOr, backends.OpTypeBitwiseXor,
	backends.OpTypeShiftLeft, backends.OpTypeShiftRightArithmetic, backends.OpTypeShiftRightLogical,
	backends.OpTypeEqual, backends.OpTypeNotEqual, backends.OpTypeGreaterThan, backends.OpTypeGreaterOrEqual,
	backends.OpTypeLessThan, backends.OpTypeLessOrEqual, backends.OpTypeEqualTotalOrder,
	backends.OpTypeNotEqualTotalOrder, backends.OpTypeGreaterThanTotalOrder,
	backends.OpTypeGreaterOrEqualTotalOrder, backends.OpTypeLessThanTotalOrder,
	backends.OpTypeLessOrEqualTotalOrder,
	backends.OpTypeReshape, backends.OpTypeTranspose, backends.OpTypeBroadcastInDim, backends.OpTypeSlice,
	backends.OpTypeConcatenate, backends.OpTypePad, backends.OpTypeReverse, backends.OpTypeIota,
	backends.OpTypeConvertDType, backends.OpTypeBitcast, backends.OpTypeWhere, backends.OpTypeClamp,
	backends.OpTypeDynamicSlice, backends.OpTypeDynamicUpdateSlice, backends.OpTypeGather,
	backends.OpTypeScatterSum, backends.OpTypeScatterMax, backends.OpTypeScatterMin, backends.OpTypeDot,
	backends.OpTypeDotGeneral, backends.OpTypeReduceSum, backends.OpTypeReduceProduct, backends.OpTypeReduceMax,
	backends.OpTypeReduceMin, backends.OpTypeReduceLogicalAnd, backends.OpTypeReduceLogicalOr,
	backends.OpTypeReduceLogicalXor, backends.OpTypeRNGBitGenerator, backends.OpTypeAllReduce,
}

func (b *hloBuilder) Reshape(x backends.Op, dims ...int) (backends.Op, error) {
	hs, err := b.ops("Reshape", x)
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.Reshape(hs[0].v, xlashapes.Make(dtypeToXLA(hs[0].shape.DType), dims...)))
}

func (b *hloBuilder) Transpose(x backends.Op, perm ...int) (backends.Op, error) {
	vs, err := b.values("Transpose", x)
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.Transpose(vs[0], perm...))
}

func (b *hloBuilder) BroadcastInDim(x backends.Op, out shapes.Shape, axes []int) (backends.Op, error) {
	vs, err := b.values("BroadcastInDim", x)
	if err != nil {
		return nil, err
	}
	xs, err := shapeToXLA(out)
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.BroadcastInDim(vs[0], xs, axes))
}

func (b *hloBuilder) Slice(x backends.Op, starts, limits, strides []int) (backends.Op, error) {
	vs, err := b.values("Slice", x)
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.Slice(vs[0], starts, limits, strides))
}

func (b *hloBuilder) Concatenate(axis int, operands ...backends.Op) (backends.Op, error) {
	vs, err := b.values("Concatenate", operands...)
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.Concatenate(axis, vs...))
}

// Pad pads each axis per axesConfig (missing trailing axes get no padding).
func (b *hloBuilder) Pad(x, fill backends.Op, axesConfig ...backends.PadAxis) (backends.Op, error) {
	hs, err := b.ops("Pad", x, fill)
	if err != nil {
		return nil, err
	}
	rank := hs[0].shape.Rank()
	if len(axesConfig) > rank {
		return nil, fmt.Errorf("xla: StableHLO trace Pad: %d axis configs for rank %d", len(axesConfig), rank)
	}
	lo, hi, in := make([]int, rank), make([]int, rank), make([]int, rank)
	for i, c := range axesConfig {
		lo[i], hi[i], in[i] = c.Start, c.End, c.Interior
	}
	return b.wrap(stablehlo.Pad(hs[0].v, hs[1].v, lo, hi, in))
}

func (b *hloBuilder) Reverse(x backends.Op, axes ...int) (backends.Op, error) {
	vs, err := b.values("Reverse", x)
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.Reverse(vs[0], axes...))
}

func (b *hloBuilder) Iota(s shapes.Shape, axis int) (backends.Op, error) {
	xs, err := shapeToXLA(s)
	if err != nil {
		return nil, err
	}
	return b.wrap(b.fn.Iota(xs, axis))
}

func (b *hloBuilder) ConvertDType(x backends.Op, dt dtypes.DType) (backends.Op, error) {
	vs, err := b.values("ConvertDType", x)
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.Convert(vs[0], dtypeToXLA(dt)))
}

func (b *hloBuilder) Bitcast(x backends.Op, dt dtypes.DType) (backends.Op, error) {
	vs, err := b.values("Bitcast", x)
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.BitcastConvert(vs[0], dtypeToXLA(dt)))
}

// Where is stablehlo.select; GoMLX lets either branch be a scalar, StableHLO does not.
func (b *hloBuilder) Where(cond, onTrue, onFalse backends.Op) (backends.Op, error) {
	hs, err := b.ops("Where", cond, onTrue, onFalse)
	if err != nil {
		return nil, err
	}
	dims := hs[0].shape.Dimensions
	for _, h := range hs[1:] {
		if !h.shape.IsScalar() {
			dims = h.shape.Dimensions
		}
	}
	vals := []*stablehlo.Value{hs[0].v, hs[1].v, hs[2].v}
	for i := 1; i <= 2; i++ {
		if hs[i].shape.IsScalar() && len(dims) > 0 {
			target := xlashapes.Make(dtypeToXLA(hs[i].shape.DType), dims...)
			if vals[i], err = stablehlo.BroadcastInDim(vals[i], target, nil); err != nil {
				return nil, err
			}
		}
	}
	return b.wrap(stablehlo.Select(vals[0], vals[1], vals[2]))
}

func (b *hloBuilder) Clamp(lo, x, hi backends.Op) (backends.Op, error) {
	vs, err := b.values("Clamp", lo, x, hi)
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.Clamp(vs[0], vs[1], vs[2]))
}

// startIndices accepts GoMLX's two spellings of dynamic-slice offsets: one scalar per axis, or a
// single rank-1 tensor holding them all (split here into scalars, as StableHLO wants).
func (b *hloBuilder) startIndices(what string, rank int, idx []backends.Op) ([]*stablehlo.Value, error) {
	hs, err := b.ops(what, idx...)
	if err != nil {
		return nil, err
	}
	if len(hs) != 1 || hs[0].shape.Rank() != 1 {
		vs := make([]*stablehlo.Value, len(hs))
		for i, h := range hs {
			vs[i] = h.v
		}
		return vs, nil
	}
	vs := make([]*stablehlo.Value, rank)
	scalar := xlashapes.Make(dtypeToXLA(hs[0].shape.DType))
	for i := range rank {
		s, err := stablehlo.Slice(hs[0].v, []int{i}, []int{i + 1}, []int{1})
		if err != nil {
			return nil, err
		}
		if vs[i], err = stablehlo.Reshape(s, scalar); err != nil {
			return nil, err
		}
	}
	return vs, nil
}

func (b *hloBuilder) DynamicSlice(x backends.Op, start []backends.Op, sizes []int) (backends.Op, error) {
	hs, err := b.ops("DynamicSlice", x)
	if err != nil {
		return nil, err
	}
	idx, err := b.startIndices("DynamicSlice", hs[0].shape.Rank(), start)
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.DynamicSlice(hs[0].v, idx, sizes))
}

func (b *hloBuilder) DynamicUpdateSlice(x, update backends.Op, start []backends.Op) (backends.Op, error) {
	hs, err := b.ops("DynamicUpdateSlice", x, update)
	if err != nil {
		return nil, err
	}
	idx, err := b.startIndices("DynamicUpdateSlice", hs[0].shape.Rank(), start)
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.DynamicUpdateSlice(hs[0].v, hs[1].v, idx))
}

// Gather: GoMLX has no batching axes, so StableHLO's are empty.
func (b *hloBuilder) Gather(x, start backends.Op, indexVectorAxis int, offsetOutputAxes, collapsedSliceAxes,
	startIndexMap, sliceSizes []int, sorted bool) (backends.Op, error) {
	vs, err := b.values("Gather", x, start)
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.Gather(vs[0], vs[1], indexVectorAxis, offsetOutputAxes, collapsedSliceAxes,
		nil, nil, startIndexMap, sliceSizes, sorted))
}

func (b *hloBuilder) scatter(what string, kind backends.ReduceOpType, x, idx, upd backends.Op, indexVectorAxis int,
	updateWindowAxes, insertedWindowAxes, scatterToOperand []int, sorted, unique bool) (backends.Op, error) {
	hs, err := b.ops(what, x, idx, upd)
	if err != nil {
		return nil, err
	}
	combine, err := b.reduceFn(reduceKey{dtype: hs[0].shape.DType, kind: kind})
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.Scatter(hs[0].v, hs[1].v, hs[2].v, updateWindowAxes, insertedWindowAxes,
		nil, nil, scatterToOperand, indexVectorAxis, sorted, unique, combine))
}

func (b *hloBuilder) ScatterSum(x, idx, upd backends.Op, ax int, uw, iw, s2o []int, sorted, unique bool) (backends.Op, error) {
	return b.scatter("ScatterSum", backends.ReduceOpSum, x, idx, upd, ax, uw, iw, s2o, sorted, unique)
}
func (b *hloBuilder) ScatterMax(x, idx, upd backends.Op, ax int, uw, iw, s2o []int, sorted, unique bool) (backends.Op, error) {
	return b.scatter("ScatterMax", backends.ReduceOpMax, x, idx, upd, ax, uw, iw, s2o, sorted, unique)
}
func (b *hloBuilder) ScatterMin(x, idx, upd backends.Op, ax int, uw, iw, s2o []int, sorted, unique bool) (backends.Op, error) {
	return b.scatter("ScatterMin", backends.ReduceOpMin, x, idx, upd, ax, uw, iw, s2o, sorted, unique)
}

// Dot is GoMLX's rank-dependent matrix/vector product, spelled as a dot_general.
func (b *hloBuilder) Dot(lhs, rhs backends.Op) (backends.Op, error) {
	hs, err := b.ops("Dot", lhs, rhs)
	if err != nil {
		return nil, err
	}
	lr, rr := hs[0].shape.Rank(), hs[1].shape.Rank()
	if lr < 1 || lr > 2 || rr < 1 || rr > 2 {
		return nil, fmt.Errorf("xla: StableHLO trace Dot: ranks %d and %d (want 1 or 2)", lr, rr)
	}
	return b.DotGeneral(lhs, []int{lr - 1}, nil, rhs, []int{0}, nil)
}

func (b *hloBuilder) DotGeneral(lhs backends.Op, lhsContract, lhsBatch []int, rhs backends.Op, rhsContract, rhsBatch []int) (backends.Op, error) {
	vs, err := b.values("DotGeneral", lhs, rhs)
	if err != nil {
		return nil, err
	}
	return b.wrap(stablehlo.DotGeneral(vs[0], lhsContract, lhsBatch, vs[1], rhsContract, rhsBatch).Done())
}

// reduceFn returns the scalar combining region for a reduction kind and dtype, built once per
// program.
func (b *hloBuilder) reduceFn(k reduceKey) (*stablehlo.Function, error) {
	if fn, ok := b.reduceFns[k]; ok {
		return fn, nil
	}
	var combine binaryFn
	switch {
	case k.logical == "and":
		combine = stablehlo.And
	case k.logical == "or":
		combine = stablehlo.Or
	case k.logical == "xor":
		combine = stablehlo.Xor
	case k.kind == backends.ReduceOpSum:
		combine = stablehlo.Add
	case k.kind == backends.ReduceOpProduct:
		combine = stablehlo.Multiply
	case k.kind == backends.ReduceOpMax:
		combine = stablehlo.Maximum
	case k.kind == backends.ReduceOpMin:
		combine = stablehlo.Minimum
	default:
		return nil, fmt.Errorf("xla: StableHLO trace: reduction %v", k.kind)
	}
	fn := b.fn.Closure()
	scalar := xlashapes.Make(dtypeToXLA(k.dtype))
	lhs, err := fn.NamedInput("lhs", scalar)
	if err != nil {
		return nil, err
	}
	rhs, err := fn.NamedInput("rhs", scalar)
	if err != nil {
		return nil, err
	}
	out, err := combine(lhs, rhs)
	if err != nil {
		return nil, err
	}
	if err := fn.Return(out); err != nil {
		return nil, err
	}
	b.reduceFns[k] = fn
	return fn, nil
}

// identity returns the neutral element of a reduction as a one-element slice of dt's Go type.
func identity(k reduceKey) (any, error) {
	dt := k.dtype
	switch {
	case k.logical == "and":
		return []bool{true}, nil
	case k.logical != "":
		return []bool{false}, nil
	case k.kind == backends.ReduceOpSum:
		return typedScalar(dt, 0)
	case k.kind == backends.ReduceOpProduct:
		return typedScalar(dt, 1)
	case k.kind == backends.ReduceOpMax && dt.IsFloat():
		return typedScalar(dt, math.Inf(-1))
	case k.kind == backends.ReduceOpMin && dt.IsFloat():
		return typedScalar(dt, math.Inf(1))
	case k.kind == backends.ReduceOpMax:
		return oneOf(dt.LowestValue()), nil
	case k.kind == backends.ReduceOpMin:
		return oneOf(dt.HighestValue()), nil
	}
	return nil, fmt.Errorf("xla: StableHLO trace: no identity for reduction %v of %s", k.kind, dt)
}

func oneOf(v any) any {
	s := reflect.MakeSlice(reflect.SliceOf(reflect.TypeOf(v)), 1, 1)
	s.Index(0).Set(reflect.ValueOf(v))
	return s.Interface()
}

// typedScalar is v as a one-element slice of dt's Go type (bfloat16 in go-xla's own type).
func typedScalar(dt dtypes.DType, v float64) (any, error) {
	switch dt {
	case dtypes.Float32:
		return []float32{float32(v)}, nil
	case dtypes.Float64:
		return []float64{v}, nil
	case dtypes.BFloat16:
		return []bfloat16.BFloat16{bfloat16.FromFloat64(v)}, nil
	case dtypes.Float16:
		return []float16.Float16{float16.Fromfloat32(float32(v))}, nil
	case dtypes.Int8:
		return []int8{int8(v)}, nil
	case dtypes.Int16:
		return []int16{int16(v)}, nil
	case dtypes.Int32:
		return []int32{int32(v)}, nil
	case dtypes.Int64:
		return []int64{int64(v)}, nil
	case dtypes.Uint8:
		return []uint8{uint8(v)}, nil
	case dtypes.Uint16:
		return []uint16{uint16(v)}, nil
	case dtypes.Uint32:
		return []uint32{uint32(v)}, nil
	case dtypes.Uint64:
		return []uint64{uint64(v)}, nil
	}
	return nil, fmt.Errorf("xla: StableHLO trace: no scalar of dtype %s", dt)
}

func (b *hloBuilder) reduce(what string, k reduceKey, x backends.Op, axes []int) (backends.Op, error) {
	hs, err := b.ops(what, x)
	if err != nil {
		return nil, err
	}
	k.dtype = hs[0].shape.DType
	fn, err := b.reduceFn(k)
	if err != nil {
		return nil, err
	}
	flat, err := identity(k)
	if err != nil {
		return nil, err
	}
	init, err := b.Constant(flat)
	if err != nil {
		return nil, err
	}
	if len(axes) == 0 {
		axes = make([]int, hs[0].shape.Rank())
		for i := range axes {
			axes[i] = i
		}
	}
	return b.wrap(stablehlo.Reduce(hs[0].v, init.(*hloOp).v, fn, axes...))
}

func (b *hloBuilder) ReduceSum(x backends.Op, axes ...int) (backends.Op, error) {
	return b.reduce("ReduceSum", reduceKey{kind: backends.ReduceOpSum}, x, axes)
}
func (b *hloBuilder) ReduceProduct(x backends.Op, axes ...int) (backends.Op, error) {
	return b.reduce("ReduceProduct", reduceKey{kind: backends.ReduceOpProduct}, x, axes)
}
func (b *hloBuilder) ReduceMax(x backends.Op, axes ...int) (backends.Op, error) {
	return b.reduce("ReduceMax", reduceKey{kind: backends.ReduceOpMax}, x, axes)
}
func (b *hloBuilder) ReduceMin(x backends.Op, axes ...int) (backends.Op, error) {
	return b.reduce("ReduceMin", reduceKey{kind: backends.ReduceOpMin}, x, axes)
}
func (b *hloBuilder) ReduceLogicalAnd(x backends.Op, axes ...int) (backends.Op, error) {
	return b.reduce("ReduceLogicalAnd", reduceKey{logical: "and"}, x, axes)
}
func (b *hloBuilder) ReduceLogicalOr(x backends.Op, axes ...int) (backends.Op, error) {
	return b.reduce("ReduceLogicalOr", reduceKey{logical: "or"}, x, axes)
}
func (b *hloBuilder) ReduceLogicalXor(x backends.Op, axes ...int) (backends.Op, error) {
	return b.reduce("ReduceLogicalXor", reduceKey{logical: "xor"}, x, axes)
}

// RNGBitGenerator uses Philox, the algorithm GoMLX's XLA backend uses, so traced programs draw the
// same random streams as the programs it compiles.
func (b *hloBuilder) RNGBitGenerator(state backends.Op, s shapes.Shape) (backends.Op, backends.Op, error) {
	vs, err := b.values("RNGBitGenerator", state)
	if err != nil {
		return nil, nil, err
	}
	xs, err := shapeToXLA(s)
	if err != nil {
		return nil, nil, err
	}
	ns, vals, err := stablehlo.RNGBitGenerator(vs[0], xs, xlatypes.RNGPhilox)
	if err != nil {
		return nil, nil, err
	}
	a, err := b.wrap(ns, nil)
	if err != nil {
		return nil, nil, err
	}
	c, err := b.wrap(vals, nil)
	return a, c, err
}

// AllReduce emits one stablehlo.all_reduce per dtype present among the operands (StableHLO wants
// one element type per op), each over all its operands of that dtype, and returns the results in
// the operands' order. Only an SPMD program (DistributedSPMD) has replicas to reduce over.
func (b *hloBuilder) AllReduce(operands []backends.Op, kind backends.ReduceOpType, groups [][]int) ([]backends.Op, error) {
	if b.numReplicas < 1 {
		return nil, fmt.Errorf("xla: StableHLO trace AllReduce in program %q, which is not an SPMD program", b.name)
	}
	hs, err := b.ops("AllReduce", operands...)
	if err != nil {
		return nil, err
	}
	var order []dtypes.DType
	byType := map[dtypes.DType][]int{}
	for i, h := range hs {
		if _, ok := byType[h.shape.DType]; !ok {
			order = append(order, h.shape.DType)
		}
		byType[h.shape.DType] = append(byType[h.shape.DType], i)
	}
	out := make([]backends.Op, len(hs))
	for _, dt := range order {
		idx := byType[dt]
		fn, err := b.reduceFn(reduceKey{dtype: dt, kind: kind})
		if err != nil {
			return nil, err
		}
		vals := make([]*stablehlo.Value, len(idx))
		for j, i := range idx {
			vals[j] = hs[i].v
		}
		res, err := stablehlo.AllReduce(vals, groups, fn)
		if err != nil {
			return nil, err
		}
		for j, i := range idx {
			if out[i], err = b.wrap(res[j], nil); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
