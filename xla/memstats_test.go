//go:build !noxla

package xla

import (
	"context"
	"errors"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestProgramMemoryStatsOnXLACPU compiles small programs on XLA's CPU PJRT plugin and checks the
// compiler's figures against the programs' shapes: arguments and outputs are exactly the bytes of
// the input and output shapes.
func TestProgramMemoryStatsOnXLACPU(t *testing.T) {
	rt := openCPUPlugin(t, 1)

	prog, err := rt.Compile("memstats", func(x, y *graph.Node) []*graph.Node {
		h := graph.Tanh(graph.Dot(x, y)) // [64,16] float32
		return []*graph.Node{h, graph.ReduceAllSum(h)}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	if _, err := prog.MemoryStats(); !errors.Is(err, ErrMemoryStatsUnavailable) {
		t.Fatalf("MemoryStats before the first Run: %v, want ErrMemoryStatsUnavailable", err)
	}
	x := tensors.FromShape(shapes.Make(dtypes.Float32, 64, 32))
	y := tensors.FromShape(shapes.Make(dtypes.Float32, 32, 16))
	outs, err := prog.Run(x, y)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range outs {
		o.FinalizeAll()
	}
	m, err := prog.MemoryStats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("compiler figures: %v", m)
	if want := int64(64*32*4 + 32*16*4); m.Argument != want {
		t.Errorf("argument bytes %d, want %d (the inputs' shapes)", m.Argument, want)
	}
	// Two outputs come back as a tuple: its index table (one 8-byte pointer per element) counts
	// in the output too.
	if want := int64(64*16*4 + 4 + 2*8); m.Output != want {
		t.Errorf("output bytes %d, want %d (the outputs' shapes and the tuple's 2 pointers)", m.Output, want)
	}
	if m.GeneratedCode < 0 || m.Temp < 0 || m.Alias != 0 {
		t.Errorf("implausible figures: %v", m)
	}
	if m.Total() != m.Argument+m.Output+m.Temp+m.GeneratedCode {
		t.Errorf("Total %d is not the sum of %v", m.Total(), m)
	}

	// One output: no tuple.
	single, err := rt.Compile("memstats-single", func(x *graph.Node) *graph.Node { return graph.Exp(x) })
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	outs, err = single.Run(tensors.FromShape(shapes.Make(dtypes.Float32, 8, 128)))
	if err != nil {
		t.Fatal(err)
	}
	outs[0].FinalizeAll()
	if m, err = single.MemoryStats(); err != nil {
		t.Fatal(err)
	}
	t.Logf("compiler figures, one output: %v", m)
	if m.Argument != 8*128*4 || m.Output != 8*128*4 {
		t.Errorf("one output: argument %d, output %d bytes, want %d each", m.Argument, m.Output, 8*128*4)
	}

	// The pure-Go backend has no compiler figures: an error, not zeros.
	gort, err := Open(context.Background(), Config{Device: DeviceGo})
	if err != nil {
		t.Fatal(err)
	}
	defer gort.Close()
	gp, err := gort.Compile("memstats-go", func(x *graph.Node) *graph.Node { return graph.Neg(x) })
	if err != nil {
		t.Fatal(err)
	}
	defer gp.Close()
	outs, err = gp.Run(tensors.FromShape(shapes.Make(dtypes.Float32, 4)))
	if err != nil {
		t.Fatal(err)
	}
	outs[0].FinalizeAll()
	if _, err := gp.MemoryStats(); !errors.Is(err, ErrMemoryStatsUnavailable) {
		t.Fatalf("MemoryStats on the pure-Go backend: %v, want ErrMemoryStatsUnavailable", err)
	}
}
