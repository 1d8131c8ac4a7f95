//go:build !amd64 || purego

package gemm

// MeasurePeakGFLOPS returns 0: no FMA throughput loop is compiled into this build.
func MeasurePeakGFLOPS(threads int) float64 { return 0 }

// MeasureBF16PeakGFLOPS returns 0: no VDPBF16PS throughput loop is compiled into this build.
func MeasureBF16PeakGFLOPS(threads int) float64 { return 0 }
