package gobackend

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// Special bfloat16 values (bits): NaNs (quiet, negative, and one whose float32 widening is a
// signaling NaN), infinities, signed zeros, subnormals, the largest finite and smallest normal
// values, and values around 1.
var specialBF16 = []uint16{0x7fc0, 0xffc0, 0x7f81, 0x7f80, 0xff80, 0x0000, 0x8000, 0x0001, 0x8001, 0x007f,
	0x0080, 0x7f7f, 0xff7f, 0x3f80, 0xbf80, 0x3f81, 0x4000}

// Special float32 values (bits) for conversions to bfloat16: halfway between two bfloat16 values
// (a round-to-nearest-even tie) and just either side, values that round to nearest up to
// infinity (truncation does not), a NaN with a payload only in its lower half (truncation makes
// it an infinity, as simplego's does), subnormals, and the specials above.
var specialF32 = []uint32{0x3f808000, 0x3f808001, 0x3f807fff, 0x3f818000, 0xbf808000, 0x7f7fffff, 0xff7fffff,
	0x7f7f8000, 0x7f800001, 0xff800001, 0x7fc00000, 0x7f800000, 0xff800000, 0x00000001, 0x00010000,
	0x0000ffff, 0x80000000, 0x00000000}

// bf16Values returns n bfloat16 values: mostly uniform in ±[1e-3, 1e3), one in eight special.
func bf16Values(rng *rand.Rand, n int) []bfloat16.BFloat16 {
	out := make([]bfloat16.BFloat16, n)
	for i := range out {
		if rng.IntN(8) == 0 {
			out[i] = bfloat16.BFloat16(specialBF16[rng.IntN(len(specialBF16))])
			continue
		}
		out[i] = bfloat16.FromFloat32((rng.Float32()*2 - 1) * float32(math.Pow(10, float64(rng.IntN(7)-3))))
	}
	return out
}

// f32Values returns n float32 values: mostly uniform in ±[1e-3, 1e3), one in eight special.
func f32Values(rng *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := range out {
		if rng.IntN(8) == 0 {
			out[i] = math.Float32frombits(specialF32[rng.IntN(len(specialF32))])
			continue
		}
		out[i] = (rng.Float32()*2 - 1) * float32(math.Pow(10, float64(rng.IntN(7)-3)))
	}
	return out
}

// arg is one input of a test computation: its flat data ([]float32, []bfloat16.BFloat16 or
// []bool) and dimensions.
type arg struct {
	flat any
	dims []int
}

func (a arg) shape() shapes.Shape {
	switch a.flat.(type) {
	case []float32:
		return shapes.Make(dtypes.Float32, a.dims...)
	case []bfloat16.BFloat16:
		return shapes.Make(dtypes.BFloat16, a.dims...)
	case []bool:
		return shapes.Make(dtypes.Bool, a.dims...)
	case []int32:
		return shapes.Make(dtypes.Int32, a.dims...)
	}
	panic(fmt.Sprintf("arg of type %T", a.flat))
}

