package xla

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/internal/fakeplugin"
)

// emptyEnv is a search environment that sees only what a test puts in it.
func emptyEnv(vars map[string]string) searchEnv {
	return searchEnv{getenv: func(k string) string { return vars[k] }}
}

func buildFake(t *testing.T, dir, name string, kind fakeplugin.Kind) string {
	t.Helper()
	p, err := fakeplugin.Build(dir, name, kind)
	if err != nil {
		t.Skipf("cannot build a fake plugin (no C compiler?): %v", err)
	}
	return p
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg   Config
		field string
	}{
		{Config{Device: "auto"}, ""},
		{Config{Device: "GPU"}, ""},
		{Config{Device: "go", NumDevices: 8}, ""},
		{Config{Device: "quantum"}, "Device"},
		{Config{Device: "go", NumDevices: -1}, "NumDevices"},
		{Config{Device: "go", PluginPath: "/x.so"}, "PluginPath"},
	} {
		err := tc.cfg.Validate()
		if (err == nil) != (tc.field == "") || (err != nil && !strings.Contains(err.Error(), "xla.Config."+tc.field)) {
			t.Errorf("%+v.Validate() = %v, want error naming %q", tc.cfg, err, tc.field)
		}
	}
}

// TestAutoPrefersTPU pins the GoMLX trap: its default plugin order (cuda, cpu, then others) runs a
// TPU VM that also has a CPU plugin on the CPU. gotpu must pick the TPU.
func TestAutoPrefersTPU(t *testing.T) {
	dir := t.TempDir()
	buildFake(t, dir, "pjrt_c_api_cpu_plugin.so", fakeplugin.ExportsAPI)
	tpu := buildFake(t, dir, "pjrt_c_api_tpu_plugin.so", fakeplugin.ExportsAPI)
	p, err := choosePlugin(Config{Device: DeviceAuto}, emptyEnv(map[string]string{pluginEnv: dir}))
	if err != nil || p == nil || p.Kind != DeviceTPU || p.Path != tpu {
		t.Fatalf("choosePlugin(auto) = %+v, %v; want the TPU plugin %s", p, err, tpu)
	}
}

// TestAutoNeverPicksCPUPlugin: with only a CPU plugin around, auto means the pure-Go backend; the
// CPU plugin is used only when asked for.
func TestAutoNeverPicksCPUPlugin(t *testing.T) {
	dir := t.TempDir()
	cpu := buildFake(t, dir, "pjrt_c_api_cpu_plugin.so", fakeplugin.ExportsAPI)
	env := emptyEnv(map[string]string{pluginEnv: dir})
	if p, err := choosePlugin(Config{Device: DeviceAuto}, env); err != nil || p != nil {
		t.Fatalf("choosePlugin(auto) = %+v, %v; want the pure-Go backend", p, err)
	}
	if p, err := choosePlugin(Config{Device: DeviceCPU}, env); err != nil || p == nil || p.Path != cpu {
		t.Fatalf("choosePlugin(cpu) = %+v, %v; want %s", p, err, cpu)
	}
}

func TestLibtpuLocations(t *testing.T) {
	root := t.TempDir()
	site := filepath.Join(root, "python3.11", "site-packages", "libtpu")
	if err := os.MkdirAll(site, 0o755); err != nil {
		t.Fatal(err)
	}
	lib := buildFake(t, site, "libtpu.so", fakeplugin.ExportsAPI)
	env := searchEnv{getenv: func(string) string { return "" }, globRoots: []string{root}}
	p, err := choosePlugin(Config{Device: DeviceAuto}, env)
	if err != nil || p == nil || p.Path != lib {
		t.Fatalf("pip-installed libtpu not found: %+v, %v", p, err)
	}
	// TPU_LIBRARY_PATH wins over the search.
	other := buildFake(t, t.TempDir(), "libtpu-custom.so", fakeplugin.ExportsAPI)
	env.getenv = func(k string) string {
		if k == tpuLibraryEnv {
			return other
		}
		return ""
	}
	if p, err := choosePlugin(Config{Device: DeviceTPU}, env); err != nil || p.Path != other {
		t.Fatalf("TPU_LIBRARY_PATH ignored: %+v, %v", p, err)
	}
}

