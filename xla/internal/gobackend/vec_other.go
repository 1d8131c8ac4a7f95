//go:build !amd64

package gobackend

// binaryF32Vec has no vector kernels on this architecture: the portable loops run.
func binaryF32Vec(opKind, []float32, []float32, []float32) bool { return false }

// vecEnabled reports whether the vector kernels run (tests log it).
func vecEnabled() bool { return false }

// expF32Vec has no vector kernel on this architecture: float64 math.Exp runs.
func expF32Vec([]float32, []float32) bool { return false }

// tanhF32Vec has no vector kernel on this architecture: float64 math.Tanh runs.
func tanhF32Vec([]float32, []float32) bool { return false }
