package xla

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestManyIndependentDotGeneralsFinish pins the GoMLX trap: SimpleGo's default executor deadlocked
// here when several DotGenerals were ready at once. gotpu's runtime must finish such a graph.
func TestManyIndependentDotGeneralsFinish(t *testing.T) {
	rt := openTestRuntime(t, Config{Device: DeviceGo})
	prog, err := rt.Compile("parallel-dots", func(x *graph.Node) *graph.Node {
		sum := graph.ReduceAllSum(x)
		for i := range 16 { // 16 independent matmuls, all ready at once.
			y := graph.MulScalar(x, float64(i+1))
			sum = graph.Add(sum, graph.ReduceAllSum(graph.DotGeneral(y, []int{1}, nil, x, []int{0}, nil)))
		}
		return sum
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	data := make([]float32, 256*256)
	for i := range data {
		data[i] = float32(i%7) / 7
	}
	done := make(chan error, 1)
	go func() {
		for range 5 {
			if _, err := prog.Run(tensors.FromFlatDataAndDimensions(data, 256, 256)); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("graph with independent DotGenerals did not finish: executor deadlock")
	}
	if n := prog.Compilations(); n != 1 {
		t.Errorf("Compilations = %d after 5 runs of one shape, want 1", n)
	}
}

// TestGraphBuildingPanicIsError: GoMLX reports shape errors by panicking; gotpu returns them.
func TestGraphBuildingPanicIsError(t *testing.T) {
	rt := openTestRuntime(t, Config{Device: DeviceGo})
	prog, err := rt.Compile("bad-shapes", func(a, b *graph.Node) *graph.Node {
		return graph.DotGeneral(a, []int{1}, nil, b, []int{0}, nil) // 3 vs 4: mismatch
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	_, err = prog.Run([][]float32{{1, 2, 3}}, [][]float32{{1}, {2}, {3}, {4}})
	if err == nil {
		t.Fatal("mismatched DotGeneral did not fail")
	}
	if !strings.Contains(err.Error(), "bad-shapes") {
		t.Errorf("error does not name the program: %v", err)
	}
	// A panic with a non-error value is caught too.
	err = Call("test", func() error { panic("boom") })
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "boom" || len(pe.Stack) == 0 {
		t.Fatalf("Call(panic) = %#v", err)
	}
}

// TestCompilationsCounted: each new input shape is a new compilation, and gotpu counts it.
func TestCompilationsCounted(t *testing.T) {
	rt := openTestRuntime(t, Config{Device: DeviceGo})
	prog, err := rt.Compile("double", func(x *graph.Node) *graph.Node { return graph.MulScalar(x, 2) })
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	for _, v := range []any{[]float32{1, 2}, []float32{3, 4}, []float32{1, 2, 3}} {
		out, err := prog.Run(v)
		if err != nil {
			t.Fatal(err)
		}
		got := tensors.MustCopyFlatData[float32](out[0])
		want := v.([]float32)
		for i := range want {
			if got[i] != 2*want[i] {
				t.Fatalf("double(%v) = %v", want, got)
			}
		}
	}
	if n := prog.Compilations(); n != 2 {
		t.Errorf("Compilations = %d, want 2 (two distinct shapes)", n)
	}
}