// TestMissingPluginError: a requested plugin that is not installed fails fast, without network,
// with one message that says where gotpu looked and how to install it.
func TestMissingPluginError(t *testing.T) {
	start := time.Now()
	_, err := openWith(context.Background(), Config{Device: DeviceTPU}, emptyEnv(map[string]string{pluginEnv: t.TempDir()}))
	if err == nil {
		t.Fatal("Open(tpu) succeeded without a plugin")
	}
	if !errors.Is(err, ErrPluginNotFound) {
		t.Errorf("error does not wrap ErrPluginNotFound: %v", err)
	}
	for _, want := range []string{"libtpu", "PJRT_PLUGIN_LIBRARY_PATH", "TPU_LIBRARY_PATH", "never downloads"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Open(tpu) took %v to fail", d)
	}
}

func TestBrokenPluginFiles(t *testing.T) {
	dir := t.TempDir()
	notELF := buildFake(t, dir, "notelf.so", fakeplugin.NotELF)
	noAPI := buildFake(t, dir, "noapi.so", fakeplugin.NoAPI)
	for _, tc := range []struct {
		path, want string
	}{
		{notELF, "not an ELF shared library"},
		{noAPI, "does not export GetPjrtApi"},
		{filepath.Join(dir, "missing.so"), "no such file"},
		{dir, "the directory has none of"},
	} {
		_, err := Open(context.Background(), Config{Device: DeviceTPU, PluginPath: tc.path})
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.path) {
			t.Errorf("Open(PluginPath=%s) = %v; want an error naming the path and %q", tc.path, err, tc.want)
		}
	}
	// A broken libtpu in the search path is reported when TPU is requested.
	bad := t.TempDir()
	buildFake(t, bad, "libtpu.so", fakeplugin.NotELF)
	_, err := openWith(context.Background(), Config{Device: DeviceTPU}, emptyEnv(map[string]string{pluginEnv: bad}))
	if err == nil || !errors.Is(err, ErrNotPlugin) {
		t.Errorf("broken libtpu.so: %v", err)
	}
}

func TestGoRuntimeVirtualDevices(t *testing.T) {
	for _, n := range []int{0, 1, 4, 8} {
		rt := openTestRuntime(t, Config{Device: DeviceGo, NumDevices: n})
		want := max(n, 1)
		if rt.NumDevices() != want || len(rt.Devices()) != want || rt.Kind() != DeviceGo {
			t.Errorf("NumDevices %d: got %d devices of kind %s", n, rt.NumDevices(), rt.Kind())
		}
		for i, d := range rt.Devices() {
			if d.Index != i || !d.Virtual {
				t.Errorf("device %d = %+v", i, d)
			}
		}
		if _, ok := rt.Plugin(); ok {
			t.Error("pure-Go runtime reports a plugin")
		}
	}
}

func TestOpenHonoursContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Open(ctx, Config{Device: DeviceGo}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Open(cancelled ctx) = %v", err)
	}
}

func TestCloseIdempotent(t *testing.T) {
	rt, err := Open(context.Background(), Config{Device: DeviceGo})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestBrokenCUDAInstall: the CUDA search reports broken candidates by path and reason, wrapping
// both ErrPluginNotFound and ErrNotPlugin, and a wrong PluginPath wraps ErrPluginNotFound.
func TestBrokenCUDAInstall(t *testing.T) {
	for _, kind := range []fakeplugin.Kind{fakeplugin.NotELF, fakeplugin.NoAPI} {
		dir := t.TempDir()
		path := buildFake(t, dir, "xla_cuda_plugin.so", kind)
		_, err := openWith(context.Background(), Config{Device: DeviceCUDA}, emptyEnv(map[string]string{pluginEnv: dir}))
		if !errors.Is(err, ErrPluginNotFound) || !errors.Is(err, ErrNotPlugin) || !strings.Contains(err.Error(), path) ||
			!strings.Contains(err.Error(), "jax-cuda13-pjrt") {
			t.Errorf("broken %s: %v", path, err)
		}
	}
	missing := filepath.Join(t.TempDir(), "xla_cuda_plugin.so")
	_, err := Open(context.Background(), Config{Device: DeviceCUDA, PluginPath: missing})
	if !errors.Is(err, ErrPluginNotFound) || !strings.Contains(err.Error(), missing) || strings.Contains(err.Error(), "\n") {
		t.Errorf("missing PluginPath: %q; want one line wrapping ErrPluginNotFound and naming the path", err)
	}
}
