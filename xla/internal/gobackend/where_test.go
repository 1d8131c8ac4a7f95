package gobackend

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// TestFusedWhere: Where runs inside fusions with simplego's bits — an optimizer-style
// keep-or-update under a single condition (both ways), and a selection under a full-size
// condition computed by a comparison — in float32 and bfloat16, on awkward sizes.
func TestFusedWhere(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	for _, dims := range [][]int{{1}, {7}, {3, 129}, {5, 130, 129}} {
		n := 1
		for _, d := range dims {
			n *= d
		}
		for _, bf16 := range []bool{false, true} {
			for _, ok := range []bool{true, false} {
				values := func() any {
					if bf16 {
						return bf16Values(rng, n)
					}
					return f32Values(rng, n)
				}
				prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, p []backends.Op) []backends.Op {
					m, g, keep := p[0], p[1], p[2]
					upd := must(bld.Add(must(bld.Mul(m, m)), g))
					sel := must(bld.Where(must(bld.GreaterThan(m, g)), m, must(bld.Sub(g, m))))
					return []backends.Op{must(bld.Where(keep, upd, m)), sel}
				}
				args := []arg{{values(), dims}, {values(), dims}, {[]bool{ok}, nil}}
				what := fmt.Sprintf("%v bf16=%v ok=%v", dims, bf16, ok)
				st := matchSimpleGo(t, what, prog, args)
				if st.Segments != 0 {
					t.Fatalf("%s: %+v, want no fallback segment (Where fused)", what, st)
				}
			}
		}
	}
}

// TestFusedWhereInPlace: a keep-or-update whose old value is donated and read last there writes
// the new value over the old one.
func TestFusedWhereInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	dims := []int{3, 129}
	prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, p []backends.Op) []backends.Op {
		return []backends.Op{must(bld.Where(p[2], must(bld.Add(must(bld.Mul(p[0], p[0])), p[1])), p[0]))}
	}
	args := []arg{{f32Values(rng, 3*129), dims}, {f32Values(rng, 3*129), dims}, {[]bool{true}, nil}}
	sg := newSimpleGo(t)
	want := execute(t, sg, compileProgram(t, sg, prog, args), args, nil)
	gb := newGotpu(t, Config{})
	exec := compileProgram(t, gb, prog, args)
	in := argBuffers(t, gb, args)
	mData, err := gb.BufferData(in[0])
	if err != nil {
		t.Fatal(err)
	}
	outs, err := exec.Execute(in, []bool{true, false, false}, 0)
	if err != nil {
		t.Fatal(err)
	}
	outData, err := gb.BufferData(outs[0])
	if err != nil {
		t.Fatal(err)
	}
	if unsafe.SliceData(outData.([]float32)) != unsafe.SliceData(mData.([]float32)) {
		t.Errorf("the update went to a new buffer, not over the donated old value")
	}
	assertBitwise(t, "in place", flatOf(t, gb, outs[0]), want[0])
}

// TestFusedBroadcastCondition: a Where whose condition is a bool array broadcast to the output
// (the attention mask broadcast to every head) reads the mask through the broadcast — inlined
// when two fusions read it, a member of the group when one does — with simplego's bits and no
// fallback segment; the mask is broadcast along leading, middle and size-1 axes.
func TestFusedBroadcastCondition(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	for _, c := range []struct {
		mask, out, axes []int
	}{
		{[]int{2, 5, 7}, []int{2, 3, 5, 1, 7}, []int{0, 2, 4}},
		{[]int{5, 7}, []int{3, 5, 7}, []int{1, 2}},
		{[]int{1, 130}, []int{4, 129, 130}, []int{0, 2}},
		{[]int{1}, []int{3, 9}, []int{1}},
	} {
		n, m := 1, 1
		for _, d := range c.out {
			n *= d
		}
		for _, d := range c.mask {
			m *= d
		}
		mask := make([]bool, m)
		for i := range mask {
			mask[i] = rng.IntN(3) > 0
		}
		for _, twice := range []bool{false, true} {
			prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, p []backends.Op) []backends.Op {
				x, y, mk := p[0], p[1], p[2]
				full := must(bld.BroadcastInDim(mk, shapes.Make(dtypes.Bool, c.out...), c.axes))
				out := []backends.Op{must(bld.Where(full, must(bld.Mul(x, y)), y))}
				if twice { // a second fusion reads the same broadcast: it is inlined into both
					out = append(out, must(bld.Where(full, must(bld.Sub(y, x)), must(bld.Neg(x)))))
				}
				return out
			}
			args := []arg{{f32Values(rng, n), c.out}, {f32Values(rng, n), c.out}, {mask, c.mask}}
			what := fmt.Sprintf("mask %v -> %v twice=%v", c.mask, c.out, twice)
			st := matchSimpleGo(t, what, prog, args)
			if st.Segments != 0 {
				t.Fatalf("%s: %+v, want no fallback segment (broadcast mask read by the fusions)", what, st)
			}
		}
	}
}
