package aslimit

import (
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"

	"github.com/gotpu/gotpu/internal/membudget"
)

// headroomShare is the share of the address space left at start that the Go heap may grow into
// before the collector works harder: the rest is for thread stacks, cgo allocations and the
// runtime's own growth.
const headroomShare = 0.75

// SoftLimit sets the Go runtime's soft memory limit (debug.SetMemoryLimit) from the address
// space left under RLIMIT_AS, unless GOMEMLIMIT is set or there is no such limit. It returns the
// limit set, 0 when none was.
func SoftLimit() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	left, ok := membudget.AddressSpaceLeft()
	if !ok {
		return 0
	}
	limit := runtimeTotal() + int64(float64(left)*headroomShare)
	if debug.SetMemoryLimit(-1) <= limit { // a lower limit already set stays
		return 0
	}
	debug.SetMemoryLimit(limit)
	return limit
}

// runtimeTotal is the memory the Go runtime has mapped now (what its memory limit counts).
func runtimeTotal() int64 {
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[0].Value.Uint64() > math.MaxInt64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}
