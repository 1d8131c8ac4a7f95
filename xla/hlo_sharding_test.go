package xla

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// shardedFixture is a small AutoSharding program over a 2×4 mesh data×fsdp: an input batch split
// over data; variables split over fsdp (w and its optimizer state m), over both axes (table) and
// none (b, count: no spec, so replicated); a dot; w, m and count updated; outputs y (split over
// data, by OutputShardings) and a replicated scalar.
type shardedFixture struct {
	mesh                 *distributed.DeviceMesh
	byData, byFSDP, both *distributed.ShardingSpec
	c                    *mlctx.Context
	w, b, m, table, cnt  *mlctx.Variable
	spec                 HLOSpec
}

func newShardedFixture(t *testing.T) *shardedFixture {
	t.Helper()
	mesh, err := distributed.NewDeviceMesh([]int{2, 4}, []string{"data", "fsdp"})
	if err != nil {
		t.Fatal(err)
	}
	f := &shardedFixture{mesh: mesh, c: mlctx.New()}
	must := func(s *distributed.ShardingSpec, err error) *distributed.ShardingSpec {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	f.byData = must(distributed.NewShardingSpec(mesh, distributed.AxisSpec{"data"}))
	f.byFSDP = must(distributed.NewShardingSpec(mesh, distributed.AxisSpec{"fsdp"}))
	f.both = must(distributed.NewShardingSpec(mesh, distributed.AxisSpec{"data"}, distributed.AxisSpec{"fsdp"}))
	f.w = f.c.In("layer").VariableWithShape("w", f32(8, 16)).WithShardingSpec(f.byFSDP)
	f.b = f.c.In("layer").VariableWithShape("b", f32(16))
	f.table = f.c.In("emb").VariableWithShape("table", f32(4, 8)).WithShardingSpec(f.both)
	f.m = f.c.In("optimizer").In("adamw_m").In("layer").VariableWithShape("w", f32(8, 16)).WithShardingSpec(f.byFSDP)
	f.cnt = f.c.In("optimizer").VariableWithShape("count", f32())
	f.spec = HLOSpec{Name: "fsdp_step", Mesh: mesh, Inputs: []shapes.Shape{f32(4, 8)},
		InputShardings: []*distributed.ShardingSpec{f.byData}, OutputShardings: []*distributed.ShardingSpec{f.byData, nil}}
	return f
}

func (f *shardedFixture) fn(_ *mlctx.Context, in []*graph.Node) []*graph.Node {
	x := in[0]
	g := x.Graph()
	w, m := f.w.ValueGraph(g), f.m.ValueGraph(g)
	y := graph.Add(graph.Dot(x, w), graph.ExpandAxes(f.b.ValueGraph(g), 0))
	grad := graph.Dot(graph.Transpose(x, 0, 1), y)
	newM := graph.Add(graph.MulScalar(m, 0.9), graph.MulScalar(grad, 0.1))
	f.m.SetValueGraph(newM)
	f.w.SetValueGraph(graph.Sub(w, graph.MulScalar(newM, 0.01)))
	f.cnt.SetValueGraph(graph.AddScalar(f.cnt.ValueGraph(g), 1))
	loss := graph.Add(graph.ReduceAllSum(y), graph.ReduceAllSum(graph.Mul(f.table.ValueGraph(g), x)))
	return []*graph.Node{y, loss}
}

// TestStableHLOAutoSharding: an AutoSharding trace declares the mesh, makes num_partitions its
// devices, annotates every argument and result, and the parser reads all of it back.
func TestStableHLOAutoSharding(t *testing.T) {
	f := newShardedFixture(t)
	text, err := StableHLOContext(context.Background(), f.spec, f.c, f.fn)
	if err != nil {
		t.Fatal(err)
	}
	m := mustParse(t, text)
	if m.NumReplicas != 1 || m.NumPartitions != 8 {
		t.Errorf("num_replicas %d num_partitions %d, want 1 and 8", m.NumReplicas, m.NumPartitions)
	}
	wantMesh := HLOMesh{Name: "mesh", Axes: []HLOMeshAxis{{"data", 2}, {"fsdp", 4}}}
	if len(m.Meshes) != 1 || m.Meshes[0].Name != wantMesh.Name || !slices.Equal(m.Meshes[0].Axes, wantMesh.Axes) ||
		m.Meshes[0].DeviceIDs != nil || m.Mesh("mesh").NumDevices() != 8 {
		t.Fatalf("meshes %+v, want [%+v]", m.Meshes, wantMesh)
	}
	if !strings.Contains(text, "  sdy.mesh @mesh = <[\"data\"=2, \"fsdp\"=4]>\n") {
		t.Errorf("no mesh declaration line:\n%s", text)
	}
	if len(m.Args) != 6 || len(m.ArgTypes) != 6 || len(m.ArgShardings) != 6 {
		t.Fatalf("args %v types %v, want x and 5 variables", m.Args, m.ArgTypes)
	}
	sharding := func(dims ...[]string) *HLOSharding {
		return &HLOSharding{Mesh: "mesh", Dims: append([][]string{}, dims...)}
	}
	data, fsdp, none := []string{"data"}, []string{"fsdp"}, []string{}
	args := []struct {
		param string
		typ   string
		want  *HLOSharding
	}{
		{"arg0", "tensor<4x8xf32>", sharding(data, none)},
		{f.w.ParameterName(), "tensor<8x16xf32>", sharding(fsdp, none)},
		{f.m.ParameterName(), "tensor<8x16xf32>", sharding(fsdp, none)},
		{f.table.ParameterName(), "tensor<4x8xf32>", sharding(data, fsdp)},
		// Variables without a spec are replicated, annotated as such: one empty axis list per dimension.
		{f.b.ParameterName(), "tensor<16xf32>", sharding(none)},
		{f.cnt.ParameterName(), "tensor<f32>", sharding()},
	}
	for _, a := range args {
		i := m.ArgIndex(a.param)
		if i < 0 {
			t.Errorf("no argument for parameter %q in %v", a.param, m.Args)
			continue
		}
		if m.ArgTypes[i] != a.typ || !sameSharding(m.ArgShardings[i], a.want) {
			t.Errorf("argument %s (%s): %s %+v, want %s %+v", m.Args[i], a.param, m.ArgTypes[i], m.ArgShardings[i], a.typ, a.want)
		}
	}
	if m.Args[0] != "%arg0" || m.ArgIndex("var:/layer/w") != slices.Index(m.Args, "%var__layer_w") {
		t.Errorf("argument names %v", m.Args)
	}
	if !m.ArgShardings[m.ArgIndex(f.b.ParameterName())].IsReplicated() || m.ArgShardings[1].IsReplicated() {
		t.Errorf("IsReplicated: b must be, w must not")
	}
	// Results: the updated variables in context order with their own shardings, then y (split over
	// data by OutputShardings) and the loss (replicated: OutputShardings[1] is nil).
	var want []*HLOSharding
	var wantTypes []string
	for v := range f.c.IterVariables() {
		switch v {
		case f.w, f.m:
			want, wantTypes = append(want, sharding(fsdp, none)), append(wantTypes, "tensor<8x16xf32>")
		case f.cnt:
			want, wantTypes = append(want, sharding()), append(wantTypes, "tensor<f32>")
		}
	}
	want, wantTypes = append(want, sharding(data, none), sharding()), append(wantTypes, "tensor<4x16xf32>", "tensor<f32>")
	if !slices.Equal(m.ResultTypes, wantTypes) || len(m.ResultShardings) != len(want) || len(m.Results) != len(want) {
		t.Fatalf("results %v types %v, want types %v", m.Results, m.ResultTypes, wantTypes)
	}
	for i := range want {
		if !sameSharding(m.ResultShardings[i], want[i]) {
			t.Errorf("result #%d sharding %+v, want %+v", i, m.ResultShardings[i], want[i])
		}
	}
	if m.Count("stablehlo.dot_general") != 2 || m.Count("stablehlo.all_reduce") != 0 {
		t.Errorf("%d dot_general, %d all_reduce; want 2 and none (Shardy inserts the collectives)",
			m.Count("stablehlo.dot_general"), m.Count("stablehlo.all_reduce"))
	}
	// The trace set the replicated spec on b and count for itself only.
	if f.b.ShardingSpec() != nil || f.cnt.ShardingSpec() != nil || f.w.ShardingSpec() != f.byFSDP {
		t.Errorf("variable specs changed: b %s, count %s, w %s", f.b.ShardingSpec(), f.cnt.ShardingSpec(), f.w.ShardingSpec())
	}
	again, err := StableHLOContext(context.Background(), f.spec, f.c, f.fn)
	if err != nil || again != text {
		t.Errorf("a second trace differs (%v)", err)
	}

	// StableHLO (no context): no InputShardings nor OutputShardings is all replicated.
	plain, err := StableHLO(context.Background(), HLOSpec{Name: "plain", Mesh: f.mesh, Inputs: []shapes.Shape{f32(4, 8), f32()}},
		func(in []*graph.Node) []*graph.Node { return []*graph.Node{graph.Mul(in[0], in[1])} })
	if err != nil {
		t.Fatal(err)
	}
	pm := mustParse(t, plain)
	if !sameSharding(pm.ArgShardings[0], sharding(none, none)) || !sameSharding(pm.ArgShardings[1], sharding()) ||
		!sameSharding(pm.ResultShardings[0], sharding(none, none)) {
		t.Errorf("unannotated AutoSharding trace: args %+v results %+v\n%s", pm.ArgShardings, pm.ResultShardings, plain)
	}
	// Outside AutoSharding nothing is annotated.
	single := mustParse(t, mustTrace(t, HLOSpec{Name: "single", Inputs: []shapes.Shape{f32(2)}}))
	if len(single.Meshes) != 0 || single.ArgShardings[0] != nil || single.ResultShardings[0] != nil {
		t.Errorf("single-device trace has shardings: %+v", single)
	}
}

func mustTrace(t *testing.T, spec HLOSpec) string {
	t.Helper()
	text, err := StableHLO(context.Background(), spec, func(in []*graph.Node) []*graph.Node { return []*graph.Node{graph.Neg(in[0])} })
	if err != nil {
		t.Fatal(err)
	}
	return text
}

func sameSharding(a, b *HLOSharding) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Mesh == b.Mesh && slices.EqualFunc(a.Dims, b.Dims, slices.Equal) && slices.Equal(a.Replicated, b.Replicated)
}

