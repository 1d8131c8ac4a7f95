package gobackend

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
)

// adamProgram is an AdamW update over parameter p, gradient g and moments m, v, with scalar
// hyper-parameters and a single keep-or-update condition (trainer/step's finite-gradient
// check): m' = β1·m + (1-β1)·g, v' = β2·v + (1-β2)·g², p' = p - lr·(m'/(√v' + ε) + wd·p), each
// kept at its old value where the condition is false. The outputs are m', v', p', the three
// groups' roots: m' and v' are read only by p's group, so both are its extra outputs.
func adamProgram(bld backends.Builder, must func(backends.Op, error) backends.Op, x []backends.Op) []backends.Op {
	p, g, m, v, ok := x[0], x[1], x[2], x[3], x[4]
	b1, b2, lr, eps, wd := x[5], x[6], x[7], x[8], x[9]
	c1, c2 := x[10], x[11] // 1-β1, 1-β2
	m1 := must(bld.Where(ok, must(bld.Add(must(bld.Mul(b1, m)), must(bld.Mul(c1, g)))), m))
	v1 := must(bld.Where(ok, must(bld.Add(must(bld.Mul(b2, v)), must(bld.Mul(c2, must(bld.Mul(g, g)))))), v))
	upd := must(bld.Add(must(bld.Div(m1, must(bld.Add(must(bld.Sqrt(v1)), eps)))), must(bld.Mul(wd, p))))
	p1 := must(bld.Where(ok, must(bld.Sub(p, must(bld.Mul(lr, upd)))), p))
	return []backends.Op{m1, v1, p1}
}

// TestFusionExtraOutputs: the AdamW update runs as one fusion writing m', v' and p' (two extra
// outputs), bitwise as simplego computes it — on one and two threads, with the condition true
// (the update) and false (every output a view of an operand), with the parameter and moments
// donated (the outputs written over them, each over a different one) and not.
func TestFusionExtraOutputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 42))
	dims := []int{5, 130, 129}
	n := dims[0] * dims[1] * dims[2]
	vals := func(pos bool) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
			if pos {
				x[i] *= x[i]
			}
		}
		return x
	}
	scalar := func(v float32) arg { return arg{[]float32{v}, nil} }
	p, g, m, v := vals(false), vals(false), vals(false), vals(true)
	sg := newSimpleGo(t)
	for _, keep := range []bool{true, false} {
		args := []arg{{p, dims}, {g, dims}, {m, dims}, {v, dims}, {[]bool{keep}, nil},
			scalar(0.9), scalar(0.999), scalar(3e-4), scalar(1e-8), scalar(0.01), scalar(0.1), scalar(0.001)}
		want := execute(t, sg, compileProgram(t, sg, adamProgram, args), args, nil)
		for _, threads := range []int{1, 2} {
			gb := newGotpu(t, Config{Threads: threads})
			exec := compileProgram(t, gb, adamProgram, args)
			if st := exec.(*Executable).Stats(); st.Fusions != 1 || st.FusionExtraOutputs != 2 || st.Segments != 0 {
				t.Fatalf("stats %+v, want one fusion with two extra outputs", st)
			}
			for _, donate := range []bool{false, true} {
				what := fmt.Sprintf("keep %v, %d threads, donated %v", keep, threads, donate)
				in := argBuffers(t, gb, args)
				var data []unsafe.Pointer
				for _, buf := range in {
					d, err := gb.BufferData(buf)
					if err != nil {
						t.Fatal(err)
					}
					if f, ok := d.([]float32); ok {
						data = append(data, unsafe.Pointer(unsafe.SliceData(f)))
					}
				}
				donated := make([]bool, len(args))
				donated[0], donated[2], donated[3] = donate, donate, donate
				outs, err := exec.Execute(in, donated, 0)
				if err != nil {
					t.Fatal(err)
				}
				// Donated p, m and v: each output takes one of their buffers.
				took := map[unsafe.Pointer]bool{}
				for i, o := range outs {
					d, err := gb.BufferData(o)
					if err != nil {
						t.Fatal(err)
					}
					ptr := unsafe.Pointer(unsafe.SliceData(d.([]float32)))
					if donate && ptr != data[0] && ptr != data[2] && ptr != data[3] || took[ptr] {
						t.Errorf("%s: output %d is not written over its own donated operand", what, i)
					}
					took[ptr] = true
					assertBitwise(t, fmt.Sprintf("%s output %d", what, i), flatOf(t, gb, o), want[i])
					if err := gb.BufferFinalize(o); err != nil {
						t.Fatal(err)
					}
				}
				for i, b := range in {
					if !donated[i] {
						if err := gb.BufferFinalize(b); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
		}
	}
}

// TestFusionExtraOutputAliasing: an extra output that is a view of an operand (x = Where(c, t,
// a) with c false is a's block) while the root is written over that same operand (p' = 3x + b,
// a and b donated: the root takes a's buffer, the extra b's): the extra output still stores a's
// old values, because every output's block is copied into its own register before any is
// stored (storeBlock).
func TestFusionExtraOutputAliasing(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 44))
	dims := []int{300, 129}
	n := dims[0] * dims[1]
	vals := func() []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, x []backends.Op) []backends.Op {
		a, b, c, s, three := x[0], x[1], x[2], x[3], x[4]
		xv := must(bld.Where(c, must(bld.Add(a, s)), a))
		return []backends.Op{xv, must(bld.Add(must(bld.Mul(xv, three)), b))}
	}
	sg := newSimpleGo(t)
	for _, c := range []bool{false, true} {
		args := []arg{{vals(), dims}, {vals(), dims}, {[]bool{c}, nil}, {[]float32{0.5}, nil}, {[]float32{3}, nil}}
		want := execute(t, sg, compileProgram(t, sg, prog, args), args, nil)
		for _, threads := range []int{1, 2} {
			gb := newGotpu(t, Config{Threads: threads})
			exec := compileProgram(t, gb, prog, args)
			if st := exec.(*Executable).Stats(); st.Fusions != 1 || st.FusionExtraOutputs != 1 {
				t.Fatalf("stats %+v, want one fusion with an extra output", st)
			}
			got := execute(t, gb, exec, args, []bool{true, true, false, false, false})
			for i := range want {
				assertBitwise(t, fmt.Sprintf("c %v, %d threads, output %d", c, threads, i), got[i], want[i])
			}
		}
	}
}

