package xla

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"

	"github.com/gotpu/gotpu/xla/internal/gobackend"
)

// Device is one device (replica) of a runtime.
type Device struct {
	Index       int    `json:"index"`
	Kind        string `json:"kind"`    // "tpu", "cuda", "cpu", "pjrt" or "go"
	Virtual     bool   `json:"virtual"` // true for the pure-Go backend's virtual devices
	Description string `json:"description"`
}

// Runtime is an opened device backend with the devices gotpu will use. It is safe for concurrent
// use; Close releases the backend and must be called once the runtime's graphs are no longer used.
type Runtime struct {
	cfg     Config
	kind    string
	plugin  *Plugin
	backend backends.Backend
	devices []Device
	// goBackend is the pure-Go backend in use (GoBackendGotpu or GoBackendSimpleGo); "" on a plugin.
	goBackend string
	// queue runs dispatched executions in order on the runtime's executor goroutine (queue.go);
	// stream is the default stream of Runtime.Dispatch and Read.
	queue  *queue
	stream *Stream
	// compile is the PJRT compile hook's binding (figures and cache); nil on the pure-Go backend.
	compile compileSource

	closeOnce sync.Once
}

// Open opens the device runtime described by cfg.
//
// With Device "auto" it uses, in order: cfg.PluginPath; a locally installed TPU plugin (libtpu);
// a CUDA plugin; else the pure-Go backend. It never downloads anything: a requested plugin that is
// not installed is an error (wrapping ErrPluginNotFound) naming every place searched and how to
// install it. Loading a plugin is a blocking C call that ctx cannot interrupt; ctx is checked
// before and after it.
func Open(ctx context.Context, cfg Config) (*Runtime, error) {
	return openWith(ctx, cfg, osSearchEnv())
}

func openWith(ctx context.Context, cfg Config, env searchEnv) (rt *Runtime, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("xla.Open: %w", err)
	}
	registerDotGradients()
	defer Recover(&err, "xla.Open")

	plugin, err := choosePlugin(cfg, env)
	if err != nil {
		return nil, err
	}
	rt = &Runtime{cfg: cfg}
	if plugin == nil {
		if err := rt.openGo(); err != nil {
			return nil, err
		}
	} else {
		if err := rt.openPJRT(*plugin); err != nil {
			return nil, err
		}
	}
	if cfg.StockDotGradients {
		stockBackends.Store(rt.backend, struct{}{})
	}
	rt.queue = newQueue(len(rt.devices), cfg.ExecutionDelay)
	rt.stream = rt.NewStream()
	if err := ctx.Err(); err != nil {
		_ = rt.Close()
		return nil, fmt.Errorf("xla.Open: %w", err)
	}
	slog.Debug("gotpu: runtime opened", "backend", rt.kind, "go_backend", rt.goBackend, "plugin", rt.pluginPath(), "devices", len(rt.devices))
	return rt, nil
}

// choosePlugin decides which PJRT plugin, if any, cfg asks for; nil means the pure-Go backend.
//
// For "auto" the order is TPU, then CUDA. GoMLX's own default order (cuda, cpu, then the rest)
// would run a TPU VM that also has a CPU plugin on the CPU without a word; gotpu prefers the
// accelerator it exists for, and never picks the CPU plugin implicitly.
func choosePlugin(cfg Config, env searchEnv) (*Plugin, error) {
	device := normalizedDevice(cfg.Device)
	switch {
	case device == DeviceGo:
		return nil, nil
	case cfg.PluginPath != "":
		p, err := pluginFromPath(cfg.PluginPath, device)
		if err != nil {
			return nil, fmt.Errorf("xla.Open: %w", err)
		}
		return &p, nil
	case device == DeviceAuto:
		for _, kind := range []string{DeviceTPU, DeviceCUDA} {
			p, _, err := env.findPlugin(kind)
			if err == nil {
				return &p, nil
			}
			if errors.Is(err, ErrNotPlugin) {
				slog.Warn("gotpu: ignoring a broken plugin installation", "kind", kind, "error", err)
			}
		}
		return nil, nil
	}
	p, searched, err := env.findPlugin(device)
	if err != nil {
		return nil, fmt.Errorf("xla.Open: device %q: %w. Searched: %s. %s",
			device, err, strings.Join(searched, ", "), installHint(device))
	}
	return &p, nil
}

// simpleGoConfig runs ops one at a time on the calling goroutine. SimpleGo's default "dynamic"
// executor runs independent ops on a worker pool that waits on itself when several DotGenerals are
// ready at once (a deadlock seen here with GoMLX v0.26.0), and a panic inside a pool goroutine kills
// the process; sequential execution avoids both, and DotGeneral still splits large products over
// the cores.
const simpleGoConfig = "ops_sequential"

