package gemm

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// testCase is one product with its stored operands, built so that every
// element outside the logical matrices is a sentinel: NaN in A and B padding
// (a kernel reading it poisons the result) and a fixed value in C padding
// (a kernel writing it is caught by checkC).
type testCase struct {
	op      Op
	a, b, c []float32 // float32 storage (also the exact values of bf16 inputs)
	cOld    []float32
	batch   Batch
}

// cSentinel is bfloat16-representable so it survives the bfloat16-output tests.
const cSentinel = -1152

// newCase builds random operands for op with row padding padA/padB/padC.
// batch.StrideA/B of -1 mean tight; batch.StrideC is the gap between outputs.
func newCase(rng *rand.Rand, op Op, batch Batch, padA, padB, padC int, bf16 bool) *testCase {
	aRows, aCols := op.M, op.K
	if op.TransA {
		aRows, aCols = op.K, op.M
	}
	bRows, bCols := op.K, op.N
	if op.TransB {
		bRows, bCols = op.N, op.K
	}
	op.LDA, op.LDB, op.LDC = max(aCols, 1)+padA, max(bCols, 1)+padB, max(op.N, 1)+padC
	extA, _ := extent(aRows, aCols, op.LDA)
	extB, _ := extent(bRows, bCols, op.LDB)
	extC, _ := extent(op.M, op.N, op.LDC)
	if batch.Count == 0 {
		batch.Count = 1
	}
	if batch.StrideA == -1 { // tight
		batch.StrideA = extA
	}
	if batch.StrideB == -1 {
		batch.StrideB = extB
	}
	batch.StrideC += extC // the caller's StrideC is the gap between outputs
	fill := func(rows, cols, ld, stride int, pad float32) []float32 {
		total, _ := batchedExtent(batch.Count, stride, extentOr0(rows, cols, ld))
		s := make([]float32, total+3) // +3: trailing slack the call must not touch
		for i := range s {
			s[i] = pad
		}
		for bi := 0; bi < batch.Count; bi++ {
			for r := 0; r < rows; r++ {
				for x := 0; x < cols; x++ {
					v := float32(rng.NormFloat64())
					if bf16 {
						v = BF16ToFloat32(Float32ToBF16(v))
					}
					s[bi*stride+r*ld+x] = v
				}
			}
		}
		return s
	}
	tc := &testCase{op: op, batch: batch}
	nan := float32(math.NaN())
	tc.a = fill(aRows, aCols, op.LDA, batch.StrideA, nan)
	tc.b = fill(bRows, bCols, op.LDB, batch.StrideB, nan)
	tc.c = fill(op.M, op.N, op.LDC, batch.StrideC, cSentinel)
	tc.cOld = append([]float32(nil), tc.c...)
	return tc
}

func extentOr0(rows, cols, ld int) int { e, _ := extent(rows, cols, ld); return e }

// check compares got (same layout as tc.c) against a float64 reference and
// verifies that no element outside C was written, failing the test on the
// first problems. The tolerance per element is
//
//	4·sqrt(K+1)·eps32·(Σ_p |a_ip·b_pj| + |C_old|)  (+ outRel·|ref| for bfloat16 C)
//
// i.e. the usual random-walk bound for a float32 dot product of length K,
// with a factor of 4 of headroom; outRel = 2^-8 covers a bfloat16 output's one
// rounding (half an ulp of an 8-bit significand). Both the float32 kernels on
// widened inputs and VDPBF16PS (which adds each exact bfloat16 product with
// one float32 rounding, like an FMA) meet it; TestCheckDetects shows that it
// still catches one missing product term of typical size.
func (tc *testCase) check(t *testing.T, got []float32, outRel float64) {
	t.Helper()
	if bad, msgs := tc.mismatches(got, outRel); bad > 0 {
		for _, m := range msgs {
			t.Error(m)
		}
		t.Fatalf("%d bad elements for %+v batch %+v", bad, tc.op, tc.batch)
	}
}

// mismatches is check's comparison: the number of bad elements and messages
// for the first few.
func (tc *testCase) mismatches(got []float32, outRel float64) (bad int, msgs []string) {
	op := tc.op
	eps := float64(math.Nextafter32(1, 2) - 1)
	inC := make([]bool, len(got))
	report := func(format string, args ...any) {
		if bad < 5 {
			msgs = append(msgs, fmt.Sprintf(format, args...))
		}
		bad++
	}
	for bi := 0; bi < tc.batch.Count; bi++ {
		for i := 0; i < op.M; i++ {
			for j := 0; j < op.N; j++ {
				idx := bi*tc.batch.StrideC + i*op.LDC + j
				inC[idx] = true
				var sum, mag float64
				for p := 0; p < op.K; p++ {
					x := tc.aAt(bi, i, p) * tc.bAt(bi, p, j)
					sum += x
					mag += math.Abs(x)
				}
				if op.Accumulate {
					old := float64(tc.cOld[idx])
					sum += old
					mag += math.Abs(old)
				}
				tol := 4*math.Sqrt(float64(op.K+1))*eps*mag + outRel*math.Abs(sum)
				if d := math.Abs(float64(got[idx]) - sum); !(d <= tol) {
					report("batch %d C[%d,%d] = %v, want %v (|diff| %.3g > tol %.3g)", bi, i, j, got[idx], sum, d, tol)
				}
			}
		}
	}
	for idx, v := range got {
		if !inC[idx] && v != cSentinel {
			report("element %d outside C was written: %v", idx, v)
		}
	}
	return bad, msgs
}

// aAt and bAt read op(A)[i, p] and op(B)[p, j] of batch item bi.
func (tc *testCase) aAt(bi, i, p int) float64 {
	base := bi * tc.batch.StrideA
	if tc.op.TransA {
		return float64(tc.a[base+p*tc.op.LDA+i])
	}
	return float64(tc.a[base+i*tc.op.LDA+p])
}

func (tc *testCase) bAt(bi, p, j int) float64 {
	base := bi * tc.batch.StrideB
	if tc.op.TransB {
		return float64(tc.b[base+j*tc.op.LDB+p])
	}
	return float64(tc.b[base+p*tc.op.LDB+j])
}

func toBF16(s []float32) []uint16 {
	out := make([]uint16, len(s))
	for i, v := range s {
		out[i] = Float32ToBF16(v)
	}
	return out
}

func fromBF16(s []uint16) []float32 {
	out := make([]float32, len(s))
	for i, v := range s {
		out[i] = BF16ToFloat32(v)
	}
	return out
}

// newTestPool returns a Pool for kernel k, skipping the test when this CPU
// cannot run k. tiny shrinks the blocking so that small matrices cross every
// mc/kc/nc block boundary.
func newTestPool(t testing.TB, k Kernel, threads int, tiny bool) *Pool {
	t.Helper()
	p, err := NewPool(Config{Threads: threads, Kernel: k})
	if err != nil {
		t.Skipf("kernel %v: %v", k, err)
	}
	if tiny {
		f, b := &p.spec.f32, &p.spec.bf16
		f.kc, f.mc, f.nc = 5, 2*f.mr, 2*f.nr
		b.kc, b.mc, b.nc = 5, 2*b.mr, 2*b.nr
	}
	return p
}

var allKernels = []Kernel{KernelAVX512BF16, KernelAVX512, KernelAVX2, KernelGeneric}

func kernelName(k Kernel, threads int, tiny bool) string {
	return fmt.Sprintf("%v/threads=%d/tiny=%v", k, threads, tiny)
}
