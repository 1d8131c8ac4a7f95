package gobackend

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// geluLike records a forward chain and a backward-like reader of its intermediates, as autodiff
// of the tanh GELU produces: x2 = x·x, t = tanh(x2·x·c), y = t·x, g = (1 − t·t)·x2·w. With
// readLate, x is also read after g (z = x·w), as a layer's input is by its weight gradient.
// extra values are returned too (forcing them to be materialized).
func geluLike(t *testing.T, b backends.Backend, readLate bool, extra bool) backends.Executable {
	bld := b.Builder("gelu")
	must := mustOp(t)
	s := shapes.Make(dtypes.Float32, 3, 129)
	x := must(bld.Parameter("x", s, nil))
	w := must(bld.Parameter("w", s, nil))
	c := must(bld.Constant([]float32{0.7978846}))
	cb := must(bld.BroadcastInDim(c, s, []int{}))
	one := must(bld.BroadcastInDim(must(bld.Constant([]float32{1})), s, []int{}))
	x2 := must(bld.Mul(x, x))
	tt := must(bld.Tanh(must(bld.Mul(must(bld.Mul(x2, x)), cb))))
	y := must(bld.Mul(tt, x))
	g := must(bld.Mul(must(bld.Mul(must(bld.Sub(one, must(bld.Mul(tt, tt)))), x2)), w))
	outs := []backends.Op{y, g}
	if readLate {
		outs = append(outs, must(bld.Mul(x, w)))
	}
	if extra {
		outs = append(outs, tt, x2)
	}
	exec, err := bld.Compile(outs, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exec.Finalize)
	return exec
}

func TestRematerializeElementwiseChain(t *testing.T) {
	gb := newGotpu(t, Config{})
	rng := rand.New(rand.NewPCG(11, 12))
	dims := []int{3, 129}
	args := []arg{{f32Values(rng, 3*129), dims}, {f32Values(rng, 3*129), dims}}

	// x is read after the backward reader: x2 and t are recomputed where they are read (three
	// fusions: y, g and z), not held from the forward pass to the backward one (five).
	late := geluLike(t, gb, true, false)
	if st := late.(*Executable).Stats(); st.Fusions != 3 {
		t.Errorf("x read late: %+v, want 3 fusions (x2 and t recomputed in their readers)", st)
	}
	// Without the late read, recomputing keeps x alive until g instead of y, within x2's life
	// (x2 is x's size): x2 and t are recomputed, y and g are the only fusions.
	if st := geluLike(t, gb, false, false).(*Executable).Stats(); st.Fusions != 2 {
		t.Errorf("x not read late: %+v, want 2 fusions (x2 and t recomputed, x kept instead of x2)", st)
	}
	// Bitwise the values computed from materialized intermediates (they are outputs here).
	got := execute(t, gb, late, args, nil)
	want := execute(t, gb, geluLike(t, gb, true, true), args, nil)
	for i := range got {
		assertBitwise(t, fmt.Sprintf("output %d recomputed vs from materialized intermediates", i), got[i], want[i])
	}
}

// TestRematerializeExtensionBound: a group whose recomputation would keep more input bytes alive
// longer than its own value's buffer stays materialized. u = a·b is read by r1 = u + c and then
// r2 = u·d; recomputing u in both keeps a and b alive until r2. When a is read there anyway only
// b is extended (u's size: u is recomputed); when neither is, a and b are (twice u's: it is not).
func TestRematerializeExtensionBound(t *testing.T) {
	gb := newGotpu(t, Config{})
	for _, c := range []struct {
		aReadLate bool
		fusions   int
	}{{true, 2}, {false, 3}} {
		bld := gb.Builder("bound")
		must := mustOp(t)
		s := shapes.Make(dtypes.Float32, 3, 129)
		var p [4]backends.Op
		for i := range p {
			p[i] = must(bld.Parameter(fmt.Sprintf("p%d", i), s, nil))
		}
		a, b, cc, d := p[0], p[1], p[2], p[3]
		u := must(bld.Mul(a, b))
		r1 := must(bld.Add(u, cc))
		late := d
		if c.aReadLate {
			late = must(bld.Mul(d, a))
		}
		r2 := must(bld.Mul(u, late))
		exec, err := bld.Compile([]backends.Op{r1, r2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(exec.Finalize)
		if st := exec.(*Executable).Stats(); st.Fusions != c.fusions {
			t.Errorf("a read late %v: %+v, want %d fusions", c.aReadLate, st, c.fusions)
		}
	}
}

// TestConstantFillReplayed checks that a full-size fill of a constant read by fallback
// operations in two segments (as the masked-score fill of attention was, read in the forward
// pass and again later) is replayed in each, never made at the start and passed as a buffer.
func TestConstantFillReplayed(t *testing.T) {
	sg := newSimpleGo(t)
	gb := newGotpu(t, Config{})
	s := shapes.Make(dtypes.Float32, 2, 3, 129)
	var fillID int
	build := func(b backends.Backend) backends.Executable {
		bld := b.Builder("fill")
		must := mustOp(t)
		x := must(bld.Parameter("x", s, nil))
		fill := must(bld.BroadcastInDim(must(bld.Constant([]float32{2})), s, []int{}))
		if v, ok := fill.(*value); ok {
			fillID = v.id
		}
		w := must(bld.Pow(x, fill))                    // segment 0 (Pow is not native)
		e := must(bld.Exp(must(bld.Tanh(w))))          // native
		w2 := must(bld.Pow(must(bld.Add(e, x)), fill)) // a later segment
		exec, err := bld.Compile([]backends.Op{w2}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(exec.Finalize)
		return exec
	}
	wantExec, gotExec := build(sg), build(gb)
	ex := gotExec.(*Executable)
	if st := ex.Stats(); st.Segments < 2 {
		t.Fatalf("%+v: want the two Pows in two segments", st)
	}
	for _, st := range ex.steps {
		if st.seg != nil && slices.Contains(st.seg.inputs, fillID) {
			t.Errorf("%s reads the constant fill as a buffer; want it replayed there", st.seg.name)
		}
	}
	rng := rand.New(rand.NewPCG(13, 14))
	x := make([]float32, s.Size())
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	runOn := func(b backends.Backend, e backends.Executable) []float32 {
		buf, err := b.BufferFromFlatData(0, slices.Clone(x), s)
		if err != nil {
			t.Fatal(err)
		}
		outs, err := e.Execute([]backends.Buffer{buf}, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		return flat(t, b, outs[0])
	}
	want, got := runOn(sg, wantExec), runOn(gb, gotExec)
	for i := range want {
		if d := float64(got[i] - want[i]); math.Abs(d) > 1e-6*(1+math.Abs(float64(want[i]))) {
			t.Fatalf("[%d] = %g, want %g", i, got[i], want[i])
		}
	}
}
