package gobackend

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/xla/internal/gemm"
)

func newSimpleGo(t testing.TB) backends.Backend {
	t.Helper()
	b, err := simplego.New(fallbackConfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	return b
}

func newGotpu(t testing.TB, cfg Config) *Backend {
	t.Helper()
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Finalize)
	return b
}

// randomTensor returns a tensor of dims with values uniform in [-1, 1).
func randomTensor(rng *rand.Rand, dt dtypes.DType, dims ...int) *tensors.Tensor {
	n := 1
	for _, d := range dims {
		n *= d
	}
	switch dt {
	case dtypes.Float32:
		x := make([]float32, n)
		for i := range x {
			x[i] = rng.Float32()*2 - 1
		}
		return tensors.FromFlatDataAndDimensions(x, dims...)
	case dtypes.BFloat16:
		x := make([]bfloat16.BFloat16, n)
		for i := range x {
			x[i] = bfloat16.FromFloat32(rng.Float32()*2 - 1)
		}
		return tensors.FromFlatDataAndDimensions(x, dims...)
	}
	panic(fmt.Sprintf("randomTensor: dtype %s", dt))
}

// asFloat64 returns a tensor's values as float64 (float32 or bfloat16 tensors).
func asFloat64(t testing.TB, x *tensors.Tensor) []float64 {
	t.Helper()
	var out []float64
	switch x.DType() {
	case dtypes.Float32:
		for _, v := range tensors.MustCopyFlatData[float32](x) {
			out = append(out, float64(v))
		}
	case dtypes.BFloat16:
		for _, v := range tensors.MustCopyFlatData[bfloat16.BFloat16](x) {
			out = append(out, float64(v.Float32()))
		}
	default:
		t.Fatalf("asFloat64: dtype %s", x.DType())
	}
	return out
}

// run executes fn on backend with the inputs and returns the outputs.
func run(t testing.TB, backend backends.Backend, fn func(xs []*graph.Node) []*graph.Node, inputs ...*tensors.Tensor) []*tensors.Tensor {
	t.Helper()
	exec, err := graph.NewExec(backend, fn)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	args := make([]any, len(inputs))
	for i, x := range inputs {
		c, err := x.LocalClone() // a tensor may only live on one backend
		if err != nil {
			t.Fatal(err)
		}
		args[i] = c
	}
	outs, err := exec.Exec(args...)
	if err != nil {
		t.Fatalf("%s: %v", backend.Name(), err)
	}
	return outs
}

// assertClose compares got and want elementwise with |got-want| <= tol*(1+|want|).
func assertClose(t testing.TB, what string, got, want *tensors.Tensor, tol float64) {
	t.Helper()
	if !got.Shape().Equal(want.Shape()) {
		t.Fatalf("%s: shape %s, want %s", what, got.Shape(), want.Shape())
	}
	g, w := asFloat64(t, got), asFloat64(t, want)
	worst, at := 0.0, -1
	for i := range g {
		if math.IsNaN(g[i]) != math.IsNaN(w[i]) {
			t.Fatalf("%s: element %d is %g, want %g", what, i, g[i], w[i])
		}
		if e := math.Abs(g[i]-w[i]) / (1 + math.Abs(w[i])); e > worst {
			worst, at = e, i
		}
	}
	if worst > tol {
		t.Fatalf("%s: element %d is %g, want %g (relative error %.3g > %.3g)", what, at, g[at], w[at], worst, tol)
	}
}

// dotCase is one DotGeneral layout.
type dotCase struct {
	name                     string
	lhs, rhs                 []int
	lhsContract, lhsBatch    []int
	rhsContract, rhsBatch    []int
	wantLHSCopy, wantRHSCopy bool // the plan must (not) pack the operand first
}

