package gobackend

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
)

// TestBinaryF32Vec: the vector kernels (AVX2 where the CPU has it) give bitwise the portable
// loops' results on awkward lengths (not multiples of the vector width or the 32-lane unroll),
// with NaN, infinities, signed zeros and subnormals among the operands, and in place (dst is a).
func TestBinaryF32Vec(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		math.SmallestNonzeroFloat32, 1e-40, math.MaxFloat32}
	value := func() float32 {
		if rng.IntN(8) == 0 {
			return special[rng.IntN(len(special))]
		}
		return (rng.Float32()*2 - 1) * float32(math.Pow(10, float64(rng.IntN(7)-3)))
	}
	portable := map[backends.OpType]func(x, y float32) float32{
		backends.OpTypeAdd: func(x, y float32) float32 { return x + y },
		backends.OpTypeSub: func(x, y float32) float32 { return x - y },
		backends.OpTypeMul: func(x, y float32) float32 { return x * y },
		backends.OpTypeDiv: func(x, y float32) float32 { return x / y },
		backends.OpTypeMax: func(x, y float32) float32 { return max(x, y) },
		backends.OpTypeMin: func(x, y float32) float32 { return min(x, y) },
	}
	t.Logf("AVX2 kernels in use: %v", vecEnabled())
	forEachVecWidth(t, func(t *testing.T) { checkBinaryKernels(t, portable, value) })
}

// checkBinaryKernels is TestBinaryF32Vec on the kernels selected now.
func checkBinaryKernels(t *testing.T, portable map[backends.OpType]func(x, y float32) float32, value func() float32) {
	for op, f := range portable {
		for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 23, 24, 31, 32, 33, 63, 64, 65, 129, 512, 1000} {
			a, b := make([]float32, n), make([]float32, n)
			for i := range a {
				a[i], b[i] = value(), value()
			}
			want := make([]float32, n)
			for i := range want {
				want[i] = f(a[i], b[i])
			}
			got := make([]float32, n)
			binaryF32(op, got, a, b)
			binaryF32(op, a, a, b) // in place
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(isNaN32(got[i]) && isNaN32(want[i])) {
					t.Fatalf("%s n=%d [%d]: %g op %g = %g, want %g", op, n, i, a[i], b[i], got[i], want[i])
				}
				if math.Float32bits(a[i]) != math.Float32bits(got[i]) && !(isNaN32(a[i]) && isNaN32(got[i])) {
					t.Fatalf("%s n=%d [%d]: in place %g, out of place %g", op, n, i, a[i], got[i])
				}
			}
		}
	}
}

func isNaN32(x float32) bool { return x != x }

// ulps is the distance between two float32s in units in the last place (0 for equal ones,
// including two NaNs; a large number when one is NaN and the other not).
func ulps(a, b float32) int64 {
	if isNaN32(a) || isNaN32(b) {
		if isNaN32(a) && isNaN32(b) {
			return 0
		}
		return math.MaxInt32
	}
	ord := func(x float32) int64 { // monotonic integer order of float32 bit patterns
		i := int64(int32(math.Float32bits(x)))
		if i < 0 {
			i = math.MinInt32 - i
		}
		return i
	}
	d := ord(a) - ord(b)
	if d < 0 {
		d = -d
	}
	return d
}

// TestExpF32Vec: the vector exp (where the CPU has AVX2 and FMA) is within 2 ulps of float64
// math.Exp rounded once — simplego's result — over the whole finite range, exact at the special
// values (NaN, ±Inf, 0, overflow to +Inf, underflow to 0), on every tail length, and below
// FLT_MIN (subnormal results) within 2^-149 absolutely.
func TestExpF32Vec(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	var xs []float32
	for range 200000 {
		xs = append(xs, rng.Float32()*200-105) // [-105, 95): both ends overflow/underflow
	}
	for range 20000 {
		xs = append(xs, (rng.Float32()*2-1)*1e-3) // near 0
	}
	xs = append(xs, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		88.72283, 88.72284, 88.7229, 89, -87.33654, -87.3366, -103.27893, -103.97208, -104, -150, 1, -1, 0.5, 1e-30)
	checkUnaryKernel(t, backends.OpTypeExp, math.Exp, xs, func(x, got, want float32) bool {
		if want == 0 || math.Abs(float64(want)) >= math.SmallestNonzeroFloat32*(1<<23) {
			return false
		}
		// A subnormal result: within the smallest subnormal.
		if d := math.Abs(float64(got - want)); d > math.SmallestNonzeroFloat32 {
			t.Errorf("exp(%g) = %g, want %g (subnormal): off by %g", x, got, want, d)
		}
		return true
	})
}

