//go:build noxla

package xla

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
)

// graphMemoryStats: without PJRT (the noxla build) no program has compiler memory figures.
func graphMemoryStats(*graph.Graph) (MemoryStats, error) {
	return MemoryStats{}, fmt.Errorf("%w: this binary was built with -tags noxla (no PJRT plugin)", ErrMemoryStatsUnavailable)
}