// mustShape returns op's shape, failing t on an error.
func mustShape(t *testing.T, bld backends.Builder, op backends.Op) shapes.Shape {
	t.Helper()
	s, err := bld.OpShape(op)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// program records a computation on bld from its parameters.
type program func(bld backends.Builder, must func(backends.Op, error) backends.Op, params []backends.Op) []backends.Op

// compileProgram compiles prog on backend b for the arguments' shapes.
func compileProgram(t *testing.T, b backends.Backend, prog program, args []arg) backends.Executable {
	t.Helper()
	bld := b.Builder(t.Name())
	must := mustOp(t)
	var params []backends.Op
	for i, a := range args {
		params = append(params, must(bld.Parameter(fmt.Sprintf("p%d", i), a.shape(), nil)))
	}
	exec, err := bld.Compile(prog(bld, must, params), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(exec.Finalize)
	return exec
}

// execute runs exec on the arguments (donated as donate says, nil for none) and returns the
// outputs' flat data.
func execute(t *testing.T, b backends.Backend, exec backends.Executable, args []arg, donate []bool) []any {
	t.Helper()
	outs, err := exec.Execute(argBuffers(t, b, args), donate, 0)
	if err != nil {
		t.Fatal(err)
	}
	var flats []any
	for _, buf := range outs {
		flats = append(flats, flatOf(t, b, buf))
		if err := b.BufferFinalize(buf); err != nil {
			t.Fatal(err)
		}
	}
	return flats
}

// argBuffers returns new buffers of b holding the arguments.
func argBuffers(t *testing.T, b backends.Backend, args []arg) []backends.Buffer {
	t.Helper()
	var in []backends.Buffer
	for _, a := range args {
		buf, err := b.BufferFromFlatData(0, a.flat, a.shape())
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, buf)
	}
	return in
}

// flatOf copies a buffer's data.
func flatOf(t *testing.T, b backends.Backend, buf backends.Buffer) any {
	t.Helper()
	s, err := b.BufferShape(buf)
	if err != nil {
		t.Fatal(err)
	}
	var flat any
	switch s.DType {
	case dtypes.Float32:
		flat = make([]float32, s.Size())
	case dtypes.BFloat16:
		flat = make([]bfloat16.BFloat16, s.Size())
	case dtypes.Bool:
		flat = make([]bool, s.Size())
	default:
		t.Fatalf("output of type %s", s.DType)
	}
	if err := b.BufferToFlatData(buf, flat); err != nil {
		t.Fatal(err)
	}
	return flat
}

// assertBitwise compares outputs bit for bit; NaNs match any NaN (simplego's swap of commutative
// operands can pick the other operand's payload).
func assertBitwise(t *testing.T, what string, got, want any) {
	t.Helper()
	switch w := want.(type) {
	case []float32:
		g := got.([]float32)
		for i := range w {
			if math.Float32bits(g[i]) != math.Float32bits(w[i]) && !(isNaN32(g[i]) && isNaN32(w[i])) {
				t.Fatalf("%s: element %d of %d is %g (%#08x), simplego's is %g (%#08x)", what, i, len(w), g[i],
					math.Float32bits(g[i]), w[i], math.Float32bits(w[i]))
			}
		}
	case []bfloat16.BFloat16:
		g := got.([]bfloat16.BFloat16)
		for i := range w {
			if g[i] != w[i] && !(isNaN32(g[i].Float32()) && isNaN32(w[i].Float32())) {
				t.Fatalf("%s: element %d of %d is %s (%#04x), simplego's is %s (%#04x)", what, i, len(w), g[i], uint16(g[i]), w[i], uint16(w[i]))
			}
		}
	case []bool:
		g := got.([]bool)
		for i := range w {
			if g[i] != w[i] {
				t.Fatalf("%s: element %d of %d is %v, simplego's is %v", what, i, len(w), g[i], w[i])
			}
		}
	default:
		t.Fatalf("%s: output of type %T", what, want)
	}
}

// matchSimpleGo compiles prog on simplego and on gotpu's backend (threads 1 and 2), runs both on
// args and requires bitwise equal outputs; it returns the gotpu executable's split (threads 2).
func matchSimpleGo(t *testing.T, what string, prog program, args []arg) Stats {
	t.Helper()
	return matchSimpleGoWith(t, Config{}, what, prog, args)
}

// matchSimpleGoWith is matchSimpleGo on a backend configured as cfg (Threads aside).
func matchSimpleGoWith(t *testing.T, cfg Config, what string, prog program, args []arg) Stats {
	t.Helper()
	sg := newSimpleGo(t)
	want := execute(t, sg, compileProgram(t, sg, prog, args), args, nil)
	var st Stats
	for _, threads := range []int{1, 2} {
		cfg.Threads = threads
		gb := newGotpu(t, cfg)
		exec := compileProgram(t, gb, prog, args)
		got := execute(t, gb, exec, args, nil)
		for i := range want {
			assertBitwise(t, fmt.Sprintf("%s, threads %d, output %d", what, threads, i), got[i], want[i])
		}
		st = exec.(*Executable).Stats()
	}
	return st
}

// TestBF16Kernels: the conversion kernels and the bfloat16 binary kernels (AVX2 where the CPU has
// it) give the portable loops' bits on lengths around the vector widths and unrolling, in place
// too.
func TestBF16Kernels(t *testing.T) {
	t.Logf("vector kernels in use: %v", vecEnabled())
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 512, 1 << 16} {
		h := make([]uint16, n)
		x := make([]float32, n)
		for i := range h {
			h[i] = uint16(rng.Uint32())
			x[i] = math.Float32frombits(rng.Uint32())
			if i%5 == 0 {
				x[i] = math.Float32frombits(specialF32[rng.IntN(len(specialF32))])
			}
		}
		if n == 1<<16 {
			for i := range h {
				h[i] = uint16(i) // every bfloat16
			}
		}
		y := make([]float32, n)
		for i := range y {
			y[i] = math.Float32frombits(specialF32[rng.IntN(len(specialF32))])
			if i%3 == 0 {
				y[i] = rng.Float32()*4 - 2
			}
		}
		for _, op := range []backends.OpType{backends.OpTypeAdd, backends.OpTypeSub, backends.OpTypeMul, backends.OpTypeDiv} {
			want := make([]float32, n)
			binaryF32(op, want, x, y)
			for i, v := range want {
				want[i] = truncBF16(v)
			}
			got := make([]float32, n)
			binaryBF16(op, got, x, y)
			inPlace := slices.Clone(x)
			binaryBF16(op, inPlace, inPlace, y)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(isNaN32(got[i]) && isNaN32(want[i])) {
					t.Fatalf("n=%d: %s(%g, %g) = %#08x, want %#08x", n, op, x[i], y[i], math.Float32bits(got[i]), math.Float32bits(want[i]))
				}
				if math.Float32bits(inPlace[i]) != math.Float32bits(got[i]) && !(isNaN32(got[i]) && isNaN32(inPlace[i])) {
					t.Fatalf("n=%d: %s in place %#08x, out of place %#08x", n, op, math.Float32bits(inPlace[i]), math.Float32bits(got[i]))
				}
			}
		}
		wide := make([]float32, n)
		widenBF16(wide, h)
		narrow := make([]uint16, n)
		narrowBF16(narrow, x)
		round := make([]float32, n)
		roundBF16(round, x)
		inPlace := slices.Clone(x)
		roundBF16(inPlace, inPlace)
		for i := range n {
			if got, want := math.Float32bits(wide[i]), uint32(h[i])<<16; got != want {
				t.Fatalf("n=%d: widen %#04x = %#08x, want %#08x", n, h[i], got, want)
			}
			if got, want := narrow[i], uint16(math.Float32bits(x[i])>>16); got != want {
				t.Fatalf("n=%d: narrow %#08x = %#04x, want %#04x", n, math.Float32bits(x[i]), got, want)
			}
			want := math.Float32bits(x[i]) &^ 0xffff
			if got := math.Float32bits(round[i]); got != want {
				t.Fatalf("n=%d: round %#08x = %#08x, want %#08x", n, math.Float32bits(x[i]), got, want)
			}
			if got := math.Float32bits(inPlace[i]); got != want {
				t.Fatalf("n=%d: round in place %#08x = %#08x, want %#08x", n, math.Float32bits(x[i]), got, want)
			}
		}
	}
}

