//go:build !noxla

package step_test

// These tests check gotpu's StableHLO tracer against GoMLX's own XLA backend: for the same graph,
// the text must be byte-identical to what GoMLX v0.26.0 would hand to a PJRT plugin. GoMLX refuses
// to build anything before a plugin is loaded, so gomlxStableHLO below builds on xla/xlatest's
// GoMLXBackend, which forces it (the hack lives only in that test-helper package); the library
// route (xla.StableHLO) needs none of it.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads better unqualified.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/trainer/step"
	"github.com/gotpu/gotpu/xla"
	"github.com/gotpu/gotpu/xla/xlatest"
)

// gomlxStableHLO builds spec's program with GoMLX's XLA backend and returns its StableHLO text,
// with the output conventions of xla.StableHLOContext when c is not nil.
func gomlxStableHLO(t *testing.T, spec xla.HLOSpec, c *mlctx.Context, fn step.GraphFunc) string {
	t.Helper()
	be := xlatest.NewGoMLXBackend(max(spec.Replicas, 1))
	g := NewGraph(be, spec.Name)
	if spec.Replicas > 1 {
		mesh, err := distributed.NewDeviceMesh([]int{spec.Replicas}, []string{xla.ReplicaAxis})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.SetSPMD(mesh); err != nil {
			t.Fatal(err)
		}
	}
	in := make([]*Node, len(spec.Inputs))
	for i, s := range spec.Inputs {
		in[i] = Parameter(g, fmt.Sprintf("arg%d", i), s)
	}
	outs := fn(c, in)
	if c != nil {
		var vars []*Node
		for v := range c.IterVariables() {
			if v.ChangedInGraph(g) {
				vars = append(vars, v.ValueGraph(g))
			}
		}
		outs = append(vars, outs...)
	}
	func() {
		// Compile writes the module, then fails on the missing PJRT client.
		defer func() { _ = recover() }()
		g.Compile(outs...)
	}()
	return be.Module(t)
}

// firstDifference shows where two texts part.
func firstDifference(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  gotpu: %s\n  GoMLX: %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths differ: %d vs %d lines", len(al), len(bl))
}

func checkSame(t *testing.T, spec xla.HLOSpec, c *mlctx.Context, fn step.GraphFunc) {
	t.Helper()
	var got string
	var err error
	if c == nil {
		got, err = xla.StableHLO(context.Background(), spec, func(in []*Node) []*Node { return fn(nil, in) })
	} else {
		got, err = xla.StableHLOContext(context.Background(), spec, c, fn)
	}
	if err != nil {
		t.Fatal(err)
	}
	if want := gomlxStableHLO(t, spec, c, fn); got != want {
		t.Errorf("%s: gotpu's StableHLO differs from GoMLX's XLA backend at %s", spec.Name, firstDifference(got, want))
	}
}

var (
	f32m  = shapes.Make(dtypes.Float32, 3, 4)
	f32v  = shapes.Make(dtypes.Float32, 4)
	f32s  = shapes.Make(dtypes.Float32)
	i32m  = shapes.Make(dtypes.Int32, 3, 4)
	i32ix = shapes.Make(dtypes.Int32, 5, 1)
)

