package gobackend

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestFusedReductionsMatchSimpleGo reduces fusions that nothing else reads — so the reduction
// computes them itself (reduce_fused.go) — in every path of rowsFused: eight rows at a time and
// the rows left over, rows longer than the scratch block, a whole-tensor sum, columns wide enough
// to fuse, maxima, and shares split across goroutines. The results must be the bits of the same
// reduction reading the fusion's stored output (and close to simplego's), and the split must say
// which reductions computed their fusion.
func TestFusedReductionsMatchSimpleGo(t *testing.T) {
	sg := newSimpleGo(t)
	gb := newGotpu(t, Config{})
	rng := rand.New(rand.NewPCG(21, 22))
	for _, c := range []struct {
		dims  []int
		axes  []int
		max   bool
		fused bool
	}{
		{[]int{21, 512}, []int{1}, false, true},         // 16 rows by eight, 5 alone
		{[]int{3, 1000}, []int{1}, false, true},         // fewer than eight rows
		{[]int{4, 40000}, []int{1}, false, true},        // rows longer than the scratch block
		{[]int{19, 5000}, []int{1}, false, true},        // long rows by eight, block by block, and leftovers
		{[]int{16, 4096}, []int{1}, false, true},        // long rows of whole blocks
		{[]int{70001}, []int{0}, false, true},           // one sum over everything, in blocks
		{[]int{5, 130, 129}, []int{2}, true, true},      // maxima, split by rows
		{[]int{3, 20000}, []int{1}, true, true},         // long maxima, in blocks
		{[]int{300, 3, 200}, []int{1}, false, true},     // columns, split by rows
		{[]int{2, 1024, 768}, []int{0, 1}, false, true}, // columns (bias gradients), split by columns
		{[]int{2, 600, 129}, []int{0, 1}, true, true},   // column maxima
		{[]int{64, 40}, []int{0}, false, false},         // columns too narrow: the fusion is stored
	} {
		name := fmt.Sprintf("%v axes %v max %v", c.dims, c.axes, c.max)
		s := shapes.Make(dtypes.Float32, c.dims...)
		last := c.dims[len(c.dims)-1]
		build := func(b backends.Backend, alsoOutput bool) backends.Executable {
			bld := b.Builder("fused-reduce")
			must := mustOp(t)
			x := must(bld.Parameter("x", s, nil))
			v := must(bld.Parameter("v", shapes.Make(dtypes.Float32, last), nil))
			vb := must(bld.BroadcastInDim(v, s, []int{len(c.dims) - 1})) // a strided leaf
			y := must(bld.Sub(must(bld.Exp(must(bld.Mul(x, vb)))), x))
			var r backends.Op
			if c.max {
				r = must(bld.ReduceMax(y, c.axes...))
			} else {
				r = must(bld.ReduceSum(y, c.axes...))
			}
			outs := []backends.Op{r}
			if alsoOutput {
				outs = append(outs, y) // read twice: stored, and reduced from the buffer
			}
			exec, err := bld.Compile(outs, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(exec.Finalize)
			return exec
		}
		x, v := randomTensor(rng, dtypes.Float32, c.dims...), randomTensor(rng, dtypes.Float32, last)
		args := func(b backends.Backend) []backends.Buffer {
			var out []backends.Buffer
			for _, a := range []*tensors.Tensor{x, v} {
				buf, err := b.BufferFromFlatData(0, tensors.MustCopyFlatData[float32](a), a.Shape())
				if err != nil {
					t.Fatal(err)
				}
				out = append(out, buf)
			}
			return out
		}
		want, err := build(sg, false).Execute(args(sg), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var results [2][]float32
		for i, alsoOutput := range []bool{false, true} {
			exec := build(gb, alsoOutput)
			st := exec.(*Executable).Stats()
			wantFused := c.fused && !alsoOutput
			if (st.ReducedFusions == 1) != wantFused || st.Reductions != 1 || st.Segments != 0 {
				t.Fatalf("%s (fusion also an output: %v): split %+v, want the fusion computed by the reduction: %v", name, alsoOutput, st, wantFused)
			}
			got, err := exec.Execute(args(gb), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			results[i] = flat(t, gb, got[0])
		}
		// Computed inside the reduction or stored and read back, the fusion's values are added in
		// the same order: equal, not just close. simplego's exp is float64's, rounded; the vector
		// kernel's is within 2 ulps of it.
		if !slices.Equal(results[0], results[1]) {
			t.Fatalf("%s: computed by the reduction %v..., from the stored fusion %v...", name, results[0][:min(4, len(results[0]))], results[1][:min(4, len(results[1]))])
		}
		for j, w := range flat(t, sg, want[0]) {
			if g := results[0][j]; abs32(g-w) > 1e-5*(1+abs32(w)) {
				t.Fatalf("%s: element %d is %g, simplego's %g", name, j, g, w)
			}
		}
	}
}
