package xla

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// Plugin describes a PJRT plugin file found on this machine.
type Plugin struct {
	Kind string `json:"kind"` // "tpu", "cuda", "cpu" or "pjrt" (unknown kind given by path)
	Path string `json:"path"` // absolute path of the shared library
	// Set once the plugin is loaded (Runtime.Info): the PJRT C API version it implements
	// ("0.81") and the attributes it reports about itself (xla_version, stablehlo_*_version).
	APIVersion string            `json:"pjrt_api_version,omitempty"`
	Attributes map[string]string `json:"attributes,omitempty"`
}

// ErrPluginNotFound is wrapped by the error Open returns when a requested PJRT plugin is not installed.
var ErrPluginNotFound = errors.New("PJRT plugin not found")

// ErrNotPlugin is wrapped by the error returned for a file that is not a usable PJRT plugin.
var ErrNotPlugin = errors.New("not a PJRT plugin")

// pluginEnv is the environment variable go-xla and JAX use for plugin directories (":"-separated).
const pluginEnv = "PJRT_PLUGIN_LIBRARY_PATH"

// tpuLibraryEnv is libtpu's own variable (honoured by JAX and torch_xla) for the libtpu.so path.
const tpuLibraryEnv = "TPU_LIBRARY_PATH"

// pluginFileNames lists, per kind, the file names under which the plugin is installed: go-xla's
// naming first, then the names pip packages (libtpu, jax-cuda*-pjrt) use.
var pluginFileNames = map[string][]string{
	DeviceTPU:  {"pjrt_c_api_tpu_plugin.so", "libtpu.so"},
	DeviceCUDA: {"pjrt_c_api_cuda_plugin.so", "xla_cuda_plugin.so"},
	// xla_cpu_pjrt.so is the name inside the xla-cpu-pjrt wheel (scripts/install-xla-cpu.sh
	// installs it under go-xla's name); lammps-jax-pjrt-cpu uses go-xla's name.
	DeviceCPU: {"pjrt_c_api_cpu_plugin.so", "xla_cpu_pjrt.so"},
}

// searchEnv is what plugin discovery reads from the process environment; tests pass their own.
type searchEnv struct {
	getenv func(string) string
	home   string
	// globRoots are the Python library roots searched for pip-installed plugins.
	globRoots []string
}

func osSearchEnv() searchEnv {
	home, _ := os.UserHomeDir()
	return searchEnv{
		getenv:    os.Getenv,
		home:      home,
		globRoots: []string{"/usr/lib", "/usr/local/lib", "/opt/conda/lib"},
	}
}

