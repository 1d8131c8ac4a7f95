package gobackend

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// awkwardShapes are the shapes the native-op tests run on: single elements, sizes that are not
// multiples of the vector width or of a fusion block, and one large enough to be split across
// goroutines (5·130·129 = 83850 elements).
var awkwardShapes = [][]int{{1}, {7}, {129}, {3, 129}, {2, 7, 33}, {1, 1, 5}, {5, 130, 129}}

// elementwise uses every fused operation, broadcasts of a row and of a column, a scalar
// constant, a bool converted to float32, a subexpression read twice, and an intermediate that is also an output (so it is
// a fusion root read by another fusion).
func elementwise(xs []*graph.Node) []*graph.Node {
	x, y, z, row, col := xs[0], xs[1], xs[2], xs[3], xs[4]
	g := x.Graph()
	dims := x.Shape().Dimensions
	rowB := graph.BroadcastPrefix(row, dims[:len(dims)-1]...)
	colB := graph.BroadcastToDims(col, dims...)
	one := graph.Const(g, float32(1))
	s := graph.Add(graph.Mul(x, y), rowB) // read twice below
	a := graph.Div(graph.Tanh(s), graph.Add(graph.Abs(z), one))
	b := graph.Sub(graph.Exp(graph.Neg(x)), graph.Logistic(s))
	c := graph.Mul(graph.Log(graph.Add(graph.Abs(y), one)), graph.Sqrt(graph.Abs(z)))
	d := graph.Max(graph.Min(a, colB), graph.Rsqrt(graph.Add(graph.Abs(x), graph.Const(g, float32(0.5)))))
	out := graph.Add(graph.Add(a, b), graph.Mul(c, d))
	mask := graph.ConvertDType(graph.GreaterThan(x, y), dtypes.Float32) // bools read by the fusion
	return []*graph.Node{out, a, graph.Add(graph.Mul(out, colB), graph.Mul(mask, z))}
}

func TestFusedElementwiseMatchesSimpleGo(t *testing.T) {
	sg := newSimpleGo(t)
	for _, threads := range []int{1, 2} {
		gb := newGotpu(t, Config{Threads: threads})
		rng := rand.New(rand.NewPCG(5, 6))
		for _, dims := range awkwardShapes {
			last := dims[len(dims)-1]
			colDims := slices.Clone(dims)
			colDims[len(colDims)-1] = 1
			in := []*tensors.Tensor{
				randomTensor(rng, dtypes.Float32, dims...),
				randomTensor(rng, dtypes.Float32, dims...),
				randomTensor(rng, dtypes.Float32, dims...),
				randomTensor(rng, dtypes.Float32, last),
				randomTensor(rng, dtypes.Float32, colDims...),
			}
			want := run(t, sg, elementwise, in...)
			got := run(t, gb, elementwise, in...)
			for i := range want {
				// Transcendentals are within 2 ulps of simplego's (float64 rounded once).
				assertClose(t, fmt.Sprintf("threads %d %v output %d", threads, dims, i), got[i], want[i], 1e-6)
			}
		}
	}
}

