//go:build !noxla

package scripts

import (
	"testing"

	"github.com/gotpu/gotpu/xla/pjrttest"
)

// requireCPUPlugin is pjrttest.RequireCPUPlugin: the path of XLA's CPU PJRT plugin as gotpu finds
// it; the test skips without one, and fails under CI.
func requireCPUPlugin(t *testing.T) string { return pjrttest.RequireCPUPlugin(t) }