// TestStableHLOOpsMatchGoMLX covers every operation the tracer translates.
func TestStableHLOOpsMatchGoMLX(t *testing.T) {
	unary := []func(*Node) *Node{Abs, Ceil, Cos, Erf, Exp, Expm1, Floor, IsFinite, Log, Log1p, Logistic, Neg,
		Round, Rsqrt, Sign, Sin, Sqrt, Tanh, IsNaN}
	binary := []func(a, b *Node) *Node{Add, Sub, Mul, Div, Max, Min, Pow, Rem, Equal, NotEqual, GreaterThan,
		GreaterOrEqual, LessThan, LessOrEqual, EqualTotalOrder, NotEqualTotalOrder, GreaterThanTotalOrder,
		GreaterOrEqualTotalOrder, LessThanTotalOrder, LessOrEqualTotalOrder}
	intBinary := []func(a, b *Node) *Node{BitwiseAnd, BitwiseOr, BitwiseXor, BitwiseShiftLeft,
		BitwiseShiftRightArithmetic, BitwiseShiftRightLogical, Equal, GreaterThan}
	cases := []struct {
		name     string
		replicas int
		in       []shapes.Shape
		fn       func(in []*Node) []*Node
	}{
		{"unary", 0, []shapes.Shape{f32m}, func(in []*Node) []*Node {
			var out []*Node
			for _, f := range unary {
				out = append(out, f(in[0]))
			}
			return out
		}},
		{"binary_broadcast", 0, []shapes.Shape{f32m, f32s, shapes.Make(dtypes.Float32, 1, 4)}, func(in []*Node) []*Node {
			var out []*Node
			for _, f := range binary {
				out = append(out, f(in[0], in[0]), f(in[0], in[1]), f(in[1], in[0]), f(in[0], in[2]))
			}
			return out
		}},
		{"integer_and_logical", 0, []shapes.Shape{i32m, i32m}, func(in []*Node) []*Node {
			out := []*Node{BitwiseNot(in[0]), Clz(in[0]), BitCount(in[0])}
			for _, f := range intBinary {
				out = append(out, f(in[0], in[1]))
			}
			a, b := GreaterThan(in[0], in[1]), LessThan(in[0], in[1])
			return append(out, LogicalNot(a), LogicalAnd(a, b), LogicalOr(a, b), LogicalXor(a, b),
				ReduceLogicalAnd(a, 1), ReduceLogicalOr(a), ReduceLogicalXor(a, 0))
		}},
		{"structure", 0, []shapes.Shape{f32m, f32v}, func(in []*Node) []*Node {
			x := in[0]
			g := x.Graph()
			return []*Node{Reshape(x, 4, 3), Transpose(x, 0, 1), BroadcastToDims(Reshape(in[1], 1, 4), 3, 4), BroadcastPrefix(in[1], 3),
				Slice(x, AxisRange(1, 3), AxisRange().Stride(2)), Concatenate([]*Node{x, x}, 0),
				Pad(x, Scalar(g, dtypes.Float32, 0), backends.PadAxis{Start: 1, End: 2, Interior: 1}),
				Reverse(x, 1), Iota(g, shapes.Make(dtypes.Int32, 3, 4), 1), ConvertDType(x, dtypes.BFloat16),
				ConvertDType(x, dtypes.Int64), Bitcast(x, dtypes.Int32), Where(GreaterThan(x, ZerosLike(x)), x, Scalar(g, dtypes.Float32, 1)),
				Clamp(Scalar(g, dtypes.Float32, -1), x, Scalar(g, dtypes.Float32, 1)),
				Const(g, []float32{1, 2, 3}), Const(g, [][]bool{{true, false}}), Scalar(g, dtypes.BFloat16, 0.5),
				Identity(x)}
		}},
		{"dynamic_slices", 0, []shapes.Shape{f32m, shapes.Make(dtypes.Int32), shapes.Make(dtypes.Int32, 2)}, func(in []*Node) []*Node {
			x, i := in[0], in[1]
			return []*Node{DynamicSlice(x, []*Node{i, i}, []int{2, 2}), DynamicSlice(x, []*Node{in[2]}, []int{1, 3}),
				DynamicUpdateSlice(x, Ones(x.Graph(), shapes.Make(dtypes.Float32, 1, 2)), []*Node{i, i})}
		}},
		{"gather_scatter", 0, []shapes.Shape{f32m, i32ix, shapes.Make(dtypes.Float32, 5, 4)}, func(in []*Node) []*Node {
			return []*Node{Gather(in[0], in[1]), ScatterSum(in[0], in[1], in[2], false, false),
				ScatterMax(in[0], in[1], in[2], false, false), ScatterMin(in[0], in[1], in[2], true, true)}
		}},
		{"dots_reductions", 0, []shapes.Shape{f32m, f32v, shapes.Make(dtypes.Int32, 3, 4)}, func(in []*Node) []*Node {
			x := in[0]
			return []*Node{Dot(x, in[1]), Dot(in[1], in[1]), Dot(x, Transpose(x, 0, 1)),
				DotGeneral(x, []int{1}, []int{0}, x, []int{1}, []int{0}), Einsum("ij,kj->ik", x, x),
				ReduceSum(x, 1), ReduceAllSum(x), ReduceMax(x, 0), ReduceMin(x, 1), ReduceMultiply(x, 0),
				ReduceMax(in[2], 1), ReduceMin(in[2]), ReduceSum(in[2])}
		}},
		{"random", 0, []shapes.Shape{shapes.Make(dtypes.Uint64, 3)}, func(in []*Node) []*Node {
			state, v := RandomUniform(in[0], f32m)
			return []*Node{state, v}
		}},
		// One dtype only: with several, GoMLX v0.26.0 emits one all_reduce per dtype in map order
		// (it varies between runs); gotpu's order is the operands' (TestStableHLOAllReduceDTypes).
		{"all_reduce_sum", 4, []shapes.Shape{f32m, f32v, f32s}, func(in []*Node) []*Node {
			return in[0].Graph().Distributed().AllReduce(in, backends.ReduceOpSum)
		}},
		{"all_reduce_max", 8, []shapes.Shape{f32v}, func(in []*Node) []*Node {
			return in[0].Graph().Distributed().AllReduce(in, backends.ReduceOpMax)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkSame(t, xla.HLOSpec{Name: tc.name, Replicas: tc.replicas, Inputs: tc.in}, nil,
				func(_ *mlctx.Context, in []*Node) []*Node { return tc.fn(in) })
		})
	}
}

// TestStepProgramsMatchGoMLX: every program of the step, for every model family, is the text
// GoMLX's XLA backend would compile — the golden tests of trainer/step check gotpu's own rendering.
func TestStepProgramsMatchGoMLX(t *testing.T) {
	rt, err := xla.Open(context.Background(), xla.Config{Device: xla.DeviceGo})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for _, tc := range []struct {
		fixture string
		bf16    bool
		opt     string
		batch   step.BatchShape
	}{
		{"gpt2-tiny", false, "adamw", step.BatchShape{Size: 2, SeqLen: 16}},
		{"gpt2-tiny", true, "adafactor", step.BatchShape{Size: 2, SeqLen: 16}},
		{"llama-tiny", false, "adamw", step.BatchShape{Size: 2, SeqLen: 8}},
		{"bert-tiny", false, "adamw", step.BatchShape{Size: 2, SeqLen: 8, TokenTypeIDs: true}},
	} {
		m, err := models.Load(context.Background(), rt, "../../testdata/models/"+tc.fixture, models.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		opt := step.DefaultAdamW()
		opt.Name = tc.opt
		s, err := step.New(rt, m, step.Config{Optimizer: opt, NumReplicas: 4, BF16: tc.bf16})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []step.Program{step.ProgramGradient, step.ProgramEval, step.ProgramReplicatedStep} {
			t.Run(fmt.Sprintf("%s/bf16=%v/%s/%s", tc.fixture, tc.bf16, tc.opt, p), func(t *testing.T) {
				spec, fn, err := s.ProgramGraph(p, tc.batch)
				if err != nil {
					t.Fatal(err)
				}
				checkSame(t, spec, m.Context(), fn)
			})
		}
	}
}
