//go:build !noxla

package xla

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"

	"github.com/gotpu/gotpu/xla/compilecache"
)

// cacheKeyBase is the part of every cache key that a runtime's programs share: what changes the
// executable a plugin compiles from the same program text, or whether another binary may load it.
// The plugin file's size and modification time stand in for its contents (a reinstalled plugin
// invalidates its entries, even at the same version), and the environment variables the
// compilers read are part of it.
func cacheKeyBase(p Plugin, platform, platformVersion string, devices []string, getenv func(string) string) []compilecache.KeyField {
	f := []compilecache.KeyField{
		{Name: "gotpu", Value: gotpuBuild()},
		{Name: "plugin_path", Value: p.Path},
		{Name: "plugin_file", Value: fileStamp(p.Path)},
		{Name: "pjrt_api_version", Value: p.APIVersion},
		{Name: "plugin_attributes", Value: joinSorted(p.Attributes)},
		{Name: "platform", Value: platform},
		{Name: "platform_version", Value: platformVersion},
		{Name: "devices", Value: strconv.Itoa(len(devices))},
		{Name: "device_kinds", Value: strings.Join(devices, "\n")},
	}
	if p.Kind == DeviceCPU {
		// XLA's CPU plugin compiles for the host's instruction set and loads a stored executable
		// on any host, warning only: one compiled where AVX-512 exists dies of SIGILL where it
		// does not. A cache directory shared by machines must not mix them.
		f = append(f, compilecache.KeyField{Name: "host_cpu", Value: hostCPU()})
	}
	// What the compilers read from the environment (the plugin's path is in plugin_path already).
	return append(f,
		compilecache.KeyField{Name: "env_XLA_FLAGS", Value: getenv("XLA_FLAGS")},
		compilecache.KeyField{Name: "env_LIBTPU_INIT_ARGS", Value: getenv("LIBTPU_INIT_ARGS")})
}

// hostCPU names the host's processor and its instruction-set extensions: /proc/cpuinfo's first
// "model name" and "flags" (Linux), else the architecture alone.
func hostCPU() string {
	id := runtime.GOARCH
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return id
	}
	var model, flags string
	for l := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(l, ":")
		if !ok {
			continue
		}
		switch k = strings.TrimSpace(k); {
		case model == "" && k == "model name":
			model = strings.TrimSpace(v)
		case flags == "" && (k == "flags" || k == "Features"): // x86, arm64
			flags = strings.TrimSpace(v)
		}
	}
	return id + " " + model + " [" + flags + "]"
}

// gotpuBuild names this build of gotpu: the main module's version and VCS revision (a checkout
// build), or "unknown".
func gotpuBuild() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Path + "@" + bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" || s.Key == "vcs.modified" {
			v += " " + s.Key + "=" + s.Value
		}
	}
	return v
}

func fileStamp(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return "unreadable"
	}
	return fmt.Sprintf("size=%d mtime=%d", st.Size(), st.ModTime().UnixNano())
}

func joinSorted(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, m[k])
	}
	return b.String()
}