// TestReadAhead: fusions that prefetch blocks ahead (readsAhead: two float32 operands read in
// the output's layout, at least readAheadMin elements) give simplego's results to the bit —
// stored, with a size that is not a whole number of blocks, and computed inside the reductions
// of its rows and of its columns (reduce_fused.go), whose scratch holds a few rows only.
func TestReadAhead(t *testing.T) {
	rng := rand.New(rand.NewPCG(45, 46))
	sg := newSimpleGo(t)
	for _, c := range []struct {
		dims []int
		axes []int // nil: the fusion is the output
	}{
		{[]int{517, 1031}, nil},
		{[]int{256, 2048}, []int{1}},
		{[]int{2, 1024, 768}, []int{0, 1}},
	} {
		n := 1
		for _, d := range c.dims {
			n *= d
		}
		prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, x []backends.Op) []backends.Op {
			y := must(bld.Add(must(bld.Mul(x[0], x[1])), x[0]))
			if c.axes != nil {
				y = must(bld.ReduceSum(y, c.axes...))
			}
			return []backends.Op{y}
		}
		vals := func() []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			return v
		}
		args := []arg{{vals(), c.dims}, {vals(), c.dims}}
		want := execute(t, sg, compileProgram(t, sg, prog, args), args, nil)
		for _, threads := range []int{1, 2} {
			gb := newGotpu(t, Config{Threads: threads})
			exec := compileProgram(t, gb, prog, args).(*Executable)
			ahead := false
			for _, st := range exec.steps {
				if nat := st.nat; nat != nil && nat.fus != nil {
					ahead = ahead || nat.fus.readAhead
				} else if nat != nil && nat.red != nil && nat.red.src != nil {
					ahead = ahead || nat.red.src.readAhead
				}
			}
			if !ahead {
				t.Fatalf("%v axes %v: no fusion reads ahead", c.dims, c.axes)
			}
			got := execute(t, gb, exec, args, nil)
			assertBitwise(t, fmt.Sprintf("%v axes %v, %d threads", c.dims, c.axes, threads), got[0], want[0])
		}
	}
}
