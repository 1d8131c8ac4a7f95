package gemm

import (
	"context"
	"math/rand/v2"
	"testing"
)

// FuzzShapes checks random shapes, layouts, strides, thread counts, blockings
// and kernels against the float64 reference. Dimensions are folded into
// [0, 80) (K into [0, 300)) so each case stays fast while still crossing tile
// and (with tiny blocking) block boundaries.
func FuzzShapes(f *testing.F) {
	f.Add(uint16(1), uint16(1), uint16(1), uint8(0), uint8(0), uint64(1))
	f.Add(uint16(7), uint16(129), uint16(1), uint8(3), uint8(5), uint64(2))
	f.Add(uint16(13), uint16(33), uint16(257), uint8(12), uint8(0x33), uint64(3))
	f.Add(uint16(0), uint16(5), uint16(9), uint8(7), uint8(1), uint64(4))
	ctx := context.Background()
	av := Available()
	f.Fuzz(func(t *testing.T, m, n, k uint16, flags, pads uint8, seed uint64) {
		p, kern, tc := fuzzCase(t, av, m, n, k%300, flags, pads, seed, false)
		if err := p.Float32Batched(ctx, tc.op, tc.batch, tc.a, tc.b, tc.c); err != nil {
			t.Fatalf("%+v %+v kernel %v: %v", tc.op, tc.batch, kern, err)
		}
		tc.check(t, tc.c, 0)
	})
}

// FuzzBFloat16 is FuzzShapes for the bfloat16 entry points: every kernel this
// CPU runs (so both the AVX512-BF16 kernel and the widening path where
// available), random shapes with odd and even K (folded into [0, 600) so K
// crosses the 256-value kc blocks), layouts, strides, batch
// broadcasting, tiny blockings and float32 or bfloat16 C.
func FuzzBFloat16(f *testing.F) {
	f.Add(uint16(1), uint16(1), uint16(1), uint8(0), uint8(0), uint64(1), false)
	f.Add(uint16(13), uint16(33), uint16(513), uint8(3), uint8(5), uint64(2), true)
	f.Add(uint16(31), uint16(2), uint16(64), uint8(0x0c), uint8(0x33), uint64(3), false)
	f.Add(uint16(2), uint16(79), uint16(33), uint8(0x87), uint8(0xe1), uint64(4), true)
	ctx := context.Background()
	av := Available()
	f.Fuzz(func(t *testing.T, m, n, k uint16, flags, pads uint8, seed uint64, bf16Out bool) {
		p, kern, tc := fuzzCase(t, av, m, n, k%600, flags, pads, seed, true)
		a16, b16 := toBF16(tc.a), toBF16(tc.b)
		if !bf16Out {
			if err := p.BFloat16Batched(ctx, tc.op, tc.batch, a16, b16, tc.c); err != nil {
				t.Fatalf("%+v %+v kernel %v: %v", tc.op, tc.batch, kern, err)
			}
			tc.check(t, tc.c, 0)
			return
		}
		for i := range tc.c {
			tc.c[i] = BF16ToFloat32(Float32ToBF16(tc.c[i]))
		}
		tc.cOld = append(tc.cOld[:0], tc.c...)
		c16 := toBF16(tc.c)
		if err := p.BFloat16OutBatched(ctx, tc.op, tc.batch, a16, b16, c16); err != nil {
			t.Fatalf("%+v %+v kernel %v: %v", tc.op, tc.batch, kern, err)
		}
		tc.check(t, fromBF16(c16), 1.0/256)
	})
}

// fuzzCase decodes a fuzz input shared by the fuzz targets into a pool and a
// test case: M and N folded into [0, 80), K as given; flags pick the
// transposes, Accumulate, the kernel (of av), the thread count and tiny
// blockings; pads pick the leading-dimension padding, the batch count and a
// broadcast B.
func fuzzCase(t *testing.T, av []Kernel, m, n, k uint16, flags, pads uint8, seed uint64, bf16 bool) (*Pool, Kernel, *testCase) {
	t.Helper()
	op := Op{M: int(m % 80), N: int(n % 80), K: int(k),
		TransA: flags&1 != 0, TransB: flags&2 != 0, Accumulate: flags&4 != 0}
	kern := av[int(flags>>3)%len(av)]
	p := newTestPool(t, kern, 1+int(flags>>5)%3, flags&0x80 != 0)
	rng := rand.New(rand.NewPCG(seed, uint64(flags)))
	batch := Batch{Count: 1 + int(pads>>6), StrideA: -1, StrideB: -1}
	if pads&0x20 != 0 {
		batch.StrideB = 0 // broadcast B over the batch
	}
	return p, kern, newCase(rng, op, batch, int(pads&3), int(pads>>2&3), int(pads>>4&1), bf16)
}
