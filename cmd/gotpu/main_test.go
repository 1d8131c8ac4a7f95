package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/xla"
)

// gotpuBin is the gotpu binary built once for the tests that run it as a real process.
var gotpuBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gotpu-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gotpuBin = filepath.Join(dir, "gotpu")
	args := []string{"build", "-o", gotpuBin}
	if noXLA {
		args = append(args, "-tags", "noxla")
	}
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building gotpu: %v\n%s", err, out)
		os.Exit(1)
	}
	// The persistent compilation cache defaults to the user's cache directory; tests keep it off
	// unless the environment sets it (every gotpu process a test starts inherits this).
	if os.Getenv("GOTPU_COMPILATION_CACHE_DIR") == "" {
		os.Setenv("GOTPU_COMPILATION_CACHE_DIR", "off")
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testEnv is the environment the tests run gotpu in: this process's, with the compilation
// cache off, so that no test writes to the user's cache directory (the default) or depends on
// what an earlier run left there. Tests of the cache give a directory.
func testEnv() []string {
	return append(os.Environ(), "GOTPU_COMPILATION_CACHE_DIR=off")
}

// runGotpu runs the binary with a clean plugin environment and returns stdout, stderr and status.
// The persistent compilation cache is off (testEnv) unless env or args turn it on.
func runGotpu(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gotpuBin, args...)
	cmd.Env = append(testEnv(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running gotpu %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

func TestDevicesPureGo(t *testing.T) {
	out, errOut, code := runGotpu(t, nil, "devices", "--device", "go", "--num_devices", "8")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"backend      go (--go_backend gotpu)\n", "description  gotpu CPU backend", "devices      8\n", "  7  go  virtual device 7 of 8"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestDevicesGoBackend: --go_backend picks the pure-Go backend, devices shows it in text and
// JSON, and a bad value, or one given with a plugin device, is a usage error naming the field.
func TestDevicesGoBackend(t *testing.T) {
	out, errOut, code := runGotpu(t, nil, "devices", "--device", "go", "--go_backend", "simplego")
	if code != 0 || !strings.Contains(out, "backend      go (--go_backend simplego)\n") ||
		!strings.Contains(out, "description  Simple Go Portable Backend\n") {
		t.Errorf("--go_backend simplego: exit %d, stdout\n%s\nstderr %s", code, out, errOut)
	}
	for backend, description := range map[string]string{"simplego": "Simple Go", "gotpu": "gotpu CPU backend"} {
		out, errOut, code = runGotpu(t, nil, "devices", "--device", "go", "--go_backend", backend, "--json")
		var info xla.Info
		if err := json.Unmarshal([]byte(out), &info); err != nil || code != 0 {
			t.Fatalf("--json (exit %d): %v\n%s%s", code, err, out, errOut)
		}
		if info.Backend != "go" || info.GoBackend != backend || !strings.Contains(info.Description, description) {
			t.Errorf("--go_backend %s: info = %+v", backend, info)
		}
	}
	for _, args := range [][]string{{"--go_backend", "fast"}, {"--device", "tpu", "--go_backend", "simplego"}} {
		out, errOut, code := runGotpu(t, nil, append([]string{"devices"}, args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, "GoBackend") {
			t.Errorf("devices %v: exit %d, stdout %q, stderr %q; want 2 and an error naming GoBackend", args, code, out, errOut)
		}
	}
}

func TestDevicesJSON(t *testing.T) {
	out, errOut, code := runGotpu(t, nil, "devices", "--json", "--num-devices=3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var info xla.Info
	if err := json.Unmarshal([]byte(out), &info); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	// --device auto on a machine without accelerator plugins is the pure-Go backend.
	if info.Backend != "go" || info.GoBackend != xla.DefaultGoBackend || info.NumDevices != 3 || len(info.Devices) != 3 ||
		info.Plugin != nil || info.XLACompiled == noXLA {
		t.Errorf("info = %+v", info)
	}
}

// TestDevicesMissingTPU: asking for a TPU where there is none exits non-zero within 2 s with one
// paragraph naming libtpu and PJRT_PLUGIN_LIBRARY_PATH, and no network access (the plugin search
// is local file checks only).
func TestDevicesMissingTPU(t *testing.T) {
	env := []string{"PJRT_PLUGIN_LIBRARY_PATH=" + t.TempDir(), "TPU_LIBRARY_PATH=", "HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9"}
	start := time.Now()
	out, errOut, code := runGotpu(t, env, "devices", "--device", "tpu")
	elapsed := time.Since(start)
	if code != 1 || out != "" {
		t.Fatalf("exit %d, stdout %q", code, out)
	}
	if elapsed > 2*time.Second {
		t.Errorf("took %v", elapsed)
	}
	msg := strings.TrimSpace(errOut)
	if strings.Contains(msg, "\n") {
		t.Errorf("message is not one paragraph:\n%s", msg)
	}
	for _, want := range []string{"libtpu", "PJRT_PLUGIN_LIBRARY_PATH"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message lacks %q: %s", want, msg)
		}
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"nonsense"}, {"devices", "--device", "quantum"}, {"devices", "--bogus"}, {"devices", "extra"}} {
		_, errOut, code := runGotpu(t, nil, args...)
		if code != 2 || errOut == "" {
			t.Errorf("gotpu %v: exit %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
	out, errOut, code := runGotpu(t, nil, "devices", "--help")
	if code != 0 || !strings.Contains(errOut, "--num_devices") || out != "" {
		t.Errorf("devices --help: exit %d, stderr %q", code, errOut)
	}
}
