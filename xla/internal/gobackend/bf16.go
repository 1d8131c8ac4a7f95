package gobackend

import (
	"math"
	"sync"

	"github.com/gomlx/gomlx/backends"
)

// bfloat16 in native operations.
//
// Native operations compute bfloat16 the way simplego (GoMLX v0.26.0) does, so that their
// results are bitwise simplego's whichever side of the split an operation lands on: an operand is
// widened to float32 (exact: a bfloat16 is the upper half of a float32), the operation is computed
// in float32 (transcendental functions in float64 rounded once to float32), and the float32 result
// is narrowed to bfloat16 by truncation — simplego's bfloat16.FromFloat32 keeps the upper 16
// bits, it does not round to nearest even (as XLA, PyTorch and gotpu's GEMM output do). So a NaN
// whose payload lies only in the lower 16 bits would become an infinity; arithmetic never makes
// one (the NaNs it produces or propagates are quiet, bit 22 set), only a conversion of such a
// float32 input could. Reductions accumulate in bfloat16 too: each partial sum is narrowed.
//
// Inside a fusion every register holds float32 values; a register of a bfloat16 operation holds
// values that are exactly bfloat16 (its result truncated in place, roundBF16), so a later
// operation reads it as simplego reads the stored bfloat16, and a store only takes the upper
// halves (narrowBF16).

// truncBF16 is simplego's float32 -> bfloat16 -> float32 round trip: the lower 16 bits cleared.
func truncBF16(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ 0xffff) }

// widenBF16Scalar is one bfloat16 (its bits) as a float32.
func widenBF16Scalar(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// widenBF16 sets dst[i] to src[i] as float32 (len(dst) elements).
func widenBF16(dst []float32, src []uint16) {
	src = src[:len(dst)]
	if widenBF16Vec(dst, src) {
		return
	}
	for i, h := range src {
		dst[i] = math.Float32frombits(uint32(h) << 16)
	}
}

// narrowBF16 stores the bfloat16 of each src[i] (truncated) in dst[i] (len(dst) elements).
func narrowBF16(dst []uint16, src []float32) {
	src = src[:len(dst)]
	if narrowBF16Vec(dst, src) {
		return
	}
	for i, x := range src {
		dst[i] = uint16(math.Float32bits(x) >> 16)
	}
}

// roundBF16 sets dst[i] to src[i] truncated to bfloat16, as float32 (len(dst) elements; dst may
// be src).
func roundBF16(dst, src []float32) {
	src = src[:len(dst)]
	if roundBF16Vec(dst, src) {
		return
	}
	for i, v := range src {
		dst[i] = math.Float32frombits(math.Float32bits(v) &^ 0xffff)
	}
}

// binaryBF16 computes dst = a op b in float32 truncated to bfloat16 (a bfloat16 Add, Sub, Mul or
// Div), in one pass where a vector kernel has the operation.
func binaryBF16(op backends.OpType, dst, a, b []float32) {
	if binaryBF16Vec(vecKind(op), dst, a, b) {
		return
	}
	binaryF32(op, dst, a, b)
	roundBF16(dst, dst)
}

// exactBF16Unary are the unary operations whose float32 result on a bfloat16 value is already a
// bfloat16 value (no rounding, and unaryF32 computes them as simplego does); the other fused
// unary operations read a table when their type is bfloat16.
var exactBF16Unary = map[backends.OpType]bool{backends.OpTypeNeg: true, backends.OpTypeAbs: true}

// bf16Tables holds, per transcendental unary operation, its result on every bfloat16 (by bit
// pattern) as simplego computes it, already truncated: a bfloat16 operation has only 65536
// inputs, so a 256 KiB table gives simplego's results bitwise (the float32 vector kernels are
// only within 2 ulps of the float64 reference, which truncation can turn into a different
// bfloat16) at the cost of one load per element. A table is built on first use (~1 ms).
var bf16Tables struct {
	mu     sync.Mutex
	tables map[backends.OpType]*[1 << 16]float32
}

// bf16Table returns op's table.
func bf16Table(op backends.OpType) *[1 << 16]float32 {
	bf16Tables.mu.Lock()
	defer bf16Tables.mu.Unlock()
	if t := bf16Tables.tables[op]; t != nil {
		return t
	}
	t := new([1 << 16]float32)
	x := make([]float32, 1<<16)
	for h := range x {
		x[h] = widenBF16Scalar(uint16(h))
	}
	unaryRef(op, t[:], x)
	for h, v := range t {
		t[h] = truncBF16(v)
	}
	if bf16Tables.tables == nil {
		bf16Tables.tables = map[backends.OpType]*[1 << 16]float32{}
	}
	bf16Tables.tables[op] = t
	return t
}

// lookupBF16 sets dst[i] = table[bits of a[i] as bfloat16]; a holds bfloat16 values.
func lookupBF16(table *[1 << 16]float32, dst, a []float32) {
	a = a[:len(dst)]
	for i, v := range a {
		dst[i] = table[math.Float32bits(v)>>16]
	}
}
