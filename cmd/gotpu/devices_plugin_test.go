package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/fakeplugin"
)

// TestDevicesBrokenPlugins runs `gotpu devices --device tpu|cuda` against fake plugin
// installations — a file that is not a shared library, a shared library without GetPjrtApi, a
// --plugin_path that does not exist, and a library whose GetPjrtApi returns NULL — and checks each
// fails with exit status 1 and a message naming the file and what is wrong with it, nothing on
// stdout. The fakes are real ELF files built with the C compiler (skipped without one).
func TestDevicesBrokenPlugins(t *testing.T) {
	for _, tc := range []struct {
		device, file string // the pip-installed name gotpu searches for
	}{
		{"tpu", "libtpu.so"},
		{"cuda", "xla_cuda_plugin.so"},
	} {
		build := func(t *testing.T, dir string, kind fakeplugin.Kind) string {
			p, err := fakeplugin.Build(dir, tc.file, kind)
			if err != nil {
				t.Skipf("cannot build a fake plugin (no C compiler?): %v", err)
			}
			return p
		}
		search := func(dir string) []string {
			return []string{"PJRT_PLUGIN_LIBRARY_PATH=" + dir, "TPU_LIBRARY_PATH="}
		}
		check := func(t *testing.T, env []string, args []string, want ...string) {
			t.Helper()
			out, errOut, code := runGotpu(t, env, append([]string{"devices", "--device", tc.device}, args...)...)
			if code != 1 || out != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 1 and nothing on stdout", code, out, errOut)
			}
			for _, w := range want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
		}
		t.Run(tc.device+"/not-a-shared-library", func(t *testing.T) {
			dir := t.TempDir()
			path := build(t, dir, fakeplugin.NotELF)
			check(t, search(dir), nil, path, "not an ELF shared library", "PJRT plugin not found")
			check(t, nil, []string{"--plugin_path", path}, path, "not an ELF shared library")
		})
		t.Run(tc.device+"/no-GetPjrtApi", func(t *testing.T) {
			dir := t.TempDir()
			path := build(t, dir, fakeplugin.NoAPI)
			check(t, search(dir), nil, path, "does not export GetPjrtApi", "PJRT plugin not found")
			check(t, nil, []string{"--plugin_path", dir}, path, "does not export GetPjrtApi")
		})
		t.Run(tc.device+"/wrong-path", func(t *testing.T) {
			missing := filepath.Join(t.TempDir(), "nowhere", tc.file)
			check(t, nil, []string{"--plugin_path", missing}, missing, "no such file")
			empty := t.TempDir()
			check(t, nil, []string{"--plugin_path", empty}, empty, "the directory has none of", tc.file)
		})
		t.Run(tc.device+"/GetPjrtApi-returns-NULL", func(t *testing.T) {
			dir := t.TempDir()
			path := build(t, dir, fakeplugin.ExportsAPI)
			if noXLA {
				check(t, search(dir), nil, path, "built with -tags noxla")
			} else {
				check(t, search(dir), nil, path, "is it a working PJRT plugin")
			}
		})
	}
}
