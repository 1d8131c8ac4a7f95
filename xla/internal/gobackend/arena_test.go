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

// TestSpans checks the offset allocator on random sequences against a byte map: live spans
// never overlap, the high-water mark covers them, a hole that fits is reused (best fit), and
// freeing everything leaves no hole and the top at 0.
func TestSpans(t *testing.T) {
	var s spans
	a := s.alloc(100)
	b := s.alloc(50)
	s.alloc(10)
	s.release(a, 100)
	s.release(b, 50) // merges with a's hole: [0, 150)
	if got := s.alloc(120); got != 0 {
		t.Fatalf("alloc(120) after freeing [0,150) = %d, want 0", got)
	}
	s.alloc(20) // best fit: the 30-byte hole at 120, not the top
	if s.high != 160 {
		t.Fatalf("high = %d, want 160 (holes reused)", s.high)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var s spans
		type live struct{ off, n int64 }
		var ls []live
		for range 200 {
			if len(ls) > 0 && rng.IntN(2) == 0 {
				k := rng.IntN(len(ls))
				s.release(ls[k].off, ls[k].n)
				ls = slices.Delete(ls, k, k+1)
				continue
			}
			n := int64(1 + rng.IntN(64))
			ls = append(ls, live{s.alloc(n), n})
			used := make([]bool, s.high)
			for _, l := range ls {
				if l.off < 0 || l.off+l.n > s.high {
					t.Fatalf("round %d: span [%d,%d) outside [0,%d)", round, l.off, l.off+l.n, s.high)
				}
				for i := l.off; i < l.off+l.n; i++ {
					if used[i] {
						t.Fatalf("round %d: two live spans share byte %d", round, i)
					}
					used[i] = true
				}
			}
		}
		for _, l := range ls {
			s.release(l.off, l.n)
		}
		if s.top != 0 || len(s.holes) != 0 {
			t.Fatalf("round %d: all freed, top %d holes %v", round, s.top, s.holes)
		}
	}
}

// checkArenaPlan fails t if two arena values that are live at the same step (from the step
// computing them to their last reader's) share a byte without sharing a place (the same root
// and offset), or if a value lies outside the block.
func checkArenaPlan(t *testing.T, e *Executable) {
	t.Helper()
	def := make([]int, e.numValues)
	for i := range def {
		def[i] = -1
	}
	for i, st := range e.steps {
		if st.nat != nil && st.nat.out >= 0 && e.local[st.nat.out] {
			def[st.nat.out] = i
		}
	}
	for i := range e.steps {
		var live []int
		for v, d := range def {
			if d >= 0 && d <= i && (e.lastUse[v] >= i || e.lastUse[v] < 0) {
				live = append(live, v)
			}
		}
		for x, v := range live {
			off, end := e.localOff[v], e.localOff[v]+e.localSize(v)
			if off < 0 || end > e.arenaSize {
				t.Fatalf("value %d at [%d,%d) outside the block of %d", v, off, end, e.arenaSize)
			}
			for _, u := range live[x+1:] {
				uo, ue := e.localOff[u], e.localOff[u]+e.localSize(u)
				if uo >= end || off >= ue {
					continue
				}
				if e.localRoot[u] != e.localRoot[v] || uo != off {
					t.Fatalf("step %d: values %d %s [%d,%d) and %d %s [%d,%d) overlap", i,
						v, e.valueShapes[v], off, end, u, e.valueShapes[u], uo, ue)
				}
			}
		}
	}
}

