//go:build unix

package membudget

import (
	"math"
	"syscall"
)

// addressSpaceLimit is RLIMIT_AS's soft limit (ulimit -v); ok is false when unlimited.
func addressSpaceLimit() (int64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &r); err != nil {
		return 0, false
	}
	// RLIM_INFINITY is all ones (^0), which is also past MaxInt64.
	if r.Cur > math.MaxInt64 {
		return 0, false
	}
	return int64(r.Cur), true
}