var dotCases = []dotCase{
	{"matmul", []int{7, 129}, []int{129, 33}, []int{1}, nil, []int{0}, nil, false, false},
	{"lhs-transposed", []int{129, 7}, []int{129, 33}, []int{0}, nil, []int{0}, nil, false, false},
	{"rhs-transposed", []int{7, 129}, []int{33, 129}, []int{1}, nil, []int{1}, nil, false, false},
	{"both-transposed", []int{65, 1}, []int{17, 65}, []int{0}, nil, []int{1}, nil, false, false},
	{"ones", []int{1, 1}, []int{1, 1}, []int{1}, nil, []int{0}, nil, false, false},
	{"k1", []int{7, 1}, []int{1, 129}, []int{1}, nil, []int{0}, nil, false, false},
	{"vector-vector", []int{129}, []int{129}, []int{0}, nil, []int{0}, nil, false, false},
	{"matrix-vector", []int{33, 129}, []int{129}, []int{1}, nil, []int{0}, nil, false, false},
	{"batched", []int{3, 7, 65}, []int{3, 65, 17}, []int{2}, []int{0}, []int{1}, []int{0}, false, false},
	{"batched-both-transposed", []int{3, 65, 7}, []int{3, 17, 65}, []int{1}, []int{0}, []int{2}, []int{0}, false, false},
	// Batch axes that are not leading are read in place: the batch items interleave.
	{"batch-not-leading", []int{7, 3, 65}, []int{65, 3, 17}, []int{2}, []int{1}, []int{0}, []int{1}, false, false},
	{"two-contracting", []int{4, 5, 6}, []int{4, 5, 9}, []int{0, 1}, nil, []int{0, 1}, nil, false, false},
	// Only one operand can be read in place; the plan packs the smaller one.
	{"two-contracting-swapped", []int{5, 4, 6}, []int{4, 5, 9}, []int{1, 0}, nil, []int{0, 1}, nil, true, false},
	{"two-contracting-both-reversed", []int{5, 4, 6}, []int{5, 4, 9}, []int{1, 0}, nil, []int{1, 0}, nil, false, false},
	{"attention-scores", []int{2, 4, 7, 16}, []int{2, 4, 7, 16}, []int{3}, []int{0, 1}, []int{3}, []int{0, 1}, false, false},
	// GPT-2's attention products on [batch, seq, heads, (1,) dim] activations and [batch, heads,
	// seq, 1, seq] scores: every operand is read in place, two batch levels (batch, heads) apart.
	{"attention-bshd", []int{2, 7, 4, 16}, []int{2, 7, 4, 16}, []int{3}, []int{0, 2}, []int{3}, []int{0, 2}, false, false},
	{"attention-scores-bs1hd", []int{2, 7, 4, 1, 16}, []int{2, 7, 4, 16}, []int{4}, []int{0, 2}, []int{3}, []int{0, 2}, false, false},
	{"attention-values", []int{2, 4, 7, 1, 7}, []int{2, 7, 4, 16}, []int{4}, []int{0, 1}, []int{1}, []int{0, 2}, false, false},
	{"attention-values-grad", []int{2, 7, 4, 1, 16}, []int{2, 4, 7, 1, 7}, []int{1}, []int{0, 2}, []int{2}, []int{0, 1}, false, false},
	{"attention-three-levels", []int{3, 5, 2, 4, 9}, []int{3, 9, 2, 4, 6}, []int{4}, []int{0, 2, 3}, []int{1}, []int{0, 2, 3}, false, false},
	// The contracting axis is neither the rows' nor the columns' contiguous one: packed.
	{"contract-strided-both", []int{3, 5, 2}, []int{5, 3, 2}, []int{1}, []int{2}, []int{0}, []int{2}, true, true},
	// One packed operand beside one read in place with interleaved batch items.
	{"contract-strided-lhs", []int{3, 5, 2}, []int{5, 2, 4}, []int{1}, []int{2}, []int{0}, []int{1}, true, false},
	{"weight-gradient", []int{2, 7, 16}, []int{2, 7, 33}, []int{0, 1}, nil, []int{0, 1}, nil, false, false},
	{"input-gradient", []int{2, 7, 33}, []int{16, 33}, []int{2}, nil, []int{1}, nil, false, false},
	{"free-axes-split", []int{3, 5, 2, 7}, []int{7, 4}, []int{3}, nil, []int{0}, nil, false, false},
	{"contract-middle", []int{3, 5, 2}, []int{5, 4}, []int{1}, nil, []int{0}, nil, true, false},
	{"large", []int{64, 300}, []int{300, 257}, []int{1}, nil, []int{0}, nil, false, false},
	// Short vectors (dot_vec.go): core.Select's contraction and its gradient's outer product.
	{"select-middle", []int{2, 5, 3, 37}, []int{3}, []int{2}, nil, []int{0}, nil, false, false},
	{"select-last", []int{7, 8}, []int{8}, []int{1}, nil, []int{0}, nil, false, false},
	{"select-first", []int{2, 65}, []int{2}, []int{0}, nil, []int{0}, nil, false, false},
	{"outer-short", []int{2, 5, 37}, []int{3}, nil, nil, nil, nil, false, false},
	// Large enough to be split by rows across the worker's team.
	{"select-split", []int{4, 40, 3, 300}, []int{3}, []int{2}, nil, []int{0}, nil, false, false},
	{"outer-split", []int{4, 40, 300}, []int{3}, nil, nil, nil, nil, false, false},
	{"large-batched", []int{4, 130, 96}, []int{4, 96, 131}, []int{2}, []int{0}, []int{1}, []int{0}, false, false},
}