// TestFusionSplit builds a computation on the backend's builder directly to check what runs
// natively: simplego's implicit broadcasting (a [1,n] and a scalar operand), a broadcast read by
// two fusions (inlined into both, never materialized), a root that is a broadcast, and an output
// read only by another fusion (o1: written by o2's fusion as an extra output, fuse_outputs.go).
func TestFusionSplit(t *testing.T) {
	sg := newSimpleGo(t)
	gb := newGotpu(t, Config{})
	build := func(b backends.Backend) backends.Executable {
		bld := b.Builder("split")
		must := mustOp(t)
		x := must(bld.Parameter("x", shapes.Make(dtypes.Float32, 3, 129), nil))
		r := must(bld.Parameter("r", shapes.Make(dtypes.Float32, 1, 129), nil))
		s := must(bld.Parameter("s", shapes.Make(dtypes.Float32), nil))
		c := must(bld.Parameter("c", shapes.Make(dtypes.Float32, 3), nil))
		cb := must(bld.BroadcastInDim(c, shapes.Make(dtypes.Float32, 3, 129), []int{0}))
		o1 := must(bld.Mul(must(bld.Add(x, r)), s))                                      // implicit broadcasts
		o2 := must(bld.Sub(o1, cb))                                                      // cb inlined here ...
		o3 := must(bld.Exp(must(bld.Mul(x, cb))))                                        // ... and here
		o4 := must(bld.BroadcastInDim(c, shapes.Make(dtypes.Float32, 129, 3), []int{1})) // a broadcast root
		exec, err := bld.Compile([]backends.Op{o2, o3, o4, o1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(exec.Finalize)
		return exec
	}
	wantExec, gotExec := build(sg), build(gb)
	st := gotExec.(*Executable).Stats()
	if st.Segments != 0 || st.Fusions != 3 || st.FusedOps != 6 || st.FusionExtraOutputs != 1 {
		t.Fatalf("split %+v, want 3 fusions of 6 operations (the shared broadcast inlined, o1 an extra output of o2's) and no segment", st)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	var in []*tensors.Tensor
	for _, dims := range [][]int{{3, 129}, {1, 129}, {}, {3}} {
		in = append(in, randomTensor(rng, dtypes.Float32, dims...))
	}
	bufsOf := func(b backends.Backend) []backends.Buffer {
		var out []backends.Buffer
		for _, x := range in {
			buf, err := b.BufferFromFlatData(0, tensors.MustCopyFlatData[float32](x), x.Shape())
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, buf)
		}
		return out
	}
	want, err := wantExec.Execute(bufsOf(sg), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := gotExec.Execute(bufsOf(gb), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		w, g := flat(t, sg, want[i]), flat(t, gb, got[i])
		for j := range w {
			if d := w[j] - g[j]; d > 1e-6*(1+abs32(w[j])) || d < -1e-6*(1+abs32(w[j])) {
				t.Fatalf("output %d[%d] = %g, want %g", i, j, g[j], w[j])
			}
		}
	}
}

func abs32(x float32) float32 { return max(x, -x) }

func TestNativeReductionsMatchSimpleGo(t *testing.T) {
	sg := newSimpleGo(t)
	gb := newGotpu(t, Config{})
	rng := rand.New(rand.NewPCG(9, 10))
	cases := []struct {
		dims []int
		axes [][]int
	}{
		{[]int{1}, [][]int{{0}}},
		{[]int{129}, [][]int{{0}}},
		{[]int{7, 129, 3}, [][]int{{2}, {1}, {0}, {0, 1}, {1, 2}, {0, 2}, {0, 1, 2}}},
		{[]int{2, 1, 7, 5}, [][]int{{3}, {1, 2}, {0, 2}, {1}}},
		{[]int{3, 8, 33}, [][]int{{2}, {1, 2}}},         // rows summed eight at a time
		{[]int{5, 130, 129}, [][]int{{2}, {0, 1}, {1}}}, // split across goroutines
	}
	for _, c := range cases {
		x := randomTensor(rng, dtypes.Float32, c.dims...)
		for _, axes := range c.axes {
			fn := func(xs []*graph.Node) []*graph.Node {
				return []*graph.Node{graph.ReduceSum(xs[0], axes...), graph.ReduceMax(xs[0], axes...)}
			}
			want := run(t, sg, fn, x)
			got := run(t, gb, fn, x)
			for i := range want {
				// The same summation order as simplego: equal, not just close.
				assertClose(t, fmt.Sprintf("%v axes %v output %d", c.dims, axes, i), got[i], want[i], 0)
			}
		}
	}
}

func TestPlanReduce(t *testing.T) {
	for _, c := range []struct {
		dims, axes        []int
		outer, red, inner int
		native            bool
	}{
		{[]int{4, 5, 6}, []int{2}, 20, 6, 1, true},
		{[]int{4, 5, 6}, []int{0}, 1, 4, 30, true},
		{[]int{4, 5, 6}, []int{0, 1}, 1, 20, 6, true},
		{[]int{4, 1, 6}, []int{0, 2}, 1, 24, 1, true}, // adjacent once the 1 is dropped
		{[]int{4, 5, 6}, []int{0, 2}, 0, 0, 0, false}, // not adjacent: simplego
		{[]int{4, 5, 6}, []int{}, 1, 120, 1, true},    // no axes: all of them
	} {
		in := shapes.Make(dtypes.Float32, c.dims...)
		outDims := []int{}
		for a, d := range c.dims {
			if len(c.axes) > 0 && !slices.Contains(c.axes, a) {
				outDims = append(outDims, d)
			}
		}
		n := &node{op: backends.OpTypeReduceSum, attrs: []any{c.axes},
			inputs: []*value{{shape: in}}, outputs: []*value{{shape: shapes.Make(dtypes.Float32, outDims...)}}}
		p := planReduce(n)
		if (p != nil) != c.native {
			t.Fatalf("%v axes %v: native %v, want %v", c.dims, c.axes, p != nil, c.native)
		}
		if p != nil && (p.outer != c.outer || p.red != c.red || p.inner != c.inner) {
			t.Fatalf("%v axes %v: plan [%d,%d,%d], want [%d,%d,%d]", c.dims, c.axes, p.outer, p.red, p.inner, c.outer, c.red, c.inner)
		}
	}
}

func TestNativeTransposeMatchesSimpleGo(t *testing.T) {
	sg := newSimpleGo(t)
	gb := newGotpu(t, Config{})
	rng := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct{ dims, perm []int }{
		{[]int{1, 7}, []int{1, 0}},
		{[]int{129, 3}, []int{1, 0}},
		{[]int{2, 7, 33}, []int{2, 0, 1}},
		{[]int{3, 1, 5, 129}, []int{0, 2, 1, 3}},
	} {
		x := randomTensor(rng, dtypes.Float32, c.dims...)
		fn := func(xs []*graph.Node) []*graph.Node {
			return []*graph.Node{graph.TransposeAllAxes(xs[0], c.perm...)}
		}
		assertClose(t, fmt.Sprintf("%v perm %v", c.dims, c.perm), run(t, gb, fn, x)[0], run(t, sg, fn, x)[0], 0)
	}
}

func TestCoalesce(t *testing.T) {
	for _, c := range []struct{ dims, strides, wantD, wantS []int }{
		{[]int{8, 128, 8192}, []int{128, 1, 0}, []int{1024, 8192}, []int{1, 0}},
		{[]int{8, 128, 256}, []int{0, 0, 1}, []int{1024, 256}, []int{0, 1}},
		{[]int{2, 1, 3}, []int{3, 0, 1}, []int{6}, []int{1}},
		{[]int{1, 1}, []int{0, 0}, []int{1}, []int{0}},
		{[]int{4, 5}, []int{1, 4}, []int{4, 5}, []int{1, 4}}, // a transposed read stays 2-D
	} {
		d, s := coalesce(c.dims, c.strides)
		if !slices.Equal(d, c.wantD) || !slices.Equal(s, c.wantS) {
			t.Errorf("coalesce(%v, %v) = %v, %v; want %v, %v", c.dims, c.strides, d, s, c.wantD, c.wantS)
		}
	}
}

// panicky is a task whose part 2 panics; it records the parts that ran.
type panicky struct{ done []bool }

func (p *panicky) part(i int) {
	p.done[i] = true
	if i == 2 {
		panic("boom")
	}
}

// TestTeamPanics checks that a kernel panic on a helper goroutine comes back as an error (and only
// after every part has finished), that the team is usable after it, and that stop is idempotent.
func TestTeamPanics(t *testing.T) {
	tm := newTeam(3)
	defer tm.stop()
	for range 3 {
		task := &panicky{done: make([]bool, 3)}
		err := tm.run(3, task)
		if err == nil || !strings.Contains(err.Error(), "boom") {
			t.Fatalf("err = %v, want the panic", err)
		}
		if !task.done[0] || !task.done[1] || !task.done[2] {
			t.Fatalf("ran %v, want every part", task.done)
		}
	}
	if err := tm.run(2, &panicky{done: make([]bool, 3)}); err != nil {
		t.Fatal(err)
	}
	tm.stop()
	tm.stop()
}
