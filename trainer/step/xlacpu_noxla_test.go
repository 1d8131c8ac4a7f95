//go:build noxla

package step

import (
	"testing"

	"github.com/gotpu/gotpu/xla"
)

// openXLACPU: a build without PJRT (-tags noxla) has no plugin to run on; the tests and subtests
// that ask for it skip.
func openXLACPU(t *testing.T, _ int) *xla.Runtime {
	t.Helper()
	t.Skip("built with -tags noxla: no PJRT plugin")
	return nil
}
