package gobackend

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// mlp builds a two-layer perceptron with a mean loss and its gradients through GoMLX, so the
// graph holds native products (forward and both gradient layouts) between fallback runs
// (tanh, broadcasts, reductions, constants).
func mlp(xs []*graph.Node) []*graph.Node {
	x, w1, w2 := xs[0], xs[1], xs[2]
	h := graph.Tanh(graph.Add(graph.Dot(x, w1), graph.Const(x.Graph(), float32(0.5))))
	y := graph.DotGeneral(h, []int{1}, nil, w2, []int{0}, nil)
	loss := graph.ReduceAllMean(graph.Mul(y, y))
	grads := graph.Gradient(loss, w1, w2)
	return []*graph.Node{loss, grads[0], grads[1], y}
}

func TestMixedGraphMatchesSimpleGo(t *testing.T) {
	sg := newSimpleGo(t)
	gb := newGotpu(t, Config{})
	rng := rand.New(rand.NewPCG(1, 2))
	in := []*tensors.Tensor{
		randomTensor(rng, dtypes.Float32, 33, 17),
		randomTensor(rng, dtypes.Float32, 17, 65),
		randomTensor(rng, dtypes.Float32, 65, 7),
	}
	want := run(t, sg, mlp, in...)
	got := run(t, gb, mlp, in...)
	for i := range want {
		assertClose(t, fmt.Sprintf("output %d", i), got[i], want[i], 1e-5)
	}
}

// buildOn records the same small computation on any backend's builder and compiles it:
// out0 = x (a parameter returned as is), out1 = tanh(x·w)·w2, out2 = out1 + 1.
func buildOn(t *testing.T, b backends.Backend) backends.Executable {
	t.Helper()
	bld := b.Builder("small")
	must := mustOp(t)
	x := must(bld.Parameter("x", shapes.Make(dtypes.Float32, 5, 3), nil))
	w := must(bld.Parameter("w", shapes.Make(dtypes.Float32, 3, 4), nil))
	w2 := must(bld.Parameter("w2", shapes.Make(dtypes.Float32, 4, 2), nil))
	h := must(bld.Tanh(must(bld.Dot(x, w))))
	y := must(bld.DotGeneral(h, []int{1}, []int{}, w2, []int{0}, []int{}))
	one := must(bld.Constant([]float32{1}))
	z := must(bld.Add(y, one))
	exec, err := bld.Compile([]backends.Op{x, y, z}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exec.Finalize)
	return exec
}

func buffers(t *testing.T, b backends.Backend) []backends.Buffer {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	var out []backends.Buffer
	for _, dims := range [][]int{{5, 3}, {3, 4}, {4, 2}} {
		x := randomTensor(rng, dtypes.Float32, dims...)
		buf, err := b.BufferFromFlatData(0, tensors.MustCopyFlatData[float32](x), x.Shape())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, buf)
	}
	return out
}

