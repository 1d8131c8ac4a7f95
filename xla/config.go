package xla

import (
	"fmt"
	"strings"
	"time"

	"github.com/gotpu/gotpu/xla/compilecache"
)

// Device kinds accepted by Config.Device.
const (
	DeviceAuto = "auto" // a local accelerator plugin (TPU, then CUDA) if one is installed, else the pure-Go backend
	DeviceTPU  = "tpu"  // libtpu through PJRT
	DeviceCUDA = "cuda" // the CUDA PJRT plugin ("gpu" is accepted as an alias)
	DeviceCPU  = "cpu"  // the XLA CPU PJRT plugin
	DeviceGo   = "go"   // the pure-Go backend (Config.GoBackend): always available, no cgo, no plugin
)

// Pure-Go backends accepted by Config.GoBackend.
const (
	GoBackendGotpu    = "gotpu"    // gotpu's own CPU backend (the default): GEMM and float32/bfloat16 elementwise, reductions and comparisons native, other ops on simplego
	GoBackendSimpleGo = "simplego" // GoMLX's simplego, unchanged
)

// DefaultGoBackend is the pure-Go backend used when Config.GoBackend is empty. gotpu's own backend
// trains issue #7's benchmark GPT-2 through the trainer's step at 5.3x simplego's tokens/s on a
// 2-core AVX-512 machine (`make bench-pytorch`), and it runs every operation it does not implement
// natively on simplego, so it accepts every graph simplego accepts.
const DefaultGoBackend = GoBackendGotpu

// Config selects and configures the device runtime. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// Device is one of "auto", "tpu", "cuda" (alias "gpu"), "cpu" or "go".
	Device string `json:"device"`

	// NumDevices is the number of devices (replicas) to use. 0 means all devices the plugin exposes,
	// and 1 on the pure-Go backend. On the pure-Go backend any positive number gives that many
	// virtual devices, so data-parallel code runs and is tested without an accelerator.
	NumDevices int `json:"num_devices"`

	// PluginPath is a PJRT plugin file (or a directory holding one) to use instead of searching.
	PluginPath string `json:"plugin_path,omitempty"`

	// GoBackend chooses the pure-Go backend that runs Device "go" (and "auto" when no accelerator
	// plugin is found): "" (DefaultGoBackend) or "gotpu" for gotpu's own CPU backend (matrix
	// products on gotpu's AVX-512/AVX2 GEMM, everything else on simplego), "simplego" for
	// GoMLX's simplego alone. Case and surrounding spaces are ignored.
	GoBackend string `json:"go_backend,omitempty"`

	// StockDotGradients makes graphs built on this runtime use GoMLX's own Dot/DotGeneral gradients
	// instead of gotpu's. They are correct but, on the pure-Go backend, orders of magnitude slower
	// and larger; the option exists so benchmarks can show the difference.
	StockDotGradients bool `json:"stock_dot_gradients,omitempty"`

	// GoFallbackBF16 makes gotpu's pure-Go backend leave bfloat16 elementwise operations,
	// reductions and transposes, and comparisons, to GoMLX's simplego, as before they were
	// native. Results are bitwise the same either way; the option exists so tests can check that
	// over whole training steps and benchmarks can show the difference.
	GoFallbackBF16 bool `json:"go_fallback_bf16,omitempty"`

	// CompilationCache keeps the executables a PJRT plugin compiles on disk, so that the next
	// start of the same program (a restart, a resume after preemption, the next job with the same
	// shapes) loads them instead of compiling: see package compilecache. Dir "" is off. The
	// pure-Go backend compiles nothing worth caching, so Device "go" with a Dir is refused.
	CompilationCache compilecache.Config `json:"compilation_cache,omitzero"`

	// ExecutionDelay makes every dispatched execution wait this long before it runs: a kernel
	// made slow on purpose, for tests that show the host does not wait for the device. Zero in
	// production.
	ExecutionDelay time.Duration `json:"-"`
}

// DefaultConfig returns the configuration used when nothing is specified: automatic device choice,
// every device the plugin exposes (one on the pure-Go backend).
func DefaultConfig() Config {
	return Config{Device: DeviceAuto}
}

// normalizedDevice maps aliases and case to the canonical device kind.
func normalizedDevice(d string) string {
	d = strings.ToLower(strings.TrimSpace(d))
	switch d {
	case "gpu":
		return DeviceCUDA
	case "", "default":
		return DeviceAuto
	}
	return d
}

// Validate reports the first invalid field, naming it.
func (c Config) Validate() error {
	switch normalizedDevice(c.Device) {
	case DeviceAuto, DeviceTPU, DeviceCUDA, DeviceCPU, DeviceGo:
	default:
		return fmt.Errorf("xla.Config.Device: %q is not one of auto, tpu, cuda, gpu, cpu, go", c.Device)
	}
	if c.NumDevices < 0 {
		return fmt.Errorf("xla.Config.NumDevices: %d is negative (0 means all devices)", c.NumDevices)
	}
	if c.NumDevices > maxVirtualDevices {
		return fmt.Errorf("xla.Config.NumDevices: %d is more than %d", c.NumDevices, maxVirtualDevices)
	}
	switch c.goBackend() {
	case GoBackendSimpleGo, GoBackendGotpu:
	default:
		return fmt.Errorf("xla.Config.GoBackend: %q is not one of simplego, gotpu", c.GoBackend)
	}
	if d := normalizedDevice(c.Device); strings.TrimSpace(c.GoBackend) != "" && d != DeviceGo && d != DeviceAuto {
		return fmt.Errorf("xla.Config.GoBackend: set to %q but Device is %q, which does not use the pure-Go backend", c.GoBackend, c.Device)
	}
	if c.ExecutionDelay < 0 {
		return fmt.Errorf("xla.Config.ExecutionDelay: %s is negative", c.ExecutionDelay)
	}
	if c.CompilationCache.Dir != "" {
		if normalizedDevice(c.Device) == DeviceGo {
			return fmt.Errorf("xla.Config.CompilationCache.Dir: set to %q but Device is \"go\": the pure-Go backend "+
				"compiles no PJRT executables (its compile is fusion planning, milliseconds); remove the cache "+
				"directory or choose a PJRT device (tpu, cuda, cpu)", c.CompilationCache.Dir)
		}
		if err := c.CompilationCache.Validate(); err != nil {
			return fmt.Errorf("xla.Config.CompilationCache: %w", err)
		}
	}
	if c.PluginPath != "" && normalizedDevice(c.Device) == DeviceGo {
		return fmt.Errorf("xla.Config.PluginPath: set to %q but Device is \"go\", which uses no plugin", c.PluginPath)
	}
	return nil
}

// goBackend is the pure-Go backend c asks for, canonical: DefaultGoBackend when unset.
func (c Config) goBackend() string {
	b := strings.ToLower(strings.TrimSpace(c.GoBackend))
	if b == "" {
		return DefaultGoBackend
	}
	return b
}

// maxVirtualDevices bounds NumDevices; the largest single-host TPU slice exposes 8 devices, and
// virtual devices beyond a few hundred only make tests slow.
const maxVirtualDevices = 1024