// TestTanhF32Vec: the vector tanh (where the CPU has AVX2 and FMA) is within 2 ulps of float64
// math.Tanh rounded once — simplego's result — around the polynomial/exp switch at |x| = 0.625,
// near 0 and out to saturation, exact at NaN, ±Inf, ±0 and ±1 saturation, with the sign of x
// (tanh(-0) = -0), on every tail length.
func TestTanhF32Vec(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	var xs []float32
	for range 200000 {
		xs = append(xs, rng.Float32()*24-12)
	}
	for range 20000 {
		xs = append(xs, (rng.Float32()*2-1)*0.7, (rng.Float32()*2-1)*1e-4)
	}
	xs = append(xs, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)),
		0.625, -0.625, math.Nextafter32(0.625, 0), 9, 10, 50, -50, 1e-30, math.SmallestNonzeroFloat32)
	checkUnaryKernel(t, backends.OpTypeTanh, math.Tanh, xs, func(x, got, want float32) bool {
		if math.Float32bits(got)>>31 != math.Float32bits(want)>>31 && !isNaN32(want) {
			t.Errorf("tanh(%g) = %g has the wrong sign (want %g)", x, got, want)
		}
		return false
	})
}

// checkUnaryKernel runs op's vector kernel on xs and compares each result with ref in float64
// rounded once (simplego's): at most 2 ulps off, the worst logged. special may take over the
// check of an element (it returns true when it did). Every tail length up to 17 must give the
// same values as the full-length run: a short tail goes through the same kernel.
func checkUnaryKernel(t *testing.T, op backends.OpType, ref func(float64) float64, xs []float32, special func(x, got, want float32) bool) {
	t.Helper()
	if !vecEnabled() {
		t.Skip("no vector kernels on this CPU")
	}
	got := make([]float32, len(xs))
	unaryF32(op, got, xs)
	worst, where := int64(0), float32(0)
	for i, x := range xs {
		want := float32(ref(float64(x)))
		if special(x, got[i], want) {
			continue
		}
		if u := ulps(got[i], want); u > worst {
			worst, where = u, x
		}
	}
	t.Logf("worst: %d ulps (at %g) over %d values", worst, where, len(xs))
	if worst > 2 {
		t.Errorf("%s is %d ulps off at %g, want at most 2", op, worst, where)
	}
	for n := 1; n <= 17; n++ {
		part := make([]float32, n)
		unaryF32(op, part, xs[:n])
		for i := range part {
			if math.Float32bits(part[i]) != math.Float32bits(got[i]) {
				t.Fatalf("length %d: %s(%g) = %g, %g in a longer run", n, op, xs[i], part[i], got[i])
			}
		}
	}
}

