package gemm

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestDirectOperands checks the in-place operands against the packed path bit for bit: the
// strided kernel must do the packed kernel's FMAs in the same order. The shapes read A in place
// (N at most directMaxTiles tiles), B in place (M at most directMaxTiles tiles, B not
// transposed) or both, with partial row and column panels (packed), K across kc blocks,
// padded strides (NaN padding poisons any read outside the matrices), accumulation and
// batches split by item, on the default and the tiny blocking.
func TestDirectOperands(t *testing.T) {
	ctx := context.Background()
	shapes := [][3]int{ // M, N, K
		{512, 64, 512}, {100, 50, 300}, {64, 512, 300}, {24, 64, 257}, {60, 190, 31}, {13, 33, 1}, {96, 200, 64},
	}
	for _, tiny := range []bool{false, true} {
		direct := newTestPool(t, KernelAVX512, 2, tiny)
		packed := newTestPool(t, KernelAVX512, 2, tiny)
		if direct.spec.f32.strided == nil {
			t.Skip("no strided kernel in this build")
		}
		packed.spec.f32.strided = nil
		rng := rand.New(rand.NewPCG(7, 8))
		var onlyA, onlyB, both int
		for _, s := range shapes {
			for variant := range 8 {
				op := Op{M: s[0], N: s[1], K: s[2], TransA: variant&1 != 0, TransB: variant&2 != 0, Accumulate: variant&4 != 0}
				batch := Batch{Count: 1 + variant%3, StrideA: -1, StrideB: -1, StrideC: 3}
				tc := newCase(rng, op, batch, variant%2, 2*(variant%2), 1, false)
				d := directOperands(&direct.spec.f32, &tc.op, operand{f32: tc.a}, operand{f32: tc.b}, op.M, op.N)
				switch {
				case d.a != nil && d.b != nil:
					both++
				case d.a != nil:
					onlyA++
				case d.b != nil:
					onlyB++
				}
				got := append([]float32(nil), tc.c...)
				if err := direct.Float32Batched(ctx, tc.op, tc.batch, tc.a, tc.b, got); err != nil {
					t.Fatalf("%+v: %v", tc.op, err)
				}
				want := append([]float32(nil), tc.c...)
				if err := packed.Float32Batched(ctx, tc.op, tc.batch, tc.a, tc.b, want); err != nil {
					t.Fatalf("%+v: %v", tc.op, err)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("tiny=%v %+v %+v: element %d is %v in place, %v packed", tiny, tc.op, tc.batch, i, got[i], want[i])
					}
				}
				tc.check(t, got, 0)
			}
		}
		if onlyA == 0 || onlyB == 0 || both == 0 {
			t.Fatalf("tiny=%v: cases with only A, only B and both in place: %d, %d, %d; want each > 0", tiny, onlyA, onlyB, both)
		}
	}
}

// BenchmarkDirectOperands measures the attention products of the GPT-2 124M step (batch 2, 12
// heads, sequence 512, head size 64; the operands' real strides) with operands read in place
// against the same pool with packing only, alternating the two in every iteration so that
// both see the same machine: P·V (A in place), dS^T·Q (transposed A in place) and dO^T·P (B in
// place). It reports each path's GFLOP/s and their ratio.
func BenchmarkDirectOperands(b *testing.B) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 1))
	direct := newTestPool(b, KernelAVX512, 2, false)
	if direct.spec.f32.strided == nil {
		b.Skip("no strided kernel in this build")
	}
	packed := newTestPool(b, KernelAVX512, 2, false)
	packed.spec.f32.strided = nil
	const heads, seq, hd = 12, 512, 64
	scores := randSlice(2*heads*seq*seq, rng) // [2 12 512 512]
	act := randSlice(2*seq*heads*hd, rng)     // [2 512 12 64]
	out := make([]float32, 2*heads*seq*seq)   // room for any of the outputs
	// scoresTimesAct is the product of the scores (transposed or not) with the activations, per
	// batch item and head: P·V, or dSᵀ·Q.
	scoresTimesAct := func(transA bool) func(p *Pool) error {
		return func(p *Pool) error {
			for i := range 2 {
				op := Op{M: seq, N: hd, K: seq, TransA: transA, LDB: heads * hd, LDC: hd}
				bt := Batch{Count: heads, StrideA: seq * seq, StrideB: hd, StrideC: seq * hd}
				if err := p.Float32Batched(ctx, op, bt, scores[i*heads*seq*seq:], act[i*seq*heads*hd:], out[i*heads*seq*hd:]); err != nil {
					return err
				}
			}
			return nil
		}
	}
	products := []struct {
		name string
		run  func(p *Pool) error
	}{
		{"PV", scoresTimesAct(false)},
		{"dSTQ", scoresTimesAct(true)},
		{"dOTP", func(p *Pool) error {
			for i := range 2 {
				op := Op{M: hd, N: seq, K: seq, TransA: true, LDA: heads * hd, LDC: seq}
				bt := Batch{Count: heads, StrideA: hd, StrideB: seq * seq, StrideC: hd * seq}
				if err := p.Float32Batched(ctx, op, bt, act[i*seq*heads*hd:], scores[i*heads*seq*seq:], out[i*heads*hd*seq:]); err != nil {
					return err
				}
			}
			return nil
		}},
	}
	for _, pr := range products {
		b.Run(pr.name, func(b *testing.B) {
			var tDirect, tPacked float64
			for i := 0; b.Loop(); i++ {
				for k := range 2 {
					p, acc := direct, &tDirect
					if (i+k)%2 == 1 {
						p, acc = packed, &tPacked
					}
					start := time.Now()
					if err := pr.run(p); err != nil {
						b.Fatal(err)
					}
					*acc += float64(time.Since(start).Nanoseconds())
				}
			}
			flop := 2.0 * seq * seq * hd * 2 * heads * float64(b.N)
			b.ReportMetric(flop/tDirect, "direct-GFLOP/s")
			b.ReportMetric(flop/tPacked, "packed-GFLOP/s")
			b.ReportMetric(tPacked/tDirect, "direct/packed")
		})
	}
}