// TestNativeDotGeneralMatchesSimpleGo runs every layout, in float32 and bfloat16, on every GEMM
// kernel this CPU has, and compares with simplego's DotGeneral.
func TestNativeDotGeneralMatchesSimpleGo(t *testing.T) {
	sg := newSimpleGo(t)
	for _, kernel := range gemm.Available() {
		gb := newGotpu(t, Config{Kernel: kernel})
		for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
			for _, c := range dotCases {
				t.Run(fmt.Sprintf("%s/%s/%s", kernel, dt, c.name), func(t *testing.T) {
					rng := rand.New(rand.NewPCG(uint64(len(c.name)), uint64(dt)))
					lhs, rhs := randomTensor(rng, dt, c.lhs...), randomTensor(rng, dt, c.rhs...)
					fn := func(xs []*graph.Node) []*graph.Node {
						return []*graph.Node{graph.DotGeneral(xs[0], c.lhsContract, c.lhsBatch, xs[1], c.rhsContract, c.rhsBatch)}
					}
					want := run(t, sg, fn, lhs, rhs)[0]
					got := run(t, gb, fn, lhs, rhs)[0]
					tol := 1e-5
					if dt == dtypes.BFloat16 {
						tol = 1.0 / 128 // one bfloat16 ulp: both round an f32 sum once, summed in different orders
					}
					assertClose(t, "DotGeneral", got, want, tol)
				})
			}
		}
	}
}

// TestDotPlanLayouts pins which layouts are read in place and which are packed first, so that a
// change that silently adds copies to the common layouts fails.
func TestDotPlanLayouts(t *testing.T) {
	for _, c := range dotCases {
		t.Run(c.name, func(t *testing.T) {
			sg := newSimpleGo(t)
			bld := sg.Builder("plan")
			l, _ := bld.Parameter("l", shapesOf(dtypes.Float32, c.lhs), nil)
			r, _ := bld.Parameter("r", shapesOf(dtypes.Float32, c.rhs), nil)
			o, err := bld.DotGeneral(l, c.lhsContract, orEmpty(c.lhsBatch), r, c.rhsContract, orEmpty(c.rhsBatch))
			if err != nil {
				t.Fatal(err)
			}
			outShape, _ := bld.OpShape(o)
			p, err := planDot(shapesOf(dtypes.Float32, c.lhs), shapesOf(dtypes.Float32, c.rhs), outShape,
				dotAxes{c.lhsContract, orEmpty(c.lhsBatch), c.rhsContract, orEmpty(c.rhsBatch)})
			if err != nil {
				t.Fatal(err)
			}
			if (p.lhs.perm != nil) != c.wantLHSCopy || (p.rhs.perm != nil) != c.wantRHSCopy {
				t.Errorf("lhs packed %v (want %v), rhs packed %v (want %v)", p.lhs.perm != nil, c.wantLHSCopy, p.rhs.perm != nil, c.wantRHSCopy)
			}
			if wantVec := strings.HasPrefix(c.name, "select-") || strings.HasPrefix(c.name, "outer-"); (p.vec != nil) != wantVec {
				t.Errorf("short-vector plan %v, want %v", p.vec != nil, wantVec)
			}
		})
	}
}

