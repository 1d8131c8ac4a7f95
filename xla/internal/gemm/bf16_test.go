package gemm

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// bf16Paths are the two ways a bfloat16 product runs: the AVX512-BF16 kernel
// and the widening of bfloat16 to float32 for the float32 AVX-512 kernel (the
// path of CPUs without AVX512-BF16; KernelAVX2 and KernelGeneric take it too
// and are covered by TestBFloat16). A CPU without the first skips it.
var bf16Paths = []Kernel{KernelAVX512BF16, KernelAVX512}

// nativeBF16 reports whether p runs bfloat16 inputs on the AVX512-BF16 kernel
// (denormals are zero) rather than widening them to float32 (exact).
func nativeBF16(p *Pool) bool { return p.spec.bf16.fn != nil }

// TestBF16PathsSelectable checks that KernelAuto picks the AVX512-BF16 kernel
// where the CPU has it and that the widening path stays selectable.
func TestBF16PathsSelectable(t *testing.T) {
	p, err := NewPool(Config{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewPool(Config{Kernel: KernelAVX512})
	if err == nil && nativeBF16(w) {
		t.Errorf("KernelAVX512 runs bfloat16 on the BF16 kernel; it must widen")
	}
	native, err := NewPool(Config{Kernel: KernelAVX512BF16})
	if err != nil {
		t.Skipf("no AVX512-BF16 kernel here (%v); auto picked %v", err, p.Kernel())
	}
	if !nativeBF16(native) {
		t.Errorf("KernelAVX512BF16 does not run the BF16 kernel")
	}
	if p.Kernel() != KernelAVX512BF16 || !nativeBF16(p) {
		t.Errorf("auto picked %v, want %v", p.Kernel(), KernelAVX512BF16)
	}
	if av := Available(); av[0] != KernelAVX512BF16 || av[1] != KernelAVX512 {
		t.Errorf("Available() = %v, want avx512bf16 then avx512 first", av)
	}
}

// TestCheckDetects shows that the reference comparison the bfloat16 tests
// rely on fails on a deliberately wrong result: one product term missing from
// one element (what a packing or kernel bug that drops or misplaces a value
// produces), for K up to 1000, and a write outside C.
func TestCheckDetects(t *testing.T) {
	ctx := context.Background()
	p := newTestPool(t, KernelAuto, 1, false)
	rng := rand.New(rand.NewPCG(8, 9))
	for _, s := range [][3]int{{7, 9, 2}, {13, 33, 31}, {5, 3, 1000}} {
		op := Op{M: s[0], N: s[1], K: s[2], TransB: true}
		tc := newCase(rng, op, Batch{}, 1, 1, 1, true)
		a16, b16 := toBF16(tc.a), toBF16(tc.b)
		if err := p.BFloat16(ctx, tc.op, a16, b16, tc.c); err != nil {
			t.Fatal(err)
		}
		if bad, msgs := tc.mismatches(tc.c, 0); bad != 0 {
			t.Fatalf("%v: correct result rejected: %v", s, msgs)
		}
		// Drop a term of median magnitude from C[i, j]. (A term far below
		// the tolerance, ~1e-5 of Σ|terms| at K = 1000, cannot be seen, by
		// design: float32 accumulation may lose that much.)
		i, j := op.M-1, op.N/2
		terms := make([]float64, op.K)
		for q := range terms {
			terms[q] = math.Abs(tc.aAt(0, i, q) * tc.bAt(0, q, j))
		}
		slices.Sort(terms)
		wrong := append([]float32(nil), tc.c...)
		idx := i*tc.op.LDC + j
		wrong[idx] = float32(float64(wrong[idx]) - terms[op.K/2])
		if bad, _ := tc.mismatches(wrong, 0); bad != 1 {
			t.Errorf("%v: a missing product term (%.3g) in C[%d,%d] gave %d mismatches, want 1", s, terms[op.K/2], i, j, bad)
		}
		// The bfloat16-output tolerance still sees one bfloat16 ulp too many
		// on a result that is not tiny.
		ulp := math.Abs(float64(tc.c[idx])) / 128
		wrong[idx] = float32(float64(tc.c[idx]) + 2*ulp)
		if bad, _ := tc.mismatches(wrong, 1.0/256); bad != 1 {
			t.Errorf("%v: C[%d,%d] two bfloat16 ulps off gave %d mismatches under the bfloat16-output tolerance, want 1", s, i, j, bad)
		}
		wrong = append(wrong[:0], tc.c...)
		wrong[len(wrong)-1] = 0 // slack after C
		if bad, _ := tc.mismatches(wrong, 0); bad != 1 {
			t.Errorf("%v: a write after C gave %d mismatches, want 1", s, bad)
		}
	}
}

// TestBF16SpecialValues checks NaN, ±Inf, overflow and denormal inputs on
// both bfloat16 paths, every transpose combination, odd and even K, float32
// and bfloat16 outputs. The expectation is a float64 reference with IEEE
// semantics; for the BF16 kernel, denormal inputs count as zero and a
// denormal result is flushed to zero (VDPBF16PS's DAZ/FTZ), while the
// widening path is exact on them.
func TestBF16SpecialValues(t *testing.T) {
	ctx := context.Background()
	for _, k := range bf16Paths {
		t.Run(k.String(), func(t *testing.T) {
			p := newTestPool(t, k, 2, false)
			daz := nativeBF16(p)
			for _, K := range []int{5, 6, 33} {
				for variant := range 8 {
					op := Op{M: 13, N: 35, K: K, TransA: variant&1 != 0, TransB: variant&2 != 0, Accumulate: variant&4 != 0}
					sc := newSpecialCase(op, uint64(K*8+variant))
					want := sc.reference(daz)

					c32 := append([]float32(nil), sc.cOld...)
					if err := p.BFloat16(ctx, sc.op, sc.a, sc.b, c32); err != nil {
						t.Fatal(err)
					}
					sc.compare(t, "float32 C", c32, want, false)

					c16 := toBF16(sc.cOld)
					if err := p.BFloat16Out(ctx, sc.op, sc.a, sc.b, c16); err != nil {
						t.Fatal(err)
					}
					sc.compare(t, "bfloat16 C", fromBF16(c16), want, true)
				}
			}
		})
	}
}

// specialCase is a product whose logical op(A) (M×K) and op(B) (K×N) hold
// special values at known places, stored in op's layout with padded rows.
type specialCase struct {
	op     Op
	la, lb [][]float32 // logical op(A) and op(B)
	a, b   []uint16    // stored bfloat16
	cOld   []float32   // C before the call (bfloat16-exact)
	mag    []float64   // Σ|terms| per element, for the tolerance
}

const (
	bfDenorm  = 0x0001 // smallest positive bfloat16 denormal, 2^-133
	bfTwo60   = 0x5d80 // 2^60
	bfTwoM70  = 0x1c80 // 2^-70
	bfTwo100  = 0x7180 // 2^100
	bfPlusInf = 0x7f80
	bfNaN     = 0x7fc0
)

func newSpecialCase(op Op, seed uint64) *specialCase {
	rng := rand.New(rand.NewPCG(seed, 11))
	M, N, K := op.M, op.N, op.K
	sc := &specialCase{op: op}
	sc.la = make([][]float32, M)
	for i := range sc.la {
		sc.la[i] = make([]float32, K)
		for q := range sc.la[i] {
			sc.la[i][q] = BF16ToFloat32(Float32ToBF16(float32(rng.NormFloat64())))
		}
	}
	sc.lb = make([][]float32, K)
	for q := range sc.lb {
		sc.lb[q] = make([]float32, N)
		for j := range sc.lb[q] {
			sc.lb[q][j] = BF16ToFloat32(Float32ToBF16(float32(rng.NormFloat64())))
		}
	}
	f := BF16ToFloat32
	// Row 0: +Inf at the last k (the lone value of an odd K's padded pair):
	// C[0, j] = ±Inf by the sign of B[K-1, j]; B[K-1, 0] = 0 makes C[0, 0]
	// NaN (Inf·0).
	sc.la[0][K-1] = f(bfPlusInf)
	sc.lb[K-1][0] = 0
	// Row 1: a NaN poisons the whole row.
	sc.la[1][2] = f(bfNaN)
	// Column 3: -Inf at k = 1 gives ∓Inf by the sign of A[i, 1] (row 0
	// meets +Inf there too: NaN or Inf, as the reference says).
	sc.lb[1][3] = -f(bfPlusInf)
	// Row 4: only a denormal at k = 3, times 2^60 in B: 2^-73, a normal
	// float32 on the widening path, 0 on the BF16 kernel (DAZ).
	// Row 5: only 2^-70 at k = 0, times 2^-70 in B: a denormal float32
	// product, 2^-140 on the widening path, flushed to 0 on the BF16 kernel.
	// Row 6: 2^100 at k = 4 times 2^100: overflows float32 to +Inf.
	for q := range K {
		sc.la[4][q], sc.la[5][q], sc.la[6][q] = 0, 0, 0
	}
	sc.la[4][3], sc.la[5][0], sc.la[6][4] = f(bfDenorm), f(bfTwoM70), f(bfTwo100)
	for j := range N {
		if j != 3 {
			sc.lb[3][j] = f(bfTwo60)
		}
		sc.lb[0][j] = f(bfTwoM70)
		sc.lb[4][j] = f(bfTwo100)
	}
	// Column 7: a denormal in B at every k with rows 8.. finite: contributes
	// nothing measurable either way, but must not turn into NaN.
	for q := range K {
		sc.lb[q][7] = f(bfDenorm)
	}

	// Store in op's layout with one element of padding per row (NaN, which
	// would poison a result if read).
	op.LDA, op.LDB, op.LDC = 1, 1, N+1
	aRows, aCols := M, K
	if op.TransA {
		aRows, aCols = K, M
	}
	bRows, bCols := K, N
	if op.TransB {
		bRows, bCols = N, K
	}
	op.LDA, op.LDB = aCols+1, bCols+1
	sc.a = make([]uint16, aRows*op.LDA)
	sc.b = make([]uint16, bRows*op.LDB)
	for i := range sc.a {
		sc.a[i] = bfNaN
	}
	for i := range sc.b {
		sc.b[i] = bfNaN
	}
	for i := range M {
		for q := range K {
			if op.TransA {
				sc.a[q*op.LDA+i] = Float32ToBF16(sc.la[i][q])
			} else {
				sc.a[i*op.LDA+q] = Float32ToBF16(sc.la[i][q])
			}
		}
	}
	for q := range K {
		for j := range N {
			if op.TransB {
				sc.b[j*op.LDB+q] = Float32ToBF16(sc.lb[q][j])
			} else {
				sc.b[q*op.LDB+j] = Float32ToBF16(sc.lb[q][j])
			}
		}
	}
	sc.op = op
	sc.cOld = make([]float32, M*op.LDC)
	for i := range sc.cOld {
		sc.cOld[i] = cSentinel
		if i%op.LDC < N {
			sc.cOld[i] = BF16ToFloat32(Float32ToBF16(float32(rng.NormFloat64())))
		}
	}
	return sc
}

// reference returns the expected C (layout of sc.cOld) in float64. With daz,
// denormal inputs count as zero and a result below the smallest normal
// float32 is zero, as VDPBF16PS computes them. Overflow past float32 is
// ±Inf.
func (sc *specialCase) reference(daz bool) []float64 {
	op := sc.op
	out := make([]float64, len(sc.cOld))
	sc.mag = make([]float64, len(sc.cOld))
	in := func(v float32) float64 {
		if daz && v != 0 && math.Abs(float64(v)) < 0x1p-126 {
			return 0
		}
		return float64(v)
	}
	for i := range out {
		out[i] = float64(sc.cOld[i])
	}
	for i := range op.M {
		for j := range op.N {
			var sum, mag float64
			for q := range op.K {
				x := in(sc.la[i][q]) * in(sc.lb[q][j])
				sum += x
				mag += math.Abs(x)
			}
			if daz && math.Abs(sum) < 0x1p-126 {
				sum = 0
			}
			if math.Abs(sum) >= 0x1p128 {
				sum = math.Copysign(math.Inf(1), sum)
			}
			idx := i*op.LDC + j
			if op.Accumulate {
				sum += float64(sc.cOld[idx])
				mag += math.Abs(float64(sc.cOld[idx]))
			}
			out[idx], sc.mag[idx] = sum, mag
		}
	}
	return out
}

// compare checks got against want: NaN where want is NaN, the same infinity,
// otherwise within the float32 dot-product tolerance (plus a bfloat16
// rounding, relative and denormal, for a bfloat16 C). Elements outside C must
// be unchanged.
func (sc *specialCase) compare(t *testing.T, what string, got []float32, want []float64, bf16Out bool) {
	t.Helper()
	eps := float64(math.Nextafter32(1, 2) - 1)
	bad := 0
	for idx, g := range got {
		w := want[idx]
		i, j := idx/sc.op.LDC, idx%sc.op.LDC
		var ok bool
		switch {
		case j >= sc.op.N:
			ok = g == cSentinel
		case math.IsNaN(w):
			ok = math.IsNaN(float64(g))
		case math.IsInf(w, 0):
			ok = float64(g) == w
		default:
			// The float32 dot-product bound, plus half the smallest
			// denormal per operation for products that underflow.
			tol := 4*math.Sqrt(float64(sc.op.K+1))*eps*sc.mag[idx] + float64(sc.op.K+1)*0x1p-150
			if bf16Out {
				tol += math.Abs(w)/256 + 0x1p-134
			}
			ok = math.Abs(float64(g)-w) <= tol
		}
		if !ok {
			if bad < 5 {
				t.Errorf("%+v %s: C[%d,%d] = %v, want %v", sc.op, what, i, j, g, w)
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("%d bad elements", bad)
	}
}

// TestPackBF16Widen checks packBF16, with whatever vector code this build and
// CPU use, against packF32 of the widened values, for every packing shape the
// kernels use and the tails around the vector chunks.
func TestPackBF16Widen(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	for _, w := range []int{4, 6, 8, 12, 16, 32} {
		for _, kb := range []int{1, 2, 15, 16, 17, 31, 32, 33, 47, 64, 100} {
			for _, nx := range []int{1, w - 1, w, w + 1, 5*w + 3, 11 * w} {
				if nx < 1 {
					continue
				}
				for _, trans := range []bool{false, true} {
					ld := nx + kb + 3
					src := make([]uint16, (nx+kb+2)*ld)
					for i := range src {
						src[i] = Float32ToBF16(float32(rng.NormFloat64()))
					}
					x0, p0 := 1, 2
					sx, sp := 1, ld // x contiguous
					if trans {
						sx, sp = ld, 1 // k contiguous
					}
					size := ceilDiv(nx, w) * w * kb
					got, want := make([]float32, size+1), make([]float32, size+1)
					for i := range got {
						got[i], want[i] = -7, -7
					}
					packBF16(got, src, x0, p0, nx, kb, w, sx, sp)
					packF32(want, fromBF16(src), x0, p0, nx, kb, w, sx, sp)
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("w=%d kb=%d nx=%d trans=%v: element %d = %v, want %v", w, kb, nx, trans, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// TestPackPairsLayout checks the portable packPairs against the layout
// spelled out element by element: dword (x, q) of panel t is
// A(x, 2q)<<16 | A(x, 2q+1), zero past kb and past nx.
func TestPackPairsLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 15))
	for _, w := range []int{12, 32} {
		for _, kb := range []int{1, 2, 3, 8, 33} {
			for _, nx := range []int{1, w - 1, w, 2*w + 5} {
				for _, trans := range []bool{false, true} {
					ld := nx + kb + 2
					src := make([]uint16, (nx+kb+2)*ld)
					for i := range src {
						src[i] = uint16(rng.Uint32())
					}
					x0, p0 := 2, 1
					sx, sp := 1, ld
					if trans {
						sx, sp = ld, 1
					}
					at := func(x, p int) uint32 {
						if x >= nx || p >= kb {
							return 0
						}
						return uint32(src[(x0+x)*sx+(p0+p)*sp])
					}
					kp := (kb + 1) / 2
					got := make([]uint32, ceilDiv(nx, w)*w*kp)
					packPairs(got, src, x0, p0, nx, kb, w, sx, sp)
					for i, v := range got {
						tile, rest := i/(w*kp), i%(w*kp)
						q, x := rest/w, tile*w+rest%w
						if want := at(x, 2*q)<<16 | at(x, 2*q+1); v != want {
							t.Fatalf("w=%d kb=%d nx=%d trans=%v: dword %d (x=%d, q=%d) = %#x, want %#x", w, kb, nx, trans, i, x, q, v, want)
						}
					}
				}
			}
		}
	}
}

// BenchmarkPackBF16 measures the bfloat16 packing of each layout for both
// paths: pair-interleaved panels (the BF16 kernel; pairs-go is the portable
// Go packer for comparison) and widened float32 panels (the fallback), on a
// 1020×256 A block (12-row panels) and a 256×512 B block (32-column panels),
// as bytes of bfloat16 input per second.
func BenchmarkPackBF16(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	ld := 4096
	src := toBF16(randSlice(1024*ld, rng))
	pairs := make([]uint32, 1024*256)
	wide := make([]float32, 1024*512)
	for _, c := range []struct {
		name      string
		nx, kb, w int
		sx, sp    int
	}{
		{"A/rows-contiguous-along-k", 1020, 256, 12, ld, 1},
		{"A/transposed", 1020, 256, 12, 1, ld},
		{"B/rows-contiguous-along-n", 512, 256, 32, 1, ld},
		{"B/transposed", 512, 256, 32, ld, 1},
	} {
		b.Run(fmt.Sprintf("pairs/%s", c.name), func(b *testing.B) {
			b.SetBytes(int64(c.nx * c.kb * 2))
			for b.Loop() {
				packBF16Pairs(pairs, src, 0, 0, c.nx, c.kb, c.w, c.sx, c.sp)
			}
		})
		b.Run(fmt.Sprintf("pairs-go/%s", c.name), func(b *testing.B) {
			b.SetBytes(int64(c.nx * c.kb * 2))
			for b.Loop() {
				packPairs(pairs, src, 0, 0, c.nx, c.kb, c.w, c.sx, c.sp)
			}
		})
		b.Run(fmt.Sprintf("widen/%s", c.name), func(b *testing.B) {
			b.SetBytes(int64(c.nx * c.kb * 2))
			for b.Loop() {
				packBF16(wide, src, 0, 0, c.nx, c.kb, c.w, c.sx, c.sp)
			}
		})
	}
}

// packBF16Pairs is the fastest pair packer of this build and CPU (set by
// bf16_amd64_test.go), for BenchmarkPackBF16.
var packBF16Pairs = packPairs

// TestStoreBF16 checks the bfloat16 output store (vector code where the build
// and CPU have it) bit for bit against Float32ToBF16: every upper half with
// low halves at and around the rounding tie (so every NaN payload, ±Inf,
// denormals, overflow to Inf and ties to even), with and without adding an
// old bfloat16 value (special ones included), at lengths that leave a tail
// for the scalar code.
func TestStoreBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 21))
	var src []float32
	for hi := range 1 << 16 {
		for _, lo := range []uint32{0, 1, 0x7fff, 0x8000, 0x8001, 0xffff, rng.Uint32() & 0xffff} {
			src = append(src, math.Float32frombits(uint32(hi)<<16|lo))
		}
	}
	olds := []uint16{0, 0x8000, 0x3f80, 0xbf80, 0x7f80, 0xff80, 0x7fc0, 0x0001, 0x7f7f}
	for _, n := range []int{len(src), 15, 33} {
		for _, acc := range []bool{false, true} {
			got, want := make([]uint16, n+1), make([]uint16, n+1)
			for i := range got {
				got[i] = olds[i%len(olds)]
				if i%7 == 0 {
					got[i] = uint16(rng.Uint32())
				}
				want[i] = got[i]
			}
			storeBF16(got, src[:n], acc)
			storeBF16Go(want, src[:n], acc)
			for i := range got {
				// Adding two NaNs keeps either payload (Go does not say
				// which); both must still be NaN.
				bothNaN := got[i]&0x7fff > 0x7f80 && want[i]&0x7fff > 0x7f80
				if got[i] != want[i] && !(acc && bothNaN) {
					t.Fatalf("n=%d accumulate=%v: element %d (src %#08x) = %#04x, want %#04x",
						n, acc, i, math.Float32bits(src[min(i, n-1)]), got[i], want[i])
				}
			}
		}
	}
}

// TestBF16PathsBitwise: the AVX512-BF16 kernel adds the products in k order
// (the pair's first value is in the high half, which VDPBF16PS adds first), so
// on values without denormals it gives the widening path's bits exactly — on
// every layout, odd and even K (513 crosses two 256-value kc blocks), float32 and
// bfloat16 outputs, and with Accumulate.
func TestBF16PathsBitwise(t *testing.T) {
	ctx := context.Background()
	native, err := NewPool(Config{Kernel: KernelAVX512BF16, Threads: 2})
	if err != nil {
		t.Skipf("no AVX512-BF16 kernel here: %v", err)
	}
	widen, err := NewPool(Config{Kernel: KernelAVX512, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(51, 52))
	for _, s := range [][3]int{{1, 1, 1}, {7, 33, 2}, {13, 31, 7}, {37, 70, 129}, {64, 96, 513}} {
		for _, ta := range []bool{false, true} {
			for _, tb := range []bool{false, true} {
				for _, acc := range []bool{false, true} {
					op := Op{M: s[0], N: s[1], K: s[2], TransA: ta, TransB: tb, Accumulate: acc}
					a := toBF16(randSlice(op.M*op.K, rng))
					b := toBF16(randSlice(op.K*op.N, rng))
					c0 := randSlice(op.M*op.N, rng)
					c1, c2 := slices.Clone(c0), slices.Clone(c0)
					if err := native.BFloat16(ctx, op, a, b, c1); err != nil {
						t.Fatal(err)
					}
					if err := widen.BFloat16(ctx, op, a, b, c2); err != nil {
						t.Fatal(err)
					}
					h0 := toBF16(c0)
					h1, h2 := slices.Clone(h0), slices.Clone(h0)
					if err := native.BFloat16Out(ctx, op, a, b, h1); err != nil {
						t.Fatal(err)
					}
					if err := widen.BFloat16Out(ctx, op, a, b, h2); err != nil {
						t.Fatal(err)
					}
					for i := range c1 {
						if math.Float32bits(c1[i]) != math.Float32bits(c2[i]) || h1[i] != h2[i] {
							t.Fatalf("%+v: C[%d] = %g (bf16 %#04x) on the BF16 kernel, %g (%#04x) widened",
								op, i, c1[i], h1[i], c2[i], h2[i])
						}
					}
				}
			}
		}
	}
}
