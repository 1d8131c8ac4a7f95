package xla

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	xladtypes "github.com/gomlx/go-xla/pkg/types/dtypes"
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// These tests run in every build, -tags noxla included: tracing needs no cgo and no plugin.
// trainer/step's hlo_gomlx_test.go and hlo_sharding_gomlx_test.go here check the text against
// GoMLX's own XLA backend where that is compiled in; hlo_sharding_test.go covers AutoSharding.

// TestHLODTypesAgree pins the assumption of dtypeToXLA: GoMLX and go-xla number dtypes alike.
func TestHLODTypesAgree(t *testing.T) {
	for _, tc := range []struct {
		gomlx dtypes.DType
		xla   xladtypes.DType
	}{
		{dtypes.Bool, xladtypes.Bool}, {dtypes.Int8, xladtypes.Int8}, {dtypes.Int16, xladtypes.Int16},
		{dtypes.Int32, xladtypes.Int32}, {dtypes.Int64, xladtypes.Int64}, {dtypes.Uint8, xladtypes.Uint8},
		{dtypes.Uint16, xladtypes.Uint16}, {dtypes.Uint32, xladtypes.Uint32}, {dtypes.Uint64, xladtypes.Uint64},
		{dtypes.Float16, xladtypes.Float16}, {dtypes.BFloat16, xladtypes.BFloat16},
		{dtypes.Float32, xladtypes.Float32}, {dtypes.Float64, xladtypes.Float64},
	} {
		if got := dtypeToXLA(tc.gomlx); got != tc.xla {
			t.Errorf("dtypeToXLA(%s) = %s, want %s", tc.gomlx, got, tc.xla)
		}
	}
}

func f32(dims ...int) shapes.Shape { return shapes.Make(dtypes.Float32, dims...) }