// TestMiscF32Vec: the negation, fill, square-root, selection and bool-conversion kernels give the
// portable loops' bits (sqrt as float32(math.Sqrt(float64(x))), NaN payloads included) on awkward
// lengths, with special values, and in place.
func TestMiscF32Vec(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	special := []float32{float32(math.NaN()), math.Float32frombits(0x7fa00001), float32(math.Inf(1)), float32(math.Inf(-1)), 0,
		float32(math.Copysign(0, -1)), math.SmallestNonzeroFloat32, 1e-40, math.MaxFloat32, -1, -1e-40}
	value := func() float32 {
		if rng.IntN(6) == 0 {
			return special[rng.IntN(len(special))]
		}
		return rng.Float32() * float32(math.Pow(10, float64(rng.IntN(9)-4)))
	}
	same := func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) }
	for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 129, 512, 1000} {
		a, b, cond := make([]float32, n), make([]float32, n), make([]float32, n)
		bools := make([]bool, n)
		for i := range a {
			a[i], b[i] = value(), value()
			bools[i] = rng.IntN(2) == 0
			cond[i] = b2f(bools[i])
		}
		got := make([]float32, n)
		unaryF32(backends.OpTypeNeg, got, a)
		for i, x := range a {
			if want := -x; !same(got[i], want) {
				t.Fatalf("neg n=%d [%d]: -(%g) = %g (%#x), want %#x", n, i, x, got[i], math.Float32bits(got[i]), math.Float32bits(want))
			}
		}
		fill(got, a[n/2])
		for i := range got {
			if !same(got[i], a[n/2]) {
				t.Fatalf("fill n=%d [%d]: %#x, want %#x", n, i, math.Float32bits(got[i]), math.Float32bits(a[n/2]))
			}
		}
		ints := make([]int32, n+1)
		fill(ints[:n], -7)
		if ints[0] != -7 || ints[n-1] != -7 || ints[n] != 0 {
			t.Fatalf("fill int32 n=%d: first %d, last %d, after %d", n, ints[0], ints[n-1], ints[n])
		}
		unaryF32(backends.OpTypeSqrt, got, a)
		for i, x := range a {
			if want := float32(math.Sqrt(float64(x))); !same(got[i], want) {
				t.Fatalf("sqrt n=%d [%d]: sqrt(%g) = %g (%#x), want %g (%#x)", n, i, x, got[i], math.Float32bits(got[i]), want, math.Float32bits(want))
			}
		}
		boolsToF32(got, bools)
		for i := range got {
			if !same(got[i], cond[i]) {
				t.Fatalf("bools n=%d [%d]: %v -> %g", n, i, bools[i], got[i])
			}
		}
		selectF32(got, cond, a, b)
		for i := range got {
			want := b[i]
			if bools[i] {
				want = a[i]
			}
			if !same(got[i], want) {
				t.Fatalf("select n=%d [%d]: %v ? %g : %g = %g", n, i, bools[i], a[i], b[i], got[i])
			}
		}
		selectF32(a, cond, a, b) // in place
		for i := range got {
			if !same(a[i], got[i]) {
				t.Fatalf("select n=%d [%d]: in place %g, out of place %g", n, i, a[i], got[i])
			}
		}
	}
}

// TestMaxRowVec: a row's maximum with the vector kernel (AVX2 where the CPU has it) is bitwise
// Go's pairwise max over the row — a NaN anywhere gives the NaN, +0 beats -0 — on rows of
// awkward lengths that are all negative, hold zeros of either sign, NaNs, infinities or
// subnormals, from an init of -Inf, a running maximum, zero or NaN.
func TestMaxRowVec(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	negZero := float32(math.Copysign(0, -1))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0, negZero, 1e-40, -1e-40}
	goMax := func(init float32, row []float32) float32 {
		m := init
		for _, x := range row {
			m = max(m, x)
		}
		return m
	}
	kinds := []string{"mixed", "negative", "zeros", "one special"}
	vectored := 0
	for _, n := range []int{1, 31, 32, 33, 63, 64, 65, 100, 512, 1000, 50257} {
		for _, kind := range kinds {
			for _, init := range []float32{float32(math.Inf(-1)), -3, 0.5, 0, negZero, float32(math.NaN())} {
				row := make([]float32, n)
				for i := range row {
					switch kind {
					case "mixed":
						row[i] = rng.Float32()*4 - 2
					case "negative":
						row[i] = -rng.Float32() - 0.5
					case "zeros":
						row[i] = []float32{0, negZero, -1}[rng.IntN(3)]
					case "one special":
						row[i] = -rng.Float32() - 0.5
					}
				}
				if kind == "one special" {
					row[rng.IntN(n)] = special[rng.IntN(len(special))]
				}
				want := goMax(init, row)
				got := maxRow(init, row)
				if math.Float32bits(got) != math.Float32bits(want) && !(got != got && want != want) {
					t.Fatalf("n=%d %s init %g: max %g (%#x), want %g (%#x)", n, kind, init, got, math.Float32bits(got), want, math.Float32bits(want))
				}
				if _, ok := maxRowVec(init, row); ok {
					vectored++
				}
			}
		}
	}
	if vecEnabled() && vectored == 0 {
		t.Fatal("no row ran on the vector kernel")
	}
	t.Logf("%d rows on the vector kernel", vectored)
}