// viewGraph: x = a+c; y = reshape(x), read by a product; z = x·x (x's last reader, but y,
// which shares x's place, is read later, so z must not be written over x); a strided slice of
// z; outputs y·y', z's slice and reshape(z)+y.
func viewGraph(t *testing.T, b backends.Backend) backends.Executable {
	bld := b.Builder("views")
	must := mustOp(t)
	s := shapes.Make(dtypes.Float32, 4, 6, 5)
	a := must(bld.Parameter("a", s, nil))
	c := must(bld.Parameter("c", s, nil))
	x := must(bld.Add(a, c))
	y := must(bld.Reshape(x, 6, 20))
	z := must(bld.Mul(x, x))
	sl := must(bld.Slice(z, []int{1, 0, 1}, []int{4, 6, 5}, []int{2, 3, 1}))
	d := must(bld.Dot(y, must(bld.Reshape(c, 20, 6))))
	out := must(bld.Add(must(bld.Reshape(z, 6, 20)), y))
	exec, err := bld.Compile([]backends.Op{d, must(bld.Identity(sl)), out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exec.Finalize)
	return exec
}

func TestArenaViewsAndInPlace(t *testing.T) {
	sg, gb := newSimpleGo(t), newGotpu(t, Config{})
	rng := rand.New(rand.NewPCG(3, 4))
	args := []arg{{normals(rng, 120), []int{4, 6, 5}}, {normals(rng, 120), []int{4, 6, 5}}}
	want := execute(t, sg, viewGraph(t, sg), args, nil)
	exec := viewGraph(t, gb)
	e := exec.(*Executable)
	if st := e.Stats(); st.Segments != 0 || st.Copies < 4 {
		t.Fatalf("%+v: want the reshapes, slice and identity native, no segment", st)
	}
	checkArenaPlan(t, e)
	// y shares x's place; z, computed while y is live, has its own.
	var x, y, z int = -1, -1, -1
	for _, st := range e.steps {
		switch {
		case st.nat.fus != nil && x < 0:
			x = st.nat.out
		case st.nat.cp != nil && st.nat.cp.alias && len(st.nat.reads) == 1 && st.nat.reads[0] == x:
			y = st.nat.out
		case st.nat.fus != nil && z < 0 && slices.Contains(st.nat.reads, x) && y >= 0:
			z = st.nat.out
		}
	}
	if x < 0 || y < 0 || z < 0 || !e.local[x] || !e.local[y] || !e.local[z] {
		t.Fatalf("x %d y %d z %d: want three arena values", x, y, z)
	}
	if e.localOff[y] != e.localOff[x] || e.localOff[z] == e.localOff[x] {
		t.Fatalf("offsets x %d y %d z %d: want y at x's place and z elsewhere", e.localOff[x], e.localOff[y], e.localOff[z])
	}
	for round := range 3 { // the same table and block again
		got := execute(t, gb, exec, args, nil)
		assertNear(t, fmt.Sprintf("round %d product", round), got[0].([]float32), want[0].([]float32), 1e-5)
		for i := 1; i < len(want); i++ {
			assertBitwise(t, fmt.Sprintf("round %d output %d", round, i), got[i], want[i])
		}
	}
}

// TestArenaRandomGraphs compares random chains of native fusions, reshapes, slices and
// products with simplego, bitwise, and checks each plan.
func TestArenaRandomGraphs(t *testing.T) {
	sg, gb := newSimpleGo(t), newGotpu(t, Config{})
	forms := [][]int{{4, 6}, {6, 4}, {2, 12}, {24}, {2, 3, 4}}
	for seed := range uint64(40) {
		build := func(b backends.Backend) backends.Executable {
			rng := rand.New(rand.NewPCG(seed, 7))
			bld := b.Builder(fmt.Sprintf("random-%d", seed))
			must := mustOp(t)
			vals := []backends.Op{
				must(bld.Parameter("p0", shapes.Make(dtypes.Float32, 4, 6), nil)),
				must(bld.Parameter("p1", shapes.Make(dtypes.Float32, 24), nil)),
			}
			as := func(v backends.Op, dims []int) backends.Op {
				if s := mustShape(t, bld, v); slices.Equal(s.Dimensions, dims) {
					return v
				}
				return must(bld.Reshape(v, dims...))
			}
			var outs []backends.Op
			for range 6 + rng.IntN(14) {
				x := vals[rng.IntN(len(vals))]
				y := vals[rng.IntN(len(vals))]
				f := forms[rng.IntN(len(forms))]
				var v backends.Op
				switch rng.IntN(7) {
				case 0:
					v = must(bld.Add(as(x, f), as(y, f)))
				case 1:
					v = must(bld.Mul(as(x, f), as(y, f)))
				case 2:
					v = must(bld.Tanh(as(x, f)))
				case 3:
					v = as(x, f)
				case 4:
					v = must(bld.Identity(x))
				case 5: // a strided slice, its result widened back to 24 elements by a product
					s := must(bld.Slice(as(x, []int{4, 6}), []int{1, 0}, []int{4, 6}, []int{2, 2})) // [2, 3]
					v = must(bld.DotGeneral(as(s, []int{6, 1}), []int{1}, nil, as(y, []int{1, 24}), []int{0}, nil))
					outs = append(outs, v) // [6, 24]
					v = as(must(bld.Slice(v, []int{2, 0}, []int{3, 24}, []int{1, 1})), []int{24})
				case 6:
					d := must(bld.Dot(as(x, []int{4, 6}), as(y, []int{6, 4}))) // [4, 4]
					top := must(bld.Slice(d, []int{0, 0}, []int{2, 4}, []int{1, 1}))
					v = must(bld.Concatenate(0, as(d, []int{16}), as(top, []int{8}))) // a fallback segment reading both
				}
				vals = append(vals, v)
				if rng.IntN(5) == 0 {
					outs = append(outs, v)
				}
			}
			outs = append(outs, vals[len(vals)-1])
			var uniq []backends.Op // simplego refuses an output listed twice
			for _, o := range outs {
				if !slices.Contains(uniq, o) {
					uniq = append(uniq, o)
				}
			}
			exec, err := bld.Compile(uniq, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(exec.Finalize)
			return exec
		}
		rng := rand.New(rand.NewPCG(seed, 9))
		args := []arg{{normals(rng, 24), []int{4, 6}}, {normals(rng, 24), []int{24}}}
		want := execute(t, sg, build(sg), args, nil)
		exec := build(gb)
		checkArenaPlan(t, exec.(*Executable))
		for round := range 2 {
			got := execute(t, gb, exec, args, nil)
			for i := range want {
				// Products sum in another order than simplego's: results agree to rounding.
				assertNear(t, fmt.Sprintf("seed %d round %d output %d", seed, round, i), got[i].([]float32), want[i].([]float32), 1e-4)
			}
		}
	}
}

// normals returns n standard normal values.
func normals(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(rng.NormFloat64())
	}
	return out
}

// assertNear fails t unless got and want have the same length and agree within tol relative to
// the larger magnitude (at least 1).
func assertNear(t *testing.T, what string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) != math.IsNaN(w) || math.Abs(g-w) > tol*max(1, math.Abs(w)) {
			t.Fatalf("%s: element %d is %g, simplego's is %g", what, i, g, w)
		}
	}
}