func TestStableHLOAutoShardingErrors(t *testing.T) {
	ctx := context.Background()
	f := newShardedFixture(t)
	other, _ := distributed.NewDeviceMesh([]int{2, 4}, []string{"data", "fsdp"}) // same name and axes, another mesh
	unknownAxis := &distributed.ShardingSpec{Mesh: f.mesh, Axes: []distributed.AxisSpec{{"model"}}}
	badName, _ := distributed.NewDeviceMesh([]int{8}, []string{"d"})
	badName.SetName("my mesh")
	zero, _ := distributed.NewDeviceMesh([]int{0, 4}, []string{"a", "b"})
	in := []shapes.Shape{f32(4, 8)}
	neg := func(in []*graph.Node) []*graph.Node { return []*graph.Node{graph.Neg(in[0])} }
	for _, tc := range []struct {
		spec HLOSpec
		want string
	}{
		{HLOSpec{Name: "x", Replicas: 8, Mesh: f.mesh, Inputs: in}, "mutually exclusive"},
		{HLOSpec{Name: "x", Replicas: 8, Inputs: in, InputShardings: []*distributed.ShardingSpec{f.byData}}, "need a Mesh"},
		{HLOSpec{Name: "x", Inputs: in, OutputShardings: []*distributed.ShardingSpec{f.byData}}, "need a Mesh"},
		{HLOSpec{Name: "x", Mesh: f.mesh, Inputs: in, InputShardings: []*distributed.ShardingSpec{unknownAxis}}, `unknown mesh axis "model"`},
		{HLOSpec{Name: "x", Mesh: f.mesh, Inputs: in, OutputShardings: []*distributed.ShardingSpec{unknownAxis}}, "OutputShardings[0]"},
		{HLOSpec{Name: "x", Mesh: f.mesh, Inputs: in, InputShardings: []*distributed.ShardingSpec{distributed.NewReplicatedShardingSpec(other)}},
			"is not xla.HLOSpec.Mesh"},
		{HLOSpec{Name: "x", Mesh: f.mesh, Inputs: in, InputShardings: []*distributed.ShardingSpec{f.byData, f.byData}}, "2 specs for 1 inputs"},
		{HLOSpec{Name: "x", Mesh: f.mesh, Inputs: []shapes.Shape{f32()}, InputShardings: []*distributed.ShardingSpec{f.byData}}, "rank-0"},
		{HLOSpec{Name: "x", Mesh: badName, Inputs: in}, "not an identifier"},
		{HLOSpec{Name: "x", Mesh: zero, Inputs: in}, "0 devices"},
		{HLOSpec{Name: "x", Mesh: f.mesh, Inputs: in, OutputShardings: []*distributed.ShardingSpec{nil, nil}}, "2 specs for the 1 outputs"},
		{HLOSpec{Name: "x", Mesh: f.mesh, Inputs: []shapes.Shape{f32()}, OutputShardings: []*distributed.ShardingSpec{f.byData}}, "rank-0"},
	} {
		_, err := StableHLO(ctx, tc.spec, neg)
		if !errors.Is(err, ErrInvalidHLOSpec) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v; want ErrInvalidHLOSpec naming %q", tc.spec, err, tc.want)
		}
	}
	// Collectives: GoMLX refuses graph.Distributed() in an AutoSharding graph.
	_, err := StableHLO(ctx, HLOSpec{Name: "x", Mesh: f.mesh, Inputs: in}, func(in []*graph.Node) []*graph.Node {
		return in[0].Graph().Distributed().AllReduce(in, backends.ReduceOpSum)
	})
	var pe *PanicError
	if !errors.As(err, &pe) || !strings.Contains(err.Error(), "AutoSharding") {
		t.Errorf("AllReduce in an AutoSharding trace: %v", err)
	}
	// A variable sharded over another mesh, or over an axis the mesh lacks.
	for _, bad := range []*distributed.ShardingSpec{distributed.NewReplicatedShardingSpec(other), unknownAxis} {
		f := newShardedFixture(t)
		f.table.SetShardingSpec(bad)
		if _, err := StableHLOContext(ctx, f.spec, f.c, f.fn); !errors.As(err, &pe) {
			t.Errorf("variable sharded by %s: %v; want a *PanicError", bad, err)
		}
		if f.b.ShardingSpec() != nil {
			t.Errorf("a failed trace left b's spec set")
		}
	}
}