// candidateDirs returns the directories searched for a plugin of the given kind, in order.
// Discovery is purely local: it stats files and reads ELF symbol tables, and never downloads.
//
// patterns are the globs that produced the pip locations, reported in "not found" errors so that
// the user sees where a pip install would have had to put the plugin.
func (e searchEnv) candidateDirs(kind string) (dirs, patterns []string) {
	if v := e.getenv(pluginEnv); v != "" {
		for _, d := range strings.Split(v, ":") {
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	if e.home != "" {
		dirs = append(dirs, filepath.Join(e.home, ".local/lib/go-xla"))
	}
	dirs = append(dirs, "/usr/local/lib/go-xla")

	// pip-installed plugins: libtpu/libtpu.so and jax_plugins/xla_cuda1x/xla_cuda_plugin.so under
	// the site-packages of any Python on the machine (a Cloud TPU VM image ships libtpu this way).
	var sub []string
	switch kind {
	case DeviceTPU:
		sub = []string{"libtpu"}
	case DeviceCUDA:
		sub = []string{"jax_plugins/xla_cuda13", "jax_plugins/xla_cuda12"}
	case DeviceCPU:
		// pip install xla-cpu-pjrt, or lammps-jax-pjrt-cpu.
		sub = []string{"xla_plugins/xla_cpu_pjrt", "lammps_jax_pjrt_cpu"}
	}
	var roots []string
	if e.home != "" {
		roots = append(roots, filepath.Join(e.home, ".local/lib"))
	}
	if v := e.getenv("VIRTUAL_ENV"); v != "" {
		roots = append(roots, filepath.Join(v, "lib"))
	}
	roots = append(roots, e.globRoots...)
	for _, root := range roots {
		for _, pkgDir := range []string{"site-packages", "dist-packages"} {
			for _, s := range sub {
				pattern := filepath.Join(root, "python3*", pkgDir, s)
				patterns = append(patterns, pattern)
				matches, _ := filepath.Glob(pattern)
				sort.Sort(sort.Reverse(sort.StringSlice(matches))) // newest Python first
				dirs = append(dirs, matches...)
			}
		}
	}
	if kind == DeviceTPU {
		dirs = append(dirs, "/lib", "/usr/lib", "/usr/local/lib")
	}
	return dirs, patterns
}

// findPlugin looks for a plugin of the given kind. It returns ErrPluginNotFound, with every place
// searched, when there is none. Files that exist but are not plugins are reported, not skipped
// silently, because a broken install is more useful to hear about than "not found".
func (e searchEnv) findPlugin(kind string) (Plugin, []string, error) {
	var searched []string
	var broken []error
	try := func(path string) (Plugin, bool) {
		searched = append(searched, path)
		if _, err := os.Stat(path); err != nil {
			return Plugin{}, false
		}
		if err := checkPluginFile(path); err != nil {
			broken = append(broken, err)
			return Plugin{}, false
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			abs = path
		}
		return Plugin{Kind: kind, Path: abs}, true
	}
	if kind == DeviceTPU {
		if p := e.getenv(tpuLibraryEnv); p != "" {
			if pl, ok := try(p); ok {
				return pl, searched, nil
			}
		}
	}
	dirs, patterns := e.candidateDirs(kind)
	for _, dir := range dirs {
		for _, name := range pluginFileNames[kind] {
			if pl, ok := try(filepath.Join(dir, name)); ok {
				return pl, searched, nil
			}
		}
	}
	for _, p := range patterns {
		searched = append(searched, filepath.Join(p, "*.so"))
	}
	err := fmt.Errorf("%w: no %s plugin", ErrPluginNotFound, kind)
	if len(broken) > 0 {
		err = fmt.Errorf("%w; unusable candidates: %w", err, errors.Join(broken...))
	}
	return Plugin{}, searched, err
}

// pluginFromPath resolves an explicit Config.PluginPath: a plugin file, or a directory holding one.
func pluginFromPath(path, kind string) (Plugin, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return Plugin{}, fmt.Errorf("xla.Config.PluginPath %q: %w", path, err)
	}
	info, err := os.Stat(abs)
	if err != nil {
		return Plugin{}, fmt.Errorf("xla.Config.PluginPath %q: %w: %w", path, ErrPluginNotFound, err)
	}
	if info.IsDir() {
		kinds := []string{kind}
		if kind == DeviceAuto {
			kinds = []string{DeviceTPU, DeviceCUDA, DeviceCPU}
		}
		for _, k := range kinds {
			for _, name := range pluginFileNames[k] {
				p := filepath.Join(abs, name)
				if _, err := os.Stat(p); err == nil {
					if err := checkPluginFile(p); err != nil {
						return Plugin{}, fmt.Errorf("xla.Config.PluginPath %q: %w", path, err)
					}
					return Plugin{Kind: k, Path: p}, nil
				}
			}
		}
		return Plugin{}, fmt.Errorf("xla.Config.PluginPath %q: %w: the directory has none of %v",
			path, ErrPluginNotFound, pluginNamesFor(kinds))
	}
	if err := checkPluginFile(abs); err != nil {
		return Plugin{}, fmt.Errorf("xla.Config.PluginPath %q: %w", path, err)
	}
	k := kind
	if k == DeviceAuto {
		k = kindFromFileName(abs)
	}
	return Plugin{Kind: k, Path: abs}, nil
}

func pluginNamesFor(kinds []string) []string {
	var names []string
	for _, k := range kinds {
		names = append(names, pluginFileNames[k]...)
	}
	return names
}

// kindFromFileName guesses the platform of a plugin from its file name.
func kindFromFileName(path string) string {
	base := strings.ToLower(filepath.Base(path))
	for _, k := range []string{DeviceTPU, DeviceCUDA, DeviceCPU} {
		if slices.Contains(pluginFileNames[k], base) || strings.Contains(base, k) {
			return k
		}
	}
	if strings.Contains(base, "gpu") {
		return DeviceCUDA
	}
	return "pjrt"
}

// checkPluginFile verifies, without loading it, that path is an ELF shared library exporting
// GetPjrtApi. Loading a wrong file with dlopen can run arbitrary initialisers or abort the process;
// reading the symbol table cannot.
func checkPluginFile(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: %w: not an ELF shared library (%w)", path, ErrNotPlugin, err)
	}
	defer f.Close()
	if f.Type != elf.ET_DYN {
		return fmt.Errorf("%s: %w: ELF type %s, want a shared library", path, ErrNotPlugin, f.Type)
	}
	syms, err := f.DynamicSymbols()
	if err != nil {
		return fmt.Errorf("%s: %w: reading dynamic symbols: %w", path, ErrNotPlugin, err)
	}
	for _, s := range syms {
		if s.Name == "GetPjrtApi" && elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Section != elf.SHN_UNDEF {
			return nil
		}
	}
	return fmt.Errorf("%s: %w: it does not export GetPjrtApi", path, ErrNotPlugin)
}

// installHint is the paragraph shown when a plugin is missing.
func installHint(kind string) string {
	switch kind {
	case DeviceTPU:
		return "On a Cloud TPU VM install libtpu (pip install libtpu, or the jax[tpu] extra) and gotpu finds " +
			"libtpu/libtpu.so in the Python site-packages; or point TPU_LIBRARY_PATH at libtpu.so, or " +
			"PJRT_PLUGIN_LIBRARY_PATH at a directory holding pjrt_c_api_tpu_plugin.so or libtpu.so, or pass " +
			"--plugin_path. gotpu never downloads plugins by itself; `gotpu devices --device go` always works."
	case DeviceCUDA:
		return "Install the CUDA PJRT plugin (pip install jax-cuda13-pjrt or jax-cuda12-pjrt; gotpu finds " +
			"jax_plugins/xla_cuda1x/xla_cuda_plugin.so in the Python site-packages), or point " +
			"PJRT_PLUGIN_LIBRARY_PATH at a directory holding pjrt_c_api_cuda_plugin.so, or pass --plugin_path. " +
			"gotpu never downloads plugins by itself; `gotpu devices --device go` always works."
	default:
		return "Install XLA's CPU plugin with scripts/install-xla-cpu.sh (make install-xla-cpu: the pinned " +
			"xla-cpu-pjrt wheel, into ~/.local/lib/go-xla), or pip install xla-cpu-pjrt (gotpu finds " +
			"xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so in the Python site-packages), or point PJRT_PLUGIN_LIBRARY_PATH at its " +
			"directory, or pass --plugin_path. gotpu never downloads plugins by itself; the pure-Go " +
			"backend (--device go) needs no plugin."
	}
}
