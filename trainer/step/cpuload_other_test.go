//go:build !unix

package step

// ownCPU is unknown here; BenchmarkVsPyTorch's load measure needs /proc/stat anyway, so it reports
// no load on these systems.
func ownCPU() float64 { return 0 }
