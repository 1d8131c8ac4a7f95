//go:build !noxla

package xla

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/gomlx/go-xla/pkg/pjrt"
	"github.com/gomlx/gomlx/backends"
	gomlxxla "github.com/gomlx/gomlx/backends/xla"

	"github.com/gotpu/gotpu/xla/compilecache"
)

// xlaCompiledIn tells whether this binary can load PJRT plugins (false with the noxla build tag).
const xlaCompiledIn = true

// GoMLX's XLA backend downloads the CPU plugin from GitHub (and CUDA/TPU plugins from PyPI) the
// first time it is opened by name. gotpu never downloads at run time: it always opens plugins by
// absolute path (which skips the installer), and it switches the installer off for any other code
// in the process that calls backends.New(). Users who want it can opt back in explicitly.
func init() {
	gomlxxla.EnableAutoInstall(false)
}

func (r *Runtime) openPJRT(p Plugin) (err error) {
	// go-xla v0.1.4 returns a nil plugin and a nil error when GetPjrtApi returns NULL, and the
	// client creation that follows dereferences it: recover and name the file.
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("xla.Open: loading the %s PJRT plugin %s failed (%v): is it a working PJRT plugin "+
				"for this machine?", p.Kind, p.Path, v)
		}
	}()
	// Loading the plugin and hooking its compile happen under one lock, so that no other
	// runtime uses a plugin while its table is swapped (compilehook_pjrt.go).
	hooks.openMu.Lock()
	defer hooks.openMu.Unlock()
	b, err := gomlxxla.NewWithOptions(p.Path, clientOptions(p.Kind, r.cfg.NumDevices))
	if err != nil {
		return fmt.Errorf("xla.Open: loading the %s PJRT plugin %s: %w", p.Kind, p.Path, err)
	}
	r.kind = p.Kind
	describeLoaded(&p)
	r.plugin = &p
	r.backend = b
	if err := r.selectPJRTDevices(p.Kind); err != nil {
		b.Finalize()
		return err
	}
	if err := r.hookCompile(b, p); err != nil {
		b.Finalize()
		return err
	}
	return nil
}

// hookCompile registers the runtime's client with the compile hook: compile figures always, and
// the persistent cache when Config.CompilationCache.Dir is set. A plugin gotpu cannot hook runs
// as before, with a warning (and without a cache); a cache directory that cannot be opened is an
// error naming it.
func (r *Runtime) hookCompile(b *gomlxxla.Backend, p Plugin) error {
	var store *compilecache.Store
	if r.cfg.CompilationCache.Dir != "" {
		s, err := compilecache.Open(r.cfg.CompilationCache, slog.Default())
		if err != nil {
			return fmt.Errorf("xla.Open: xla.Config.CompilationCache: %w", err)
		}
		store = s
	}
	client, err := pjrtClientOf(b)
	if err != nil {
		slog.Warn("gotpu: no compile figures or compilation cache for this plugin", "plugin", p.Path, "reason", err)
		return nil
	}
	devices := make([]string, b.NumDevices())
	for i := range devices {
		devices[i] = b.DeviceDescription(backends.DeviceNum(i))
	}
	base := cacheKeyBase(p, client.Platform(), client.PlatformVersion(), devices, os.Getenv)
	binding, err := installCompileHook(b, store, base, slog.Default())
	if err != nil {
		slog.Warn("gotpu: no compile figures or compilation cache for this plugin", "plugin", p.Path, "reason", err)
		return nil
	}
	r.compile = binding
	return nil
}

// clientOptions are the PJRT client create options gotpu passes. XLA's CPU plugin makes 4 devices
// unless told otherwise by the int64 option cpu_device_count (XLA_FLAGS'
// --xla_force_host_platform_device_count does not reach a PJRT client), so Config.NumDevices is
// passed as that; other plugins get none (libtpu and the CUDA plugin reject options they do not know).
func clientOptions(kind string, numDevices int) pjrt.NamedValuesMap {
	if kind != DeviceCPU || numDevices <= 0 {
		return nil
	}
	return pjrt.NamedValuesMap{"cpu_device_count": int64(numDevices)}
}

// describeLoaded fills in what the loaded plugin says of itself: its PJRT C API version and the
// attributes it reports (XLA's CPU plugin: stablehlo_current_version and the like). go-xla keeps
// loaded plugins by path, so GetPlugin returns the one GoMLX just loaded, without loading again.
func describeLoaded(p *Plugin) {
	pl, err := pjrt.GetPlugin(p.Path)
	if err != nil || pl == nil {
		return
	}
	major, minor := pl.Version()
	p.APIVersion = fmt.Sprintf("%d.%d", major, minor)
	if attrs := pl.Attributes(); len(attrs) > 0 {
		p.Attributes = make(map[string]string, len(attrs))
		for k, v := range attrs {
			p.Attributes[k] = fmt.Sprint(v)
		}
	}
}

// selectPJRTDevices records the first cfg.NumDevices (or all) of the plugin's devices.
func (r *Runtime) selectPJRTDevices(kind string) error {
	avail := r.backend.NumDevices()
	n := r.cfg.NumDevices
	if n == 0 {
		n = avail
	}
	if n > avail {
		return fmt.Errorf("xla.Open: xla.Config.NumDevices is %d but the %s plugin (%s) exposes %d devices",
			n, kind, r.pluginPath(), avail)
	}
	r.devices = make([]Device, n)
	for i := range n {
		r.devices[i] = Device{Index: i, Kind: kind, Description: r.backend.DeviceDescription(backends.DeviceNum(i))}
	}
	return nil
}