// shardedText is Shardy syntax beyond what go-xla writes today: sub-axes, open dimensions,
// priorities, explicit replicated axes, device ids, an argument with two attributes, an
// unannotated argument and a result without attributes.
const shardedText = `module @m attributes {stablehlo.num_replicas = 1,  stablehlo.num_partitions = 8} {
  sdy.mesh @mesh = <["data"=2, "fsdp"=4]>
  sdy.mesh @other = <["x"=2], device_ids=[1, 0]>
  func.func @main(%arg0: tensor<4x8xf32> { sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {"fsdp":(1)2, ?}p1], replicated={"fsdp"}> }, %var__a_b: tensor<8xf32> {
      mhlo.frontend_attributes = {name = "x, y"},
      sdy.sharding = #sdy.sharding<@other, [{"x"}]>
  }, %plain: tensor<i32>) -> (tensor<4x8xf32> { sdy.sharding = #sdy.sharding<@mesh, [{"data", "fsdp"}, {}]> }, tensor<i32>) {
    %0 = "stablehlo.negate"(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    "stablehlo.return"(%0, %plain) : (tensor<4x8xf32>, tensor<i32>) -> ()
  }
}
`

func TestParseStableHLOSharding(t *testing.T) {
	m := mustParse(t, shardedText)
	if len(m.Meshes) != 2 || !slices.Equal(m.Mesh("other").DeviceIDs, []int{1, 0}) || m.Mesh("nope") != nil ||
		m.Mesh("other").NumDevices() != 2 {
		t.Fatalf("meshes %+v", m.Meshes)
	}
	want := []*HLOSharding{
		{Mesh: "mesh", Dims: [][]string{{"data"}, {"fsdp:(1)2", "?"}}, Replicated: []string{"fsdp"}},
		{Mesh: "other", Dims: [][]string{{"x"}}},
		nil,
	}
	if !slices.Equal(m.Args, []string{"%arg0", "%var__a_b", "%plain"}) || !slices.Equal(m.ArgTypes, []string{"tensor<4x8xf32>", "tensor<8xf32>", "tensor<i32>"}) {
		t.Fatalf("args %v %v", m.Args, m.ArgTypes)
	}
	for i, w := range want {
		if !sameSharding(m.ArgShardings[i], w) {
			t.Errorf("argument %d: %+v, want %+v", i, m.ArgShardings[i], w)
		}
	}
	if m.ArgIndex("var:/a/b") != 1 || m.ArgIndex("plain") != 2 || m.ArgIndex("var:/a/c") != -1 {
		t.Errorf("ArgIndex")
	}
	if !sameSharding(m.ResultShardings[0], &HLOSharding{Mesh: "mesh", Dims: [][]string{{"data", "fsdp"}, {}}}) ||
		m.ResultShardings[1] != nil || !slices.Equal(m.ResultTypes, []string{"tensor<4x8xf32>", "tensor<i32>"}) {
		t.Errorf("results %+v %v", m.ResultShardings, m.ResultTypes)
	}
	if s := m.ArgShardings[0]; s.IsReplicated() || !slices.Equal(s.Axes(1), []string{"fsdp:(1)2", "?"}) || s.Axes(2) != nil {
		t.Errorf("HLOSharding helpers on %+v", s)
	}
}