// TestBF16UnaryExhaustive runs every fused unary operation on every bfloat16 value, natively
// (split across goroutines: 65536 elements) and on simplego.
func TestBF16UnaryExhaustive(t *testing.T) {
	all := make([]bfloat16.BFloat16, 1<<16)
	for i := range all {
		all[i] = bfloat16.BFloat16(i)
	}
	ops := []backends.OpType{backends.OpTypeNeg, backends.OpTypeAbs, backends.OpTypeExp, backends.OpTypeLog,
		backends.OpTypeTanh, backends.OpTypeSqrt, backends.OpTypeRsqrt, backends.OpTypeLogistic}
	prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, p []backends.Op) []backends.Op {
		var outs []backends.Op
		for _, op := range ops {
			var o backends.Op
			var err error
			switch op {
			case backends.OpTypeNeg:
				o, err = bld.Neg(p[0])
			case backends.OpTypeAbs:
				o, err = bld.Abs(p[0])
			case backends.OpTypeExp:
				o, err = bld.Exp(p[0])
			case backends.OpTypeLog:
				o, err = bld.Log(p[0])
			case backends.OpTypeTanh:
				o, err = bld.Tanh(p[0])
			case backends.OpTypeSqrt:
				o, err = bld.Sqrt(p[0])
			case backends.OpTypeRsqrt:
				o, err = bld.Rsqrt(p[0])
			case backends.OpTypeLogistic:
				o, err = bld.Logistic(p[0])
			}
			outs = append(outs, must(o, err))
		}
		return outs
	}
	st := matchSimpleGo(t, "unary", prog, []arg{{all, []int{1 << 16}}})
	if st.Segments != 0 || st.Fusions != len(ops) {
		t.Fatalf("split %+v, want %d fusions and no segment", st, len(ops))
	}
}

