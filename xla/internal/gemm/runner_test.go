package gemm

import (
	"context"
	"math"
	"math/rand/v2"
	"sync"
	"testing"
)

// seqRunner runs the parts one after another on the caller (allowed: the parts of a call never
// wait for each other) and records each call's part count.
type seqRunner struct{ calls []int }

func (r *seqRunner) Run(n int, part func(w int)) {
	r.calls = append(r.calls, n)
	for w := range n {
		part(w)
	}
}

// goRunner runs each part on a goroutine of its own, started for the call.
type goRunner struct{}

func (goRunner) Run(n int, part func(w int)) {
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() { part(w) })
	}
	wg.Wait()
}

// TestRunner checks that a Pool with Config.Runner hands every parallel call to it, with the
// call's worker count, and gets the bits of a Pool that starts its own goroutines: split by rows,
// by columns and by batch items, in float32, bfloat16 and bfloat16 out. A call too small to
// split runs on the caller without the runner.
func TestRunner(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 4))
	seq := &seqRunner{}
	runners := []Runner{seq, goRunner{}}
	cases := []struct {
		op    Op
		batch Batch
	}{
		{Op{M: 300, N: 70, K: 300}, Batch{}},                                               // rows
		{Op{M: 40, N: 500, K: 260, TransA: true}, Batch{}},                                 // columns
		{Op{M: 64, N: 80, K: 96, TransB: true}, Batch{Count: 3, StrideA: -1, StrideB: -1}}, // items
	}
	own := newTestPool(t, KernelAuto, 2, false)
	for ri, r := range runners {
		p, err := NewPool(Config{Threads: 2, Runner: r})
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range cases {
			for _, mode := range []string{"float32", "bf16", "bf16out"} {
				tc := newCase(rng, cs.op, cs.batch, 1, 0, 2, mode != "float32")
				var got, want []float32
				for _, pool := range []*Pool{p, own} {
					c := append([]float32(nil), tc.c...)
					var err error
					switch mode {
					case "float32":
						err = pool.Float32Batched(ctx, tc.op, tc.batch, tc.a, tc.b, c)
					case "bf16":
						err = pool.BFloat16Batched(ctx, tc.op, tc.batch, toBF16(tc.a), toBF16(tc.b), c)
					case "bf16out":
						c16 := toBF16(c)
						err = pool.BFloat16OutBatched(ctx, tc.op, tc.batch, toBF16(tc.a), toBF16(tc.b), c16)
						c = fromBF16(c16)
					}
					if err != nil {
						t.Fatalf("runner %d %s %+v: %v", ri, mode, tc.op, err)
					}
					if got == nil {
						got = c
					} else {
						want = c
					}
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
						t.Fatalf("runner %d %s %+v: element %d = %v, own goroutines %v", ri, mode, tc.op, i, got[i], want[i])
					}
				}
			}
		}
	}
	if len(seq.calls) != len(cases)*3 {
		t.Fatalf("runner got %d calls, want %d", len(seq.calls), len(cases)*3)
	}
	for _, n := range seq.calls {
		if n != 2 {
			t.Fatalf("runner calls %v, want 2 workers each", seq.calls)
		}
	}
	// Too small to split: no runner call.
	p, _ := NewPool(Config{Threads: 2, Runner: seq})
	before := len(seq.calls)
	if err := p.Float32(ctx, Op{M: 8, N: 8, K: 8}, make([]float32, 64), make([]float32, 64), make([]float32, 64)); err != nil {
		t.Fatal(err)
	}
	if len(seq.calls) != before {
		t.Fatal("a call too small to split went to the runner")
	}
}
