//go:build noxla

package xla

import "fmt"

// compileTextStats: without PJRT (the noxla build) nothing can be compiled.
func compileTextStats(*Runtime, string, int) (MemoryStats, error) {
	return MemoryStats{}, fmt.Errorf("%w: this binary was built with -tags noxla (no PJRT plugin)", ErrMemoryStatsUnavailable)
}