func flat(t *testing.T, b backends.Backend, buf backends.Buffer) []float32 {
	t.Helper()
	s, err := b.BufferShape(buf)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, s.Size())
	if err := b.BufferToFlatData(buf, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSegmentsAndBuffers checks the split (two native products and two fusions, no fallback
// segment), results against simplego, and buffer ownership: a non-donated input
// returned as an output is a copy, donated inputs are consumed, and inputs that were not donated
// stay valid across executions.
func TestSegmentsAndBuffers(t *testing.T) {
	sg := newSimpleGo(t)
	gb := newGotpu(t, Config{})
	wantExec := buildOn(t, sg)
	gotExec := buildOn(t, gb)
	st := gotExec.(*Executable).Stats()
	// Everything is native: the products, tanh and the +1 (its constant folded into the fusion).
	if st.Native != 2 || st.Segments != 0 || st.PackedOperands != 0 || st.Fusions != 2 || st.FusedOps != 2 {
		t.Fatalf("split %+v, want 2 native products reading their operands in place, 2 fusions and no segment", st)
	}

	wantIn, gotIn := buffers(t, sg), buffers(t, gb)
	want, err := wantExec.Execute(wantIn, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		got, err := gotExec.Execute(gotIn, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			w, g := flat(t, sg, want[i]), flat(t, gb, got[i])
			for j := range w {
				if d := w[j] - g[j]; d > 1e-6 || d < -1e-6 {
					t.Fatalf("round %d output %d[%d] = %g, want %g", round, i, j, g[j], w[j])
				}
			}
		}
		if got[0].(*buffer).st.sg == gotIn[0].(*buffer).st.sg {
			t.Fatal("a non-donated input was returned as an output without a copy")
		}
		for _, buf := range got {
			if err := gb.BufferFinalize(buf); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Donating every input: x comes back as output 0 itself, the others are consumed.
	donated := buffers(t, gb)
	got, err := gotExec.Execute(donated, []bool{true, true, true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got[0].(*buffer).st.sg != donated[0].(*buffer).st.sg {
		t.Error("a donated input returned as an output was copied")
	}
	if _, err := gb.BufferShape(donated[1]); err == nil {
		t.Error("a donated input is still usable after the execution")
	}
	for _, buf := range got {
		if err := gb.BufferFinalize(buf); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConcurrentExecutions(t *testing.T) {
	gb := newGotpu(t, Config{})
	exec := buildOn(t, gb)
	in := buffers(t, gb)
	ref, err := exec.Execute(in, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := flat(t, gb, ref[2])
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range errs {
		wg.Go(func() {
			for range 20 {
				out, err := exec.Execute(in, nil, 0)
				if err != nil {
					errs[g] = err
					return
				}
				s := make([]float32, len(want))
				if err := gb.BufferToFlatData(out[2], s); err != nil {
					errs[g] = err
					return
				}
				for j := range s {
					if s[j] != want[j] {
						errs[g] = fmt.Errorf("element %d = %g, want %g", j, s[j], want[j])
						return
					}
				}
				for _, b := range out {
					_ = gb.BufferFinalize(b)
				}
			}
		})
	}
	wg.Wait()
	for g, err := range errs {
		if err != nil {
			t.Errorf("goroutine %d: %v", g, err)
		}
	}
}

func TestErrors(t *testing.T) {
	if _, err := New(Config{Threads: -1}); err == nil || !strings.Contains(err.Error(), "Threads") {
		t.Errorf("New(Threads: -1) = %v, want an error naming Threads", err)
	}
	gb := newGotpu(t, Config{})
	bld := gb.Builder("errs")
	x, err := bld.Parameter("x", shapes.Make(dtypes.Float32, 4), nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one mentioning %q", what, err, want)
		}
	}
	_, err = bld.FFT(x, backends.FFTForward, []int{4})
	check("unsupported op", err, "FFT")
	_, err = bld.Add(x, "not an op")
	check("foreign operand", err, "operand #1")
	other := gb.Builder("other")
	y, _ := other.Parameter("y", shapes.Make(dtypes.Float32, 4), nil)
	_, err = bld.Add(x, y)
	check("operand of another computation", err, `computation "other"`)
	_, err = bld.DotGeneral(x, []int{1}, []int{}, x, []int{0}, []int{})
	check("bad axes", err, "DotGeneral")

	neg, err := bld.Neg(x)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := bld.Compile([]backends.Op{neg}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	if _, err := bld.Compile([]backends.Op{neg}, nil); err == nil || !strings.Contains(err.Error(), "already compiled") {
		t.Errorf("second Compile: %v", err)
	}
	bad, _ := gb.BufferFromFlatData(0, []float32{1, 2, 3}, shapes.Make(dtypes.Float32, 3))
	if _, err := exec.Execute([]backends.Buffer{bad}, nil, 0); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Errorf("wrong input shape: %v, want an error naming parameter \"x\"", err)
	}
}

// TestRepeatedOutputs: a computation may return the same value several times, and a parameter
// too (GoMLX does, for a variable a graph leaves unchanged): every position gets its own buffer
// with the value, on one device and on every replica of an SPMD execution, donated or not.
func TestRepeatedOutputs(t *testing.T) {
	for _, replicas := range []int{1, 3} {
		gb := newGotpu(t, Config{NumDevices: replicas})
		bld := gb.Builder("repeated")
		if replicas > 1 {
			if err := bld.DistributedSPMD(replicas); err != nil {
				t.Fatal(err)
			}
		}
		must := mustOp(t)
		x := must(bld.Parameter("x", shapes.Make(dtypes.Float32, 3), nil))
		y := must(bld.Neg(x))
		exec, err := bld.Compile([]backends.Op{y, y, x, x}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, donate := range []bool{false, true} {
			var ins []backends.Buffer
			var flags []bool
			for r := range replicas {
				b, err := gb.BufferFromFlatData(backends.DeviceNum(r), []float32{1, 2, float32(r)}, shapes.Make(dtypes.Float32, 3))
				if err != nil {
					t.Fatal(err)
				}
				ins, flags = append(ins, b), append(flags, donate)
			}
			outs, err := exec.Execute(ins, flags, 0)
			if err != nil {
				t.Fatalf("%d replicas, donate %v: %v", replicas, donate, err)
			}
			seen := map[*storage]bool{}
			for k, o := range outs {
				r, i := k/4, k%4
				want := []float32{1, 2, float32(r)}
				if i < 2 {
					want = []float32{-1, -2, -float32(r)}
				}
				if got := flat(t, gb, o); !slices.Equal(got, want) {
					t.Errorf("%d replicas, donate %v: replica %d output %d = %v, want %v", replicas, donate, r, i, got, want)
				}
				if st := o.(*buffer).st; seen[st] {
					t.Errorf("%d replicas, donate %v: replica %d output %d shares storage with another output", replicas, donate, r, i)
				} else {
					seen[st] = true
				}
			}
			for _, o := range outs {
				if err := gb.BufferFinalize(o); err != nil {
					t.Fatal(err)
				}
			}
		}
		exec.Finalize()
	}
}
