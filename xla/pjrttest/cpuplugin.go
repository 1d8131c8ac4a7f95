//go:build !noxla

package pjrttest

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/gotpu/gotpu/xla"
	"github.com/gotpu/gotpu/xla/compilecache"
)

// InCI reports whether the test runs in CI (CI set and not "false", as CI systems set it). There,
// a missing XLA CPU plugin is a failure: .ci/run installs it, so its absence means the PJRT tests
// would silently stop running.
func InCI() bool {
	v := os.Getenv("CI")
	return v != "" && v != "false" && v != "0"
}

// RequireCPUPlugin makes sure XLA's CPU PJRT plugin is installed where `gotpu --device cpu` finds
// it (scripts/install-xla-cpu.sh) and returns its path. Without it the test skips, and fails
// under CI (InCI).
func RequireCPUPlugin(t testing.TB) string {
	t.Helper()
	rt := OpenCPUPlugin(t, 1)
	p, _ := rt.Plugin()
	return p.Path
}

// OpenCPUPlugin opens XLA's CPU PJRT plugin with n devices (passed to it as cpu_device_count),
// closed when the test ends. Without the plugin the test skips, and fails under CI (InCI).
func OpenCPUPlugin(t testing.TB, n int) *xla.Runtime {
	t.Helper()
	return OpenCPUPluginWithCache(t, n, "")
}

// OpenCPUPluginWithCache is OpenCPUPlugin with the persistent compilation cache in dir ("": off).
func OpenCPUPluginWithCache(t testing.TB, n int, dir string) *xla.Runtime {
	t.Helper()
	rt, err := xla.Open(context.Background(), xla.Config{Device: xla.DeviceCPU, NumDevices: n,
		CompilationCache: compilecache.Config{Dir: dir}})
	if errors.Is(err, xla.ErrPluginNotFound) {
		if InCI() {
			t.Fatalf("CI is set and XLA's CPU PJRT plugin is not installed (.ci/run installs it with "+
				"scripts/install-xla-cpu.sh): %v", err)
		}
		t.Skipf("XLA's CPU PJRT plugin is not installed (bash scripts/install-xla-cpu.sh): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := rt.NumDevices(); got != n {
		rt.Close()
		t.Fatalf("XLA CPU plugin opened with %d devices, want %d", got, n)
	}
	if p, ok := rt.Plugin(); !ok || p.Kind != xla.DeviceCPU {
		rt.Close()
		t.Fatalf("runtime for --device cpu is not the CPU plugin: %+v", rt.Info())
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}
