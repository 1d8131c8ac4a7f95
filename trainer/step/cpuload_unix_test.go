//go:build unix

package step

import (
	"syscall"
	"time"
)

// ownCPU is this process's user + system CPU time in seconds.
func ownCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