// TestBF16BinaryMatchesSimpleGo runs the fused binary operations on every bfloat16 value against
// shuffled ones (special values included), and with a scalar on either side.
func TestBF16BinaryMatchesSimpleGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	x := make([]bfloat16.BFloat16, 1<<16)
	for i := range x {
		x[i] = bfloat16.BFloat16(i)
	}
	y := bf16Values(rng, len(x))
	prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, p []backends.Op) []backends.Op {
		var outs []backends.Op
		for _, f := range []func(a, b backends.Op) (backends.Op, error){bld.Add, bld.Sub, bld.Mul, bld.Div, bld.Max, bld.Min} {
			outs = append(outs, must(f(p[0], p[1])), must(f(p[2], p[1])), must(f(p[0], p[2])))
		}
		return outs
	}
	st := matchSimpleGo(t, "binary", prog, []arg{{x, []int{1 << 16}}, {y, []int{1 << 16}},
		{[]bfloat16.BFloat16{bfloat16.FromFloat32(-1.5)}, nil}})
	if st.Segments != 0 {
		t.Fatalf("split %+v, want no segment", st)
	}
}

// TestBF16FusionsMatchSimpleGo runs mixed-precision chains on awkward shapes: every fused
// operation in bfloat16, broadcasts of a row and of a column (BroadcastInDim) and implicit ones
// (a [1, ..., n] operand, a scalar parameter, a folded scalar constant), float32 <-> bfloat16
// conversions both ways inside one fusion, a bool converted to bfloat16, intermediate outputs of
// both types, and float32 inputs that test the conversion's rounding (ties, overflow, NaN
// payloads).
func TestBF16FusionsMatchSimpleGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(25, 26))
	prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, p []backends.Op) []backends.Op {
		x, y, z, row, col, s, xf, lead, cond := p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]
		xs := mustShape(t, bld, x)
		dims := xs.Dimensions
		bf := func(v float32) backends.Op { return must(bld.Constant([]bfloat16.BFloat16{bfloat16.FromFloat32(v)})) }
		axes := make([]int, len(dims))
		for i := range axes {
			axes[i] = i
		}
		rowB := must(bld.BroadcastInDim(row, xs, []int{len(dims) - 1}))
		colB := must(bld.BroadcastInDim(col, xs, axes))
		a := must(bld.Add(must(bld.Mul(x, y)), rowB))
		b := must(bld.Sub(must(bld.Div(a, must(bld.Add(must(bld.Abs(z)), bf(1))))), s))
		u := must(bld.Add(must(bld.Tanh(a)), must(bld.Exp(must(bld.Neg(x))))))
		u = must(bld.Mul(u, must(bld.Log(must(bld.Add(must(bld.Abs(y)), bf(1)))))))
		u = must(bld.Sub(u, must(bld.Mul(must(bld.Sqrt(must(bld.Abs(z)))), must(bld.Rsqrt(must(bld.Add(must(bld.Abs(x)), bf(0.5)))))))))
		u = must(bld.Add(u, must(bld.Logistic(b))))
		m := must(bld.Max(must(bld.Min(b, colB)), u))
		m = must(bld.Add(m, lead)) // implicit broadcast of a [1, ..., n] operand
		// float32 detour: widen, compute in float32 with a float32 input, narrow, and convert the
		// float32 input itself (ties, overflow, NaN payloads).
		h := must(bld.Mul(must(bld.ConvertDType(m, dtypes.Float32)), xf))
		hb := must(bld.ConvertDType(h, dtypes.BFloat16))
		xb := must(bld.ConvertDType(xf, dtypes.BFloat16))
		mask := must(bld.ConvertDType(cond, dtypes.BFloat16))
		out := must(bld.Add(must(bld.Add(hb, xb)), must(bld.Mul(mask, a))))
		outF := must(bld.Add(must(bld.ConvertDType(out, dtypes.Float32)), xf))
		return []backends.Op{out, outF, a, hb, xb}
	}
	for _, dims := range awkwardShapes {
		n := 1
		for _, d := range dims {
			n *= d
		}
		last := dims[len(dims)-1]
		colDims, leadDims := slices.Clone(dims), make([]int, len(dims))
		colDims[len(colDims)-1] = 1
		for i := range leadDims {
			leadDims[i] = 1
		}
		leadDims[len(dims)-1] = last
		cond := make([]bool, n)
		for i := range cond {
			cond[i] = rng.IntN(2) == 0
		}
		args := []arg{{bf16Values(rng, n), dims}, {bf16Values(rng, n), dims}, {bf16Values(rng, n), dims},
			{bf16Values(rng, last), []int{last}}, {bf16Values(rng, n/last), colDims}, {bf16Values(rng, 1), nil},
			{f32Values(rng, n), dims}, {bf16Values(rng, last), leadDims}, {cond, dims}}
		st := matchSimpleGo(t, fmt.Sprint(dims), prog, args)
		if st.Segments != 0 {
			t.Fatalf("%v: split %+v, want no segment", dims, st)
		}
	}
}