func mustParse(t *testing.T, text string) *HLOModule {
	t.Helper()
	m, err := ParseStableHLO(text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return m
}

// TestStableHLOAllReduce: an SPMD trace carries num_replicas and the collective's replica groups,
// and the parsed structure exposes both plus the dataflow around it.
func TestStableHLOAllReduce(t *testing.T) {
	text, err := StableHLO(context.Background(), HLOSpec{Name: "allreduce", Replicas: 8, Inputs: []shapes.Shape{f32(3), f32()}},
		func(in []*graph.Node) []*graph.Node {
			sq := graph.Square(in[0])
			r := in[0].Graph().Distributed().AllReduce([]*graph.Node{sq, in[1]}, backends.ReduceOpSum)
			return []*graph.Node{graph.Div(r[0], r[1]), graph.Neg(in[1])}
		})
	if err != nil {
		t.Fatal(err)
	}
	m := mustParse(t, text)
	if m.Name != "allreduce" || m.NumReplicas != 8 || !slices.Equal(m.Args, []string{"%arg0", "%arg1"}) || len(m.Results) != 2 {
		t.Fatalf("module %q replicas %d args %v results %v", m.Name, m.NumReplicas, m.Args, m.Results)
	}
	ar := m.Find("stablehlo.all_reduce")
	if len(ar) != 1 {
		t.Fatalf("%d all_reduce ops, want 1:\n%s", len(ar), text)
	}
	op := m.Ops[ar[0]]
	groups, err := op.ReplicaGroups()
	if err != nil || !slices.Equal(groups[0], []int{0, 1, 2, 3, 4, 5, 6, 7}) || len(groups) != 1 {
		t.Errorf("replica groups %v, %v", groups, err)
	}
	if len(op.Operands) != 2 || len(op.Results) != 2 || len(op.Regions) != 1 || op.Regions[0][0].Name != "stablehlo.add" {
		t.Errorf("all_reduce = %+v", op)
	}
	if m.Ops[m.Producer(op.Operands[0])].Name != "stablehlo.multiply" || m.Producer(op.Operands[1]) != -1 {
		t.Errorf("all_reduce operands come from %v", op.Operands)
	}
	if !m.DependsOn(m.Results[0], ar[0]) || m.DependsOn(m.Results[1], ar[0]) {
		t.Errorf("dataflow: result 0 must depend on the all_reduce, result 1 must not")
	}
	if ops, args := m.Ancestors(m.Results[0]); !slices.Equal(args, []string{"%arg0", "%arg1"}) || !slices.Contains(ops, ar[0]) {
		t.Errorf("ancestors of %s: ops %v args %v", m.Results[0], ops, args)
	}
	if len(m.Users(op.Results[0])) != 1 {
		t.Errorf("users of %s: %v", op.Results[0], m.Users(op.Results[0]))
	}
}

// TestStableHLOAllReduceDTypes: StableHLO wants one element type per all_reduce; mixed operands
// give one op per dtype, in the order the dtypes first appear, results back in operand order.
func TestStableHLOAllReduceDTypes(t *testing.T) {
	text, err := StableHLO(context.Background(), HLOSpec{Name: "mixed", Replicas: 4,
		Inputs: []shapes.Shape{f32(2), shapes.Make(dtypes.Int32, 3), f32()}},
		func(in []*graph.Node) []*graph.Node {
			return in[0].Graph().Distributed().AllReduce(in, backends.ReduceOpSum)
		})
	if err != nil {
		t.Fatal(err)
	}
	m := mustParse(t, text)
	ar := m.Find("stablehlo.all_reduce")
	if len(ar) != 2 {
		t.Fatalf("%d all_reduce ops, want 2", len(ar))
	}
	first, second := m.Ops[ar[0]], m.Ops[ar[1]]
	if !slices.Equal(first.Operands, []string{"%arg0", "%arg2"}) || !slices.Equal(second.Operands, []string{"%arg1"}) {
		t.Fatalf("operands %v then %v", first.Operands, second.Operands)
	}
	want := []string{first.Results[0], second.Results[0], first.Results[1]}
	if !slices.Equal(m.Results, want) {
		t.Errorf("results %v, want %v", m.Results, want)
	}
}

func TestStableHLOErrors(t *testing.T) {
	ctx := context.Background()
	identity := func(in []*graph.Node) []*graph.Node { return in }
	for _, tc := range []struct {
		spec HLOSpec
		want string
	}{
		{HLOSpec{Inputs: []shapes.Shape{f32()}}, "xla.HLOSpec.Name"},
		{HLOSpec{Name: "x", Replicas: -1, Inputs: []shapes.Shape{f32()}}, "xla.HLOSpec.Replicas"},
		{HLOSpec{Name: "x", Inputs: []shapes.Shape{{}}}, "xla.HLOSpec.Inputs[0]"},
	} {
		if _, err := StableHLO(ctx, tc.spec, identity); !errors.Is(err, ErrInvalidHLOSpec) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("StableHLO(%+v) = %v; want ErrInvalidHLOSpec naming %s", tc.spec, err, tc.want)
		}
	}
	// An operation the tracer does not translate is named.
	_, err := StableHLO(ctx, HLOSpec{Name: "argmax", Inputs: []shapes.Shape{f32(4)}},
		func(in []*graph.Node) []*graph.Node { return []*graph.Node{graph.ArgMax(in[0], 0)} })
	if !errors.Is(err, ErrHLOUnsupported) || !strings.Contains(err.Error(), "ArgMinMax") {
		t.Errorf("ArgMax: %v; want ErrHLOUnsupported naming ArgMinMax", err)
	}
	// A shape error is a GoMLX panic, returned.
	_, err = StableHLO(ctx, HLOSpec{Name: "bad", Inputs: []shapes.Shape{f32(3), f32(4)}},
		func(in []*graph.Node) []*graph.Node { return []*graph.Node{graph.Add(in[0], in[1])} })
	var pe *PanicError
	if !errors.As(err, &pe) {
		t.Errorf("mismatched Add: %v; want a *PanicError", err)
	}
	// A collective needs an SPMD program.
	_, err = StableHLO(ctx, HLOSpec{Name: "single", Inputs: []shapes.Shape{f32(3)}},
		func(in []*graph.Node) []*graph.Node {
			return in[0].Graph().Distributed().AllReduce(in, backends.ReduceOpSum)
		})
	if err == nil {
		t.Error("AllReduce in a single-replica trace did not fail")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := StableHLO(cancelled, HLOSpec{Name: "x", Inputs: []shapes.Shape{f32()}}, identity); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

// TestStableHLOContext: variables read become inputs after the spec's, variables set become
// outputs before the function's, and the context's values are left as they were.
func TestStableHLOContext(t *testing.T) {
	c := mlctx.New()
	w := c.In("layer").VariableWithValue("w", []float32{1, 2, 3})
	step := c.In("opt").VariableWithValue("count", float32(7))
	fn := func(c *mlctx.Context, in []*graph.Node) []*graph.Node {
		g := in[0].Graph()
		y := graph.Mul(in[0], w.ValueGraph(g))
		step.SetValueGraph(graph.AddScalar(step.ValueGraph(g), 1))
		return []*graph.Node{graph.ReduceAllSum(y)}
	}
	text, err := StableHLOContext(context.Background(), HLOSpec{Name: "ctx", Inputs: []shapes.Shape{f32(3)}}, c, fn)
	if err != nil {
		t.Fatal(err)
	}
	m := mustParse(t, text)
	if len(m.Args) != 3 || len(m.Results) != 2 {
		t.Fatalf("args %v results %v, want 3 inputs (x, w, count) and 2 outputs (count, sum):\n%s", m.Args, m.Results, text)
	}
	if m.Ops[m.Producer(m.Results[0])].Name != "stablehlo.add" || m.Ops[m.Producer(m.Results[1])].Name != "stablehlo.reduce" {
		t.Errorf("outputs are not [new count, sum]:\n%s", text)
	}
	if got := tensors.MustCopyFlatData[float32](w.MustValue()); !slices.Equal(got, []float32{1, 2, 3}) {
		t.Errorf("w changed to %v", got)
	}
	if got := step.MustValue().Value().(float32); got != 7 {
		t.Errorf("count changed to %v", got)
	}
	again, err := StableHLOContext(context.Background(), HLOSpec{Name: "ctx", Inputs: []shapes.Shape{f32(3)}}, c, fn)
	if err != nil || again != text {
		t.Errorf("a second trace differs (%v)", err)
	}
}

func TestParseStableHLOErrors(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"", `want "module"`},
		{"module @m {\n}", "no main function"},
		{"module @m {\n  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {\n    %0 = \"stablehlo.negate\"(%arg0 : x\n  }\n}", "line 3: unbalanced"},
		{"module @m {\n  func.func @main(%arg0: tensor<f32>) -> tensor<f32> {\n    %0 = \"stablehlo.negate\"(%arg0) : (tensor<f32>) -> tensor<f32>\n  }\n}", "does not end with a return"},
	} {
		if _, err := ParseStableHLO(tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseStableHLO(%q) = %v; want an error containing %q", tc.text, err, tc.want)
		}
	}
	op := HLOOp{Name: "stablehlo.all_reduce", Attrs: "replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>"}
	if g, err := op.ReplicaGroups(); err != nil || len(g) != 2 || !slices.Equal(g[1], []int{1, 3}) {
		t.Errorf("ReplicaGroups = %v, %v", g, err)
	}
	if _, err := (HLOOp{Name: "stablehlo.add", Line: 7}).ReplicaGroups(); err == nil || !strings.Contains(err.Error(), "line 7") {
		t.Errorf("missing replica_groups: %v", err)
	}
}