func TestParseStableHLOShardingErrors(t *testing.T) {
	sub := func(old, new string) string {
		if !strings.Contains(shardedText, old) {
			t.Fatalf("%q is not in the sample", old)
		}
		return strings.Replace(shardedText, old, new, 1)
	}
	for _, tc := range []struct{ text, want string }{
		{sub(`@other, [{"x"}]`, `@nowhere, [{"x"}]`), "does not declare"},
		{sub(`[{"data", "fsdp"}, {}]`, `[{"model"}, {}]`), `"model", not an axis of mesh @mesh`},
		{sub(`replicated={"fsdp"}`, `replicated={"z"}`), `replicated axis "z"`},
		{sub(`<["x"=2], device_ids=[1, 0]>`, `<["x"=2], device_ids=[1]>`), "1 device ids for 2 devices"},
		{sub(`"x"=2]`, `"x"=0]`), "is not \"name\"=size"},
		{sub(`["data"=2, "fsdp"=4]`, `["data"=2, "data"=4]`), "appears twice"},
		{sub(`sdy.mesh @other`, `sdy.mesh @mesh`), "declared twice"},
		{sub(`#sdy.sharding<@other, [{"x"}]>`, `#sdy.sharding<mesh<["x"=2]>, [{"x"}]>`), "inline meshes"},
		{sub(`{"fsdp":(1)2, ?}p1`, `{"fsdp":(1)2, ?}q1`), "not a priority"},
		{sub(`{"fsdp":(1)2, ?}`, `{"fsdp":1}`), "not a sub-axis"},
		{sub(`{"fsdp":(1)2, ?}`, `{fsdp}`), "not a quoted name"},
		{sub(`, tensor<i32>) {`, `) {`), "returns 2 values but its signature has 1 results"},
		{sub(`%plain: tensor<i32>`, `plain: tensor<i32>`), "is not `%name: type`"},
		{sub(`sdy.sharding = #sdy.sharding<@other, [{"x"}]>`, `sdy.sharding`), "not `name = value`"},
		{sub(`#sdy.sharding<@other, [{"x"}]>`, `#sdy.sharding<@other>`), "no mesh or no dimension list"},
	} {
		if _, err := ParseStableHLO(tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v; want an error containing %q", err, tc.want)
		}
	}
}

