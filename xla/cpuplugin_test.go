//go:build !noxla

package xla

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gomlx/go-xla/pkg/pjrt"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/internal/fakeplugin"
)

// openCPUPlugin opens XLA's CPU PJRT plugin (scripts/install-xla-cpu.sh) with n devices; it skips
// without the plugin, and fails under CI, where .ci/run installs it. (xla/pjrttest does the same
// for other packages; it imports this one, so this package's tests cannot use it.)
func openCPUPlugin(t *testing.T, n int) *Runtime {
	t.Helper()
	rt, err := Open(context.Background(), Config{Device: DeviceCPU, NumDevices: n})
	if errors.Is(err, ErrPluginNotFound) {
		if v := os.Getenv("CI"); v != "" && v != "false" && v != "0" {
			t.Fatalf("CI is set and XLA's CPU PJRT plugin is not installed (.ci/run installs it): %v", err)
		}
		t.Skipf("XLA's CPU PJRT plugin is not installed (bash scripts/install-xla-cpu.sh): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// TestCPUPluginDeviceCount: Config.NumDevices reaches XLA's CPU plugin as cpu_device_count (without
// it the plugin makes 4 devices, and 8 was refused as "exposes 4 devices"), and the runtime reports
// the plugin's PJRT C API version and attributes.
func TestCPUPluginDeviceCount(t *testing.T) {
	for _, n := range []int{1, 2, 8} {
		rt := openCPUPlugin(t, n)
		if rt.NumDevices() != n || rt.Backend().NumDevices() != n || rt.Kind() != DeviceCPU {
			t.Fatalf("NumDevices %d: runtime has %d, the plugin %d, kind %s", n, rt.NumDevices(), rt.Backend().NumDevices(), rt.Kind())
		}
		for i, d := range rt.Devices() {
			if d.Index != i || d.Virtual || d.Kind != DeviceCPU || !strings.HasPrefix(d.Description, "TFRT_CPU_") {
				t.Errorf("device %d = %+v", i, d)
			}
		}
		info := rt.Info()
		if info.Plugin == nil || !regexp.MustCompile(`^0\.[0-9]+$`).MatchString(info.Plugin.APIVersion) {
			t.Fatalf("Info().Plugin = %+v: want the PJRT C API version as 0.N", info.Plugin)
		}
		if info.Plugin.Attributes["xla_version"] == "" {
			t.Errorf("plugin attributes %v lack xla_version", info.Plugin.Attributes)
		}
	}
}

// TestClientOptions: only the CPU plugin is given cpu_device_count (an int64, as XLA reads it);
// libtpu and the CUDA plugin get no options, and NumDevices 0 keeps the plugin's default.
func TestClientOptions(t *testing.T) {
	if got := clientOptions(DeviceCPU, 8); len(got) != 1 || got["cpu_device_count"] != int64(8) {
		t.Errorf("clientOptions(cpu, 8) = %#v", got)
	}
	for _, tc := range []struct {
		kind string
		n    int
	}{{DeviceCPU, 0}, {DeviceTPU, 8}, {DeviceCUDA, 2}, {"pjrt", 4}} {
		if got := clientOptions(tc.kind, tc.n); got != nil {
			t.Errorf("clientOptions(%s, %d) = %#v, want none", tc.kind, tc.n, got)
		}
	}
	var _ pjrt.NamedValuesMap = clientOptions(DeviceCPU, 1)
}

// TestCPUPluginRunsPrograms executes on the plugin (not only traces): a program with a matrix
// product, a reduction and a gradient gives the pure-Go backend's numbers on every device count,
// through the runtime's dispatch queue and transfers, with the counters the trainer reports.
func TestCPUPluginRunsPrograms(t *testing.T) {
	fn := func(x, w *graph.Node) []*graph.Node {
		y := graph.Tanh(graph.DotGeneral(x, []int{1}, nil, w, []int{0}, nil))
		loss := graph.ReduceAllMean(graph.Mul(y, y))
		return []*graph.Node{loss, graph.Gradient(loss, w)[0]}
	}
	xs, ws := make([]float32, 8*16), make([]float32, 16*4)
	for i := range xs {
		xs[i] = float32(i%11)/11 - 0.5
	}
	for i := range ws {
		ws[i] = float32(i%5)/10 - 0.2
	}
	run := func(rt *Runtime) (float32, []float32) {
		t.Helper()
		prog, err := rt.Compile("tanh-dot", fn)
		if err != nil {
			t.Fatal(err)
		}
		defer prog.Close()
		x := tensors.FromFlatDataAndDimensions(xs, 8, 16)
		w := tensors.FromFlatDataAndDimensions(ws, 16, 4)
		if err := rt.Transfer(0, x, w); err != nil {
			t.Fatal(err)
		}
		var outs []*tensors.Tensor
		ex, err := rt.Dispatch(context.Background(), "step", nil, func() error {
			var err error
			outs, err = prog.Run(x, w)
			rt.ReportPrograms(1)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		var loss float32
		var grad []float32
		if err := rt.Read(context.Background(), "loss", func() error {
			loss = tensors.ToScalar[float32](outs[0])
			grad = tensors.MustCopyFlatData[float32](outs[1])
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if ex.Err() != nil {
			t.Fatal(ex.Err())
		}
		if st := rt.Stats(); st.Programs != 1 || st.Transfers != 2 || st.TransferBytes != int64(4*(len(xs)+len(ws))) {
			t.Errorf("%s: stats %+v: want 1 program, 2 transfers of %d bytes", rt.Kind(), st, 4*(len(xs)+len(ws)))
		}
		return loss, grad
	}
	wantLoss, wantGrad := run(openTestRuntime(t, Config{Device: DeviceGo}))
	for _, n := range []int{1, 8} {
		loss, grad := run(openCPUPlugin(t, n))
		if d := loss - wantLoss; d > 1e-6 || d < -1e-6 {
			t.Errorf("%d devices: loss %v, pure-Go backend %v", n, loss, wantLoss)
		}
		for i := range grad {
			if d := grad[i] - wantGrad[i]; d > 1e-6 || d < -1e-6 {
				t.Fatalf("%d devices: grad[%d] = %v, pure-Go backend %v", n, i, grad[i], wantGrad[i])
			}
		}
	}
}

// TestCPUPluginSitePackages: `pip install xla-cpu-pjrt` (xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so)
// and lammps-jax-pjrt-cpu (lammps_jax_pjrt_cpu/pjrt_c_api_cpu_plugin.so) are found in
// site-packages, as libtpu and JAX's CUDA plugin are; a directory given as --plugin_path holding
// xla_cpu_pjrt.so is a CPU plugin.
func TestCPUPluginSitePackages(t *testing.T) {
	for _, tc := range []struct{ sub, name string }{
		{"xla_plugins/xla_cpu_pjrt", "xla_cpu_pjrt.so"},
		{"lammps_jax_pjrt_cpu", "pjrt_c_api_cpu_plugin.so"},
	} {
		root := t.TempDir()
		dir := filepath.Join(root, "python3.12", "site-packages", tc.sub)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		lib := buildFake(t, dir, tc.name, fakeplugin.ExportsAPI)
		env := searchEnv{getenv: func(string) string { return "" }, globRoots: []string{root}}
		p, err := choosePlugin(Config{Device: DeviceCPU}, env)
		if err != nil || p == nil || p.Path != lib || p.Kind != DeviceCPU {
			t.Errorf("%s: pip-installed CPU plugin not found: %+v, %v", tc.sub, p, err)
		}
		// "auto" still never picks the CPU plugin by itself.
		if p, err := choosePlugin(Config{Device: DeviceAuto}, env); err != nil || p != nil {
			t.Errorf("%s: auto chose %+v, %v; want the pure-Go backend", tc.sub, p, err)
		}
		if tc.name == "xla_cpu_pjrt.so" {
			p, err := pluginFromPath(dir, DeviceAuto)
			if err != nil || p.Kind != DeviceCPU || p.Path != lib {
				t.Errorf("--plugin_path %s: %+v, %v", dir, p, err)
			}
		}
	}
	_, err := choosePlugin(Config{Device: DeviceCPU}, emptyEnv(map[string]string{pluginEnv: t.TempDir()}))
	if err == nil || !strings.Contains(err.Error(), "install-xla-cpu.sh") || !strings.Contains(err.Error(), "xla_plugins/xla_cpu_pjrt") {
		t.Errorf("missing CPU plugin: %v; want the install script and the site-packages place named", err)
	}
}