// TestBF16ReductionsMatchSimpleGo: bfloat16 sums and maxima accumulate as simplego's (in
// bfloat16, truncating every partial sum), on rows, columns (the bias gradients' shape) and
// splits across goroutines, with special values among the inputs.
func TestBF16ReductionsMatchSimpleGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 28))
	cases := []struct {
		dims []int
		axes [][]int
	}{
		{[]int{1}, [][]int{{0}}},
		{[]int{129}, [][]int{{0}}},
		{[]int{7, 129, 3}, [][]int{{2}, {1}, {0}, {0, 1}, {1, 2}, {0, 1, 2}}},
		{[]int{2, 1, 7, 5}, [][]int{{3}, {1, 2}, {0, 2}}},
		{[]int{1024, 77}, [][]int{{0}, {1}}},
		{[]int{5, 130, 129}, [][]int{{2}, {0, 1}, {1}}}, // split across goroutines
		{[]int{3, 1100}, [][]int{{0}}},                  // inner blocks of more than fuseBlock
	}
	// Rows of only -Inf (the maximum's initial value shows), NaN, signed zeros, and the largest
	// finite values (their sum overflows).
	edge := []uint16{0xff80, 0xff80, 0xff80, 0xff80, 0x7fc0, 0x7fc0, 0x7fc0, 0x7fc0, 0x8000, 0x8000, 0x0000, 0x8000,
		0x7f7f, 0x7f7f, 0xff7f, 0x7f7f}
	cases = append(cases, struct {
		dims []int
		axes [][]int
	}{[]int{4, 4}, [][]int{{1}, {0}}})
	for _, c := range cases {
		n := 1
		for _, d := range c.dims {
			n *= d
		}
		x := bf16Values(rng, n)
		if n == len(edge) {
			for i, h := range edge {
				x[i] = bfloat16.BFloat16(h)
			}
		}
		if c.dims[0] == 1024 {
			// Finite values only: sums that are not NaN or infinite, so truncation matters.
			for i := range x {
				x[i] = bfloat16.FromFloat32(rng.Float32()*2 - 0.5)
			}
		}
		for _, axes := range c.axes {
			prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, p []backends.Op) []backends.Op {
				return []backends.Op{must(bld.ReduceSum(p[0], axes...)), must(bld.ReduceMax(p[0], axes...))}
			}
			st := matchSimpleGo(t, fmt.Sprintf("%v axes %v", c.dims, axes), prog, []arg{{x, c.dims}})
			if st.Reductions != 2 || st.Segments != 0 {
				t.Fatalf("%v axes %v: split %+v, want 2 native reductions", c.dims, axes, st)
			}
		}
	}
}

func TestBF16TransposeMatchesSimpleGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 30))
	for _, c := range []struct{ dims, perm []int }{
		{[]int{1, 7}, []int{1, 0}},
		{[]int{129, 3}, []int{1, 0}},
		{[]int{2, 7, 33}, []int{2, 0, 1}},
		{[]int{3, 1, 5, 129}, []int{0, 2, 1, 3}},
		{[]int{2, 16, 4, 8}, []int{0, 2, 1, 3}}, // attention heads
	} {
		n := 1
		for _, d := range c.dims {
			n *= d
		}
		prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, p []backends.Op) []backends.Op {
			return []backends.Op{must(bld.Transpose(p[0], c.perm...))}
		}
		st := matchSimpleGo(t, fmt.Sprintf("%v perm %v", c.dims, c.perm), prog, []arg{{bf16Values(rng, n), c.dims}})
		if st.Transposes != 1 || st.Segments != 0 {
			t.Fatalf("%v perm %v: split %+v, want one native transpose", c.dims, c.perm, st)
		}
	}
}