// TestSparesTrimmed: buffers freed every execution that no native step takes are not kept.
// y, made by a fallback segment, is freed after its reader; the output is written over the
// donated input and tanh(y) lives in the arena, so no step takes a buffer of y's shape, and none
// may stay kept after an execution.
func TestSparesTrimmed(t *testing.T) {
	gb := newGotpu(t, Config{})
	bld := gb.Builder("trim")
	must := mustOp(t)
	s := shapes.Make(dtypes.Float32, 4, 129)
	x := must(bld.Parameter("x", s, nil))
	c := must(bld.BroadcastInDim(must(bld.Constant([]float32{2})), s, []int{}))
	y := must(bld.Pow(x, c)) // a segment: Pow is not native
	out := must(bld.Add(x, must(bld.Tanh(y))))
	exec, err := bld.Compile([]backends.Op{out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exec.Finalize)
	e := exec.(*Executable)
	if st := e.Stats(); st.Segments != 1 {
		t.Fatalf("%+v: want Pow in one segment", st)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for round := range 3 {
		got := execute(t, gb, exec, []arg{{normals(rng, s.Size()), s.Dimensions}}, []bool{true})
		if len(got) != 1 {
			t.Fatalf("round %d: %d outputs", round, len(got))
		}
		kept := 0
		for _, list := range e.spare {
			kept += len(list)
		}
		if kept != 0 {
			t.Fatalf("round %d: %d buffers kept that no step takes", round, kept)
		}
	}
}
