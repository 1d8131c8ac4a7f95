//go:build !noxla

package xla

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gotpu/gotpu/internal/fakeplugin"
)

// TestNoAutoInstall pins the GoMLX trap: with XLA compiled in, opening the "xla" backend by name
// runs an installer that downloads the CPU plugin from GitHub. Importing gotpu's xla package turns
// that off for the whole process, so GoMLX's own entry point fails fast and locally instead. go-xla
// reads its search path once at start-up, so the check runs in a child process whose
// PJRT_PLUGIN_LIBRARY_PATH is an empty directory: an installed plugin cannot hide the installer.
func TestNoAutoInstall(t *testing.T) {
	if os.Getenv("GOTPU_NO_AUTO_INSTALL_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestNoAutoInstall$", "-test.v")
		cmd.Env = append(os.Environ(), "GOTPU_NO_AUTO_INSTALL_CHILD=1", "PJRT_PLUGIN_LIBRARY_PATH="+t.TempDir())
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestNoAutoInstall") {
			t.Fatalf("child: %v\n%s", err, out)
		}
		t.Logf("child:\n%s", out)
		return
	}
	start := time.Now()
	b, err := backends.NewWithConfig("xla:cpu")
	if err == nil {
		b.Finalize()
		t.Fatal("backends.New(xla:cpu) found a plugin in an empty PJRT_PLUGIN_LIBRARY_PATH: did it download one?")
	}
	t.Logf("backends.New(xla:cpu): %v", err)
	if strings.Contains(err.Error(), "auto-install") {
		t.Fatalf("GoMLX tried to auto-install a plugin: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("backends.New(xla) took %v to fail", d)
	}
}

// TestFakePluginLoadFails: a file that passes discovery but whose GetPjrtApi returns NULL makes
// go-xla return a nil plugin with a nil error (v0.1.4); Open must turn that into an error naming
// the file, not a crash.
func TestFakePluginLoadFails(t *testing.T) {
	path := buildFake(t, t.TempDir(), "pjrt_c_api_tpu_plugin.so", fakeplugin.ExportsAPI)
	_, err := Open(context.Background(), Config{Device: DeviceTPU, PluginPath: path})
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Open(fake plugin) = %v; want an error naming %s", err, path)
	}
}