// FuzzParseStableHLO: the parser returns errors, never panics, and what it accepts is
// consistent (one type and one sharding slot per argument and per result, every sharding over a
// declared mesh).
func FuzzParseStableHLO(f *testing.F) {
	f.Add(shardedText)
	for _, spec := range []HLOSpec{{Name: "single", Inputs: []shapes.Shape{f32(2)}}, {Name: "spmd", Replicas: 4, Inputs: []shapes.Shape{f32(2)}}} {
		text, err := StableHLO(context.Background(), spec, func(in []*graph.Node) []*graph.Node {
			out := graph.ReduceAllSum(graph.Square(in[0]))
			if spec.Replicas > 1 {
				out = in[0].Graph().Distributed().AllReduceOne(out, backends.ReduceOpSum)
			}
			return []*graph.Node{out, graph.Neg(in[0])}
		})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(text)
	}
	mesh, err := distributed.NewDeviceMesh([]int{2, 4}, []string{"data", "fsdp"})
	if err != nil {
		f.Fatal(err)
	}
	byData, _ := distributed.NewShardingSpec(mesh, distributed.AxisSpec{"data"}, distributed.AxisSpec{"fsdp"})
	text, err := StableHLO(context.Background(), HLOSpec{Name: "sharded", Mesh: mesh, Inputs: []shapes.Shape{f32(4, 8), f32()},
		InputShardings: []*distributed.ShardingSpec{byData, nil}, OutputShardings: []*distributed.ShardingSpec{byData, nil}},
		func(in []*graph.Node) []*graph.Node {
			return []*graph.Node{graph.Mul(in[0], in[1]), graph.ReduceAllMax(in[0])}
		})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(text)
	f.Fuzz(func(t *testing.T, text string) {
		m, err := ParseStableHLO(text)
		if err != nil {
			return
		}
		if len(m.ArgTypes) != len(m.Args) || len(m.ArgShardings) != len(m.Args) ||
			len(m.ResultTypes) != len(m.Results) || len(m.ResultShardings) != len(m.Results) || len(m.Ops) == 0 {
			t.Fatalf("inconsistent module: %d args %d types %d shardings, %d results %d types %d shardings",
				len(m.Args), len(m.ArgTypes), len(m.ArgShardings), len(m.Results), len(m.ResultTypes), len(m.ResultShardings))
		}
		for _, s := range append(slices.Clone(m.ArgShardings), m.ResultShardings...) {
			if s != nil && m.Mesh(s.Mesh) == nil {
				t.Fatalf("sharding over undeclared mesh %q", s.Mesh)
			}
		}
		for _, op := range m.Ops {
			_, _ = op.ReplicaGroups()
		}
		m.Ancestors(m.Results[len(m.Results)-1])
	})
}