func (r *Runtime) openGo() error {
	var b backends.Backend
	var err error
	name := r.cfg.goBackend()
	n := max(r.cfg.NumDevices, 1)
	switch name {
	case GoBackendGotpu:
		b, err = gobackend.New(gobackend.Config{NumDevices: n, FallbackBF16: r.cfg.GoFallbackBF16})
	case GoBackendSimpleGo:
		if n > 1 {
			return fmt.Errorf("xla.Config.NumDevices: %d virtual devices need gotpu's backend (GoBackend %q): "+
				"simplego has one device and no collectives to all-reduce across replicas", n, GoBackendGotpu)
		}
		b, err = simplego.New(simpleGoConfig)
	default: // Validate rejects it first; kept so a new name cannot silently open the wrong backend
		err = fmt.Errorf("xla.Config.GoBackend: %q is not one of simplego, gotpu", r.cfg.GoBackend)
	}
	if err != nil {
		return fmt.Errorf("xla.Open: pure-Go backend %q: %w", name, err)
	}
	r.goBackend = name
	r.kind = DeviceGo
	r.backend = b
	r.devices = make([]Device, n)
	for i := range n {
		r.devices[i] = Device{Index: i, Kind: DeviceGo, Virtual: true,
			Description: fmt.Sprintf("virtual device %d of %d on the host CPU (pure Go)", i, n)}
	}
	return nil
}

// Backend returns the GoMLX backend. It belongs to the runtime: do not Finalize it.
func (r *Runtime) Backend() backends.Backend { return r.backend }

// Kind returns the platform in use: "tpu", "cuda", "cpu", "pjrt" or "go".
func (r *Runtime) Kind() string { return r.kind }

// GoBackend returns the pure-Go backend in use, GoBackendGotpu or GoBackendSimpleGo, and "" when
// the runtime runs on a PJRT plugin.
func (r *Runtime) GoBackend() string { return r.goBackend }

// Plugin returns the PJRT plugin loaded, if any.
func (r *Runtime) Plugin() (Plugin, bool) {
	if r.plugin == nil {
		return Plugin{}, false
	}
	return *r.plugin, true
}

func (r *Runtime) pluginPath() string {
	if r.plugin == nil {
		return ""
	}
	return r.plugin.Path
}

// Devices returns the devices (replicas) in use.
func (r *Runtime) Devices() []Device { return append([]Device(nil), r.devices...) }

// NumDevices returns the number of devices (replicas) in use.
func (r *Runtime) NumDevices() int { return len(r.devices) }

// Info is a printable summary of a runtime (what `gotpu devices` shows).
type Info struct {
	Backend string `json:"backend"`
	// GoBackend is the pure-Go backend ("gotpu" or "simplego") when Backend is "go", else "".
	// Always present in JSON, so that every runtime's Info has the same keys.
	GoBackend   string   `json:"go_backend"`
	Description string   `json:"description"`
	Plugin      *Plugin  `json:"plugin"`
	NumDevices  int      `json:"num_devices"`
	Devices     []Device `json:"devices"`
	XLACompiled bool     `json:"xla_compiled_in"`
}

// Info summarises the runtime.
func (r *Runtime) Info() Info {
	return Info{
		Backend:     r.kind,
		GoBackend:   r.goBackend,
		Description: r.backend.Description(),
		Plugin:      r.plugin,
		NumDevices:  len(r.devices),
		Devices:     r.Devices(),
		XLACompiled: xlaCompiledIn,
	}
}

// Close stops the executor (the execution in flight finishes; queued ones fail with ErrClosed)
// and releases the backend. It is idempotent.
func (r *Runtime) Close() error {
	var err error
	r.closeOnce.Do(func() {
		if r.queue != nil {
			r.queue.close() // after the execution in flight: it uses the backend
		}
		if r.backend == nil {
			return
		}
		stockBackends.Delete(r.backend)
		if r.compile != nil {
			r.compile.release() // before the client goes: its address may be reused
		}
		defer Recover(&err, "xla.Runtime.Close")
		r.backend.Finalize()
	})
	return err
}

// DeviceBytes returns the bytes of live buffers on each device, from the backend's own buffer
// accounting, and whether the backend keeps one: gotpu's CPU backend does (the FSDP tests and
// benchmarks measure what each virtual device holds between steps with it); GoMLX's simplego and
// PJRT plugins (go-xla v0.1.4 has no device memory statistics) do not.
func (r *Runtime) DeviceBytes() ([]int64, bool) {
	if b, ok := r.backend.(*gobackend.Backend); ok {
		return b.DeviceBytes(), true
	}
	return nil, false
}
