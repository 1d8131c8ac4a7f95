//go:build noxla

package scripts

import "testing"

// requireCPUPlugin: a noxla build has no PJRT path to rehearse (pjrttest needs the XLA backend).
func requireCPUPlugin(t *testing.T) string {
	t.Skip("built with -tags noxla: no XLA backend to open the CPU plugin with")
	return ""
}
