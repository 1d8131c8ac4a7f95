//go:build !noxla

package trainer_test

import (
	"testing"

	"github.com/gotpu/gotpu/xla/pjrttest"
)

// TestHostSyncsOnlyAtSyncPointsOnXLACPU: on XLA's CPU PJRT plugin with 2 devices the host blocks
// on the device exactly as often as on gotpu's backend (TestHostSyncsOnlyAtSyncPoints): once per
// logging point, evaluation and save and at the end, and the log entries carry the same counters.
func TestHostSyncsOnlyAtSyncPointsOnXLACPU(t *testing.T) {
	hostSyncsOnlyAtSyncPoints(t, pjrttest.OpenCPUPlugin(t, 2))
}
