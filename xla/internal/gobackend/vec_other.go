//go:build !amd64 || purego

package gobackend

import "unsafe"

// Without the assembly kernels (another architecture, or the purego build tag) the portable
// loops run.

// binaryF32Vec has no vector kernels here: the portable loops run.
func binaryF32Vec(opKind, []float32, []float32, []float32) bool { return false }

// vecEnabled reports whether the vector kernels run (tests log it).
func vecEnabled() bool { return false }

// expF32Vec has no vector kernel here: float64 math.Exp runs.
func expF32Vec([]float32, []float32) bool { return false }

// tanhF32Vec has no vector kernel here: float64 math.Tanh runs.
func tanhF32Vec([]float32, []float32) bool { return false }

// widenBF16Vec has no vector kernel here.
func widenBF16Vec([]float32, []uint16) bool { return false }

// narrowBF16Vec has no vector kernel here.
func narrowBF16Vec([]uint16, []float32) bool { return false }

// roundBF16Vec has no vector kernel here.
func roundBF16Vec([]float32, []float32) bool { return false }

// binaryBF16Vec has no vector kernels here.
func binaryBF16Vec(opKind, []float32, []float32, []float32) bool { return false }

// sqrtF32Vec has no vector kernel here: float64 math.Sqrt runs.
func sqrtF32Vec([]float32, []float32) bool { return false }

// selectF32Vec has no vector kernel here.
func selectF32Vec(_, _, _, _ []float32) bool { return false }

// boolsToF32Vec has no vector kernel here.
func boolsToF32Vec([]float32, []bool) bool { return false }

// negF32Vec has no vector kernel here.
func negF32Vec([]float32, []float32) bool { return false }

// fill32Vec has no vector kernel here: fill doubles copies.
func fill32Vec(*uint32, uint32, int) bool { return false }

// maxRowVec has no vector kernel here: maxRow's loop runs.
func maxRowVec(float32, []float32) (float32, bool) { return 0, false }

// prefetchLines does nothing without the assembly kernels.
func prefetchLines(unsafe.Pointer, int) {}

// equalVec has no vector kernel here: compareInto's loops run.
func equalVec[T int32 | float32]([]bool, []T, []T, bool) int { return 0 }