func TestTranspose(t *testing.T) {
	dims := []int{2, 3, 4}
	src := make([]int, 24)
	for i := range src {
		src[i] = i
	}
	dst := make([]int, 24)
	transpose(dst, src, dims, []int{2, 0, 1})
	// dst[k][i][j] = src[i][j][k]
	for k := range 4 {
		for i := range 2 {
			for j := range 3 {
				if got, want := dst[k*6+i*3+j], src[i*12+j*4+k]; got != want {
					t.Fatalf("dst[%d][%d][%d] = %d, want %d", k, i, j, got, want)
				}
			}
		}
	}
}

// TestDotInPlaceMatchesPacked: reading an operand in place (strided rows, interleaved batch items,
// a transposed matrix) gives bitwise the product of packing it first, so choosing a layout never
// changes a result; float32 and bfloat16, every layout of dotCases.
func TestDotInPlaceMatchesPacked(t *testing.T) {
	pool, err := gemm.NewPool(gemm.Config{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, c := range dotCases {
		for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.BFloat16} {
			ax := dotAxes{c.lhsContract, orEmpty(c.lhsBatch), c.rhsContract, orEmpty(c.rhsBatch)}
			ls, rs := shapesOf(dt, c.lhs), shapesOf(dt, c.rhs)
			sg := newSimpleGo(t)
			bld := sg.Builder("plan")
			l, _ := bld.Parameter("l", ls, nil)
			r, _ := bld.Parameter("r", rs, nil)
			o, err := bld.DotGeneral(l, ax.lhsContracting, ax.lhsBatch, r, ax.rhsContracting, ax.rhsBatch)
			if err != nil {
				t.Fatal(err)
			}
			outShape, _ := bld.OpShape(o)
			p, err := planDot(ls, rs, outShape, ax)
			if err != nil {
				t.Fatal(err)
			}
			if p.vec != nil {
				continue
			}
			// The same product with both operands packed, for each order of the contracting
			// pairs (the plan's flattening of K is one of them).
			var variants []dotPlan
			var bdims []int
			for _, a := range ax.lhsBatch {
				bdims = append(bdims, ls.Dimensions[a])
			}
			lhsFree := freeAxes(ls.Rank(), ax.lhsContracting, ax.lhsBatch)
			rhsFree := freeAxes(rs.Rank(), ax.rhsContracting, ax.rhsBatch)
			for _, order := range contractingOrders(ax) {
				packed := *p
				packed.lhs = packedLayout(concat(ax.lhsBatch, lhsFree, pick(ax.lhsContracting, order)), bdims, p.m, p.k)
				packed.rhs = packedLayout(concat(ax.rhsBatch, pick(ax.rhsContracting, order), rhsFree), bdims, p.k, p.n)
				packed.levels = batchLevels(bdims, packed.lhs.bstr, packed.rhs.bstr, itemStrides(bdims, p.m*p.n))
				variants = append(variants, packed)
			}

			rng := rand.New(rand.NewPCG(uint64(len(c.name)), 7))
			lhs, rhs := randomTensor(rng, dt, c.lhs...), randomTensor(rng, dt, c.rhs...)
			alloc := func() any {
				if dt == dtypes.Float32 {
					return make([]float32, outShape.Size())
				}
				return make([]bfloat16.BFloat16, outShape.Size())
			}
			same := false
			lhs.ConstFlatData(func(lf any) {
				rhs.ConstFlatData(func(rf any) {
					got := alloc()
					if err := p.run(ctx, pool, &dotScratch{}, lf, rf, got); err != nil {
						t.Fatal(err)
					}
					for _, v := range variants {
						want := alloc()
						if err := v.run(ctx, pool, &dotScratch{}, lf, rf, want); err != nil {
							t.Fatal(err)
						}
						same = same || reflect.DeepEqual(got, want)
					}
				})
			})
			if !same {
				t.Errorf("%s %s: in-place product differs from the packed one", c.name, dt)
			}
		}
	}
}

// TestTransposeTiles: permutations that move the source's contiguous axis away from the last
// place (attention's [2, 12, 64, 512] to [2, 512, 12, 64]), with sides that are and are not
// multiples of the tile, copy every element where an index-by-index reference puts it — through
// transpose, which picks the tiled copy for them, and through transposeTiles itself.
func TestTransposeTiles(t *testing.T) {
	for _, c := range []struct{ dims, perm []int }{
		{[]int{2, 12, 64, 512}, []int{0, 3, 1, 2}},
		{[]int{37, 50}, []int{1, 0}},
		{[]int{3, 17, 33}, []int{2, 0, 1}},
		{[]int{5, 16, 2, 48}, []int{3, 0, 2, 1}},
		{[]int{19, 3, 21}, []int{2, 1, 0}},
	} {
		n := 1
		for _, d := range c.dims {
			n *= d
		}
		src := make([]int32, n)
		for i := range src {
			src[i] = int32(i)
		}
		want := make([]int32, n)
		for d, s := range referenceTranspose(c.dims, c.perm) {
			want[d] = src[s]
		}
		rank := len(c.dims)
		outDims, stride := permutedStrides(c.dims, c.perm)
		got := make([]int32, n)
		transpose(got, src, c.dims, c.perm)
		if !slices.Equal(got, want) {
			t.Fatalf("%v perm %v: transpose differs from the reference", c.dims, c.perm)
		}
		q := slices.Index(stride[:rank-1], 1)
		if q < 0 {
			t.Fatalf("%v perm %v: the source's contiguous axis is last, not a tiled case", c.dims, c.perm)
		}
		clear(got)
		transposeTiles(got, src, outDims, stride, q)
		if !slices.Equal(got, want) {
			t.Fatalf("%v perm %v: transposeTiles differs from the reference", c.dims, c.perm)
		}
	}
}

// TestTransposeSplit: a transpose split across a worker's team (transposePlan.run) copies every
// element where an index-by-index reference puts it, float32 and bfloat16, for 2 and 3 parts:
// attention's heads moved back ([2, 12, 512, 64] to [2, 512, 12, 64]), a tiled case, an
// outermost axis that does not divide evenly among the parts, one of size 1 (not split), and a
// plain copy.
func TestTransposeSplit(t *testing.T) {
	for _, threads := range []int{2, 3} {
		w, err := newWorker(Config{}, threads)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ dims, perm []int }{
			{[]int{2, 12, 512, 64}, []int{0, 2, 1, 3}},
			{[]int{2, 12, 64, 512}, []int{0, 3, 1, 2}},
			{[]int{300, 7, 40}, []int{2, 1, 0}},
			{[]int{5, 130, 61}, []int{0, 2, 1}},
			{[]int{1, 200, 300}, []int{0, 2, 1}},
			{[]int{70000}, []int{0}},
		} {
			n := 1
			for _, d := range c.dims {
				n *= d
			}
			want := referenceTranspose(c.dims, c.perm)
			src := make([]float32, n)
			src16 := make([]uint16, n)
			for i := range src {
				src[i], src16[i] = float32(i), uint16(i)
			}
			got := make([]float32, n)
			got16 := make([]uint16, n)
			p := &transposePlan{dims: c.dims, perm: c.perm}
			if err := p.run(w, transposeData{d32: got, s32: src}); err != nil {
				t.Fatal(err)
			}
			p16 := &transposePlan{dims: c.dims, perm: c.perm, bf16: true}
			if err := p16.run(w, transposeData{d16: got16, s16: src16}); err != nil {
				t.Fatal(err)
			}
			for d, s := range want {
				if got[d] != float32(s) || got16[d] != uint16(s) {
					t.Fatalf("%d threads, %v perm %v: destination %d holds %v (bfloat16 %v), want source element %d",
						threads, c.dims, c.perm, d, got[d], got16[d], s)
				}
			}
		}
		w.team.stop()
	}
}

// referenceTranspose returns, for each destination element of a transpose, the index of the
// source element it holds, computed from its index through the permutation.
func referenceTranspose(dims, perm []int) []int {
	rank := len(dims)
	outDims, stride := permutedStrides(dims, perm)
	n := 1
	for _, d := range dims {
		n *= d
	}
	want := make([]int, n)
	for d := range want {
		off, rem := 0, d
		for a := rank - 1; a >= 0; a-- {
			off += rem % outDims[a] * stride[a]
			rem /= outDims[a]
		}
		want[d] = off
	}
	return want
}

// permutedStrides returns the dimensions of a transpose's destination and, for each of its
// axes, the source's stride along it.
func permutedStrides(dims, perm []int) (outDims, stride []int) {
	srcStride := rowMajorStrides(dims)
	outDims, stride = make([]int, len(perm)), make([]int, len(perm))
	for i, a := range perm {
		outDims[i], stride[i] = dims[a], srcStride[a]
	}
	return outDims, stride
}