// TestBF16FusionInPlace: a bfloat16 fusion that is the last reader of a donated operand of its
// output's shape writes its result over it (no new buffer), with simplego's results.
func TestBF16FusionInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	dims := []int{5, 130, 129}
	n := dims[0] * dims[1] * dims[2]
	prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, p []backends.Op) []backends.Op {
		// x is read twice, in the output's layout only; y through a broadcast.
		xs := mustShape(t, bld, p[0])
		yb := must(bld.BroadcastInDim(p[1], xs, []int{2}))
		return []backends.Op{must(bld.Add(must(bld.Mul(p[0], p[0])), must(bld.Mul(p[0], yb))))}
	}
	args := []arg{{bf16Values(rng, n), dims}, {bf16Values(rng, dims[2]), dims[2:]}}
	sg := newSimpleGo(t)
	want := execute(t, sg, compileProgram(t, sg, prog, args), args, nil)
	gb := newGotpu(t, Config{})
	exec := compileProgram(t, gb, prog, args)
	for range 2 {
		x, err := gb.BufferFromFlatData(0, args[0].flat, args[0].shape())
		if err != nil {
			t.Fatal(err)
		}
		y, err := gb.BufferFromFlatData(0, args[1].flat, args[1].shape())
		if err != nil {
			t.Fatal(err)
		}
		xData, err := gb.BufferData(x)
		if err != nil {
			t.Fatal(err)
		}
		outs, err := exec.Execute([]backends.Buffer{x, y}, []bool{true, false}, 0)
		if err != nil {
			t.Fatal(err)
		}
		outData, err := gb.BufferData(outs[0])
		if err != nil {
			t.Fatal(err)
		}
		if unsafe.SliceData(outData.([]bfloat16.BFloat16)) != unsafe.SliceData(xData.([]bfloat16.BFloat16)) {
			t.Errorf("the output is a new buffer, not the donated operand's")
		}
		assertBitwise(t, "in place", flatOf(t, gb, outs[0]), want[0])
		for _, b := range []backends.Buffer{outs[0], y} {
			if err := gb.BufferFinalize(b); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestBF16Fallback: with Config.FallbackBF16, bfloat16 operations and comparisons run on simplego
// (the switch trainer/step's whole-step comparison relies on).
func TestBF16Fallback(t *testing.T) {
	prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, p []backends.Op) []backends.Op {
		return []backends.Op{must(bld.Add(must(bld.Mul(p[0], p[0])), p[0])), must(bld.ReduceSum(p[0], 0)), must(bld.Transpose(p[0], 1, 0)),
			must(bld.Equal(p[0], p[0]))}
	}
	rng := rand.New(rand.NewPCG(33, 34))
	st := matchSimpleGoWith(t, Config{FallbackBF16: true}, "fallback", prog, []arg{{bf16Values(rng, 6*7), []int{6, 7}}})
	if st.Segments != 1 || st.Fusions+st.Reductions+st.Transposes+st.Comparisons != 0 {
		t.Fatalf("split %+v, want one segment and nothing native", st)
	}
}

// TestReduceMaxEdgeCases: float32 maxima of rows with NaNs (anywhere in the row: the running
// maxima are interleaved), signed zeros and only -Inf (simplego starts from -Inf, not from the
// lowest finite value) are simplego's.
func TestReduceMaxEdgeCases(t *testing.T) {
	nan, inf, negZero := float32(math.NaN()), float32(math.Inf(1)), float32(math.Copysign(0, -1))
	rows := [][]float32{
		{1, 2, 3, 4, 5, 6, 7, nan, 1},
		{nan, 1, 2, 3, 4, 5, 6, 7, 8},
		{1, 2, 3, 4, 5, 6, 7, 8, nan},
		{negZero, 0, negZero, negZero, negZero, negZero, negZero, negZero, negZero},
		{negZero, negZero, negZero, negZero, negZero, negZero, negZero, negZero, negZero},
		{-inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf, -inf},
		{-1, -2, inf, -4, -5, -6, -7, -8, -9},
	}
	var x []float32
	for _, r := range rows {
		x = append(x, r...)
	}
	prog := func(bld backends.Builder, must func(backends.Op, error) backends.Op, p []backends.Op) []backends.Op {
		return []backends.Op{must(bld.ReduceMax(p[0], 1))}
	}
	st := matchSimpleGo(t, "max", prog, []arg{{x, []int{len(rows), len(rows[0])}}})
	if st.Reductions != 1 {
		t.Fatalf("split %+v, want a native reduction", st)
	}
	// assertBitwise lets any NaN match any NaN, but not a number: the NaN rows must stay NaN.
}
