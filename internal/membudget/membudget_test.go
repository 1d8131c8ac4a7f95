package membudget

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// writeFiles creates files under root from a map of relative path to content.
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const meminfo = "MemTotal:       24683664 kB\nMemFree:        22819524 kB\nMemAvailable:   20000000 kB\n"

// TestProbeBounds: each of the three bounds decides when it is the smallest, and is named.
func TestProbeBounds(t *testing.T) {
	const gib = int64(1) << 30
	cases := []struct {
		name    string
		files   map[string]string
		asLimit int64
		want    int64
		source  string
	}{
		{"meminfo only", map[string]string{"proc/meminfo": meminfo, "proc/self/cgroup": "0::/\n"},
			0, 20000000 * 1024, "MemAvailable"},
		{"cgroup v2 limit less usage less inactive file", map[string]string{
			"proc/meminfo":                    meminfo,
			"proc/self/cgroup":                "0::/ci/job\n",
			"sys/fs/cgroup/ci/job/memory.max": "max\n",
			"sys/fs/cgroup/ci/memory.max":     "4294967296\n", // the parent's limit applies to the child
			"sys/fs/cgroup/ci/memory.current": "3221225472\n",
			"sys/fs/cgroup/ci/memory.stat":    "anon 1\ninactive_file 1073741824\nactive_file 5\n",
		}, 0, 4*gib - (3*gib - gib), "cgroup memory.max"},
		{"cgroup v1 seen from inside a container", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n",
			// the container's own cgroup is mounted at the root of the hierarchy
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "2147483648\n",
			"sys/fs/cgroup/memory/memory.usage_in_bytes": "1073741824\n",
			"sys/fs/cgroup/memory/memory.stat":           "cache 9\ntotal_inactive_file 536870912\n",
		}, 0, 2*gib - (gib - gib/2), "cgroup memory.limit_in_bytes"},
		{"cgroup v1 unlimited", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
			"sys/fs/cgroup/memory/memory.usage_in_bytes": "1073741824\n",
		}, 0, 20000000 * 1024, "MemAvailable"},
		{"RLIMIT_AS less the virtual size", map[string]string{
			"proc/meminfo":     meminfo,
			"proc/self/cgroup": "0::/\n",
			"proc/self/status": "Name:\tx\nVmSize:\t  1048576 kB\nVmRSS:\t 1 kB\n",
		}, 3 * gib, 2 * gib, "RLIMIT_AS"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, c.files)
			h := probe(root, c.asLimit, c.asLimit > 0)
			if !h.Known || h.Available != c.want || h.Source != c.source {
				t.Errorf("probe = %+v, want %d bytes from %s", h, c.want, c.source)
			}
		})
	}
}

// TestProbeUnknown: without /proc the host is unknown, and callers skip the comparison.
func TestProbeUnknown(t *testing.T) {
	if h := probe(t.TempDir(), 0, false); h.Known || h.String() != "unknown" {
		t.Errorf("probe of an empty root = %+v", h)
	}
}

// TestProbeThisHost: on Linux the real probe finds something, bounded by what the host has.
func TestProbeThisHost(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	h := Probe()
	if !h.Known || h.Available <= 0 || h.Source == "" {
		t.Fatalf("Probe() = %+v", h)
	}
	t.Logf("this host: %s", h)
}

func TestCheckedArithmetic(t *testing.T) {
	if v, ok := Mul(1<<31, 1<<31); !ok || v != 1<<62 {
		t.Errorf("Mul(2^31, 2^31) = %d, %v", v, ok)
	}
	if _, ok := Mul(1<<32, 1<<31); ok {
		t.Error("Mul(2^32, 2^31) did not overflow")
	}
	if _, ok := Mul(-1, 2); ok {
		t.Error("Mul accepted a negative operand")
	}
	if _, ok := Add(math.MaxInt64, 1); ok {
		t.Error("Add(MaxInt64, 1) did not overflow")
	}
	var a Acc
	if a.Add(1, 2, a.Mul(3, 4)) != 15 || a.Overflowed() {
		t.Error("Acc miscounted")
	}
	a.Mul(1<<40, 1<<40)
	if !a.Overflowed() {
		t.Error("Acc missed an overflow")
	}
	if got := GiB(3 << 29); got != "1.5 GiB" {
		t.Errorf("GiB = %q", got)
	}
}
