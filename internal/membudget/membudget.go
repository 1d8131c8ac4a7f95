package membudget

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Host is what the host can give this process now.
type Host struct {
	// Available is in bytes; meaningful only when Known.
	Available int64
	// Known is false when nothing could be measured (not Linux, /proc unreadable).
	Known bool
	// Source names the bound that decided Available, for error messages: "MemAvailable",
	// "cgroup memory.max", "cgroup memory.limit_in_bytes" or "RLIMIT_AS".
	Source string
}

// String is "18.2 GiB (MemAvailable)", or "unknown".
func (h Host) String() string {
	if !h.Known {
		return "unknown"
	}
	return fmt.Sprintf("%s (%s)", GiB(h.Available), h.Source)
}

// Probe measures the host (see the package documentation).
func Probe() Host {
	limit, ok := addressSpaceLimit()
	return probe("/", limit, ok)
}

// probe reads /proc and /sys/fs/cgroup under root; asLimit is RLIMIT_AS's soft limit when asOK.
// Tests give it a directory of fake files.
func probe(root string, asLimit int64, asOK bool) Host {
	var h Host
	consider := func(avail int64, source string) {
		avail = max(avail, 0)
		if !h.Known || avail < h.Available {
			h = Host{Available: avail, Known: true, Source: source}
		}
	}
	meminfo, err := readKV(filepath.Join(root, "proc", "meminfo"), ":")
	if err != nil {
		return Host{}
	}
	if kb, ok := meminfo["MemAvailable"]; ok {
		consider(kbToBytes(kb), "MemAvailable")
	} else if kb, ok := meminfo["MemFree"]; ok { // kernels before 3.14
		consider(kbToBytes(kb), "MemFree")
	}
	if avail, source, ok := cgroupAvailable(root); ok {
		consider(avail, source)
	}
	if asOK && asLimit > 0 {
		if status, err := readKV(filepath.Join(root, "proc", "self", "status"), ":"); err == nil {
			if kb, ok := status["VmSize"]; ok {
				consider(asLimit-kbToBytes(kb), "RLIMIT_AS")
			}
		}
	}
	return h
}

// cgroupAvailable is the smallest limit − (usage − inactive file cache) over the process's
// memory cgroup and its ancestors, for cgroup v2 and v1.
func cgroupAvailable(root string) (int64, string, bool) {
	b, err := os.ReadFile(filepath.Join(root, "proc", "self", "cgroup"))
	if err != nil {
		return 0, "", false
	}
	best, source, found := int64(0), "", false
	consider := func(avail int64, src string) {
		if !found || avail < best {
			best, source, found = avail, src, true
		}
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			for _, dir := range cgroupDirs(filepath.Join(root, "sys", "fs", "cgroup"), parts[2]) {
				if avail, ok := cgroupLevel(dir, "memory.max", "memory.current", "inactive_file"); ok {
					consider(avail, "cgroup memory.max")
				}
			}
		case hasController(parts[1], "memory"):
			for _, dir := range cgroupDirs(filepath.Join(root, "sys", "fs", "cgroup", "memory"), parts[2]) {
				if avail, ok := cgroupLevel(dir, "memory.limit_in_bytes", "memory.usage_in_bytes", "total_inactive_file"); ok {
					consider(avail, "cgroup memory.limit_in_bytes")
				}
			}
		}
	}
	return best, source, found
}

func hasController(list, want string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == want {
			return true
		}
	}
	return false
}

// cgroupDirs lists the directories of a cgroup path and its ancestors under mount, deepest
// first. Inside a container the path in /proc/self/cgroup may not exist under the mount (the
// container sees its own cgroup as the root), so the mount itself is always included.
func cgroupDirs(mount, path string) []string {
	var dirs []string
	p := filepath.Clean("/" + path)
	for {
		dirs = append(dirs, filepath.Join(mount, p))
		if p == "/" {
			break
		}
		p = filepath.Dir(p)
	}
	return dirs
}

// cgroupLevel reads one cgroup directory: its limit less its usage, the usage less the inactive
// file cache (reclaimed before the limit kills anything). ok is false without a limit.
func cgroupLevel(dir, limitFile, usageFile, inactiveKey string) (int64, bool) {
	limit, ok := readInt(filepath.Join(dir, limitFile))
	// v2 writes "max"; v1 writes a page-rounded 2^63-1 for "no limit".
	if !ok || limit >= math.MaxInt64/2 {
		return 0, false
	}
	usage, ok := readInt(filepath.Join(dir, usageFile))
	if !ok {
		return 0, false
	}
	if stat, err := readKV(filepath.Join(dir, "memory.stat"), " "); err == nil {
		if v, ok := stat[inactiveKey]; ok && v > 0 && v <= usage {
			usage -= v
		}
	}
	return limit - usage, true
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(b)), 10, 64)
	return v, err == nil
}

// readKV reads "key<sep> value [kB]" lines (/proc/meminfo, /proc/self/status, memory.stat).
func readKV(path, sep string) (map[string]int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), sep)
		if !ok {
			continue
		}
		fields := strings.Fields(v)
		if len(fields) == 0 {
			continue
		}
		if n, err := strconv.ParseInt(fields[0], 10, 64); err == nil {
			out[strings.TrimSpace(k)] = n
		}
	}
	return out, sc.Err()
}

func kbToBytes(kb int64) int64 {
	b, ok := Mul(kb, 1024)
	if !ok {
		return math.MaxInt64
	}
	return b
}

// GiB formats a byte count in GiB with one decimal ("123.4 GiB"), the unit of budget errors.
func GiB(b int64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// Mul is a×b for non-negative operands, with ok false when the product overflows int64.
func Mul(a, b int64) (int64, bool) {
	if a < 0 || b < 0 {
		return 0, false
	}
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

// Add is a+b for non-negative operands, with ok false on overflow.
func Add(a, b int64) (int64, bool) {
	if a < 0 || b < 0 || a > math.MaxInt64-b {
		return 0, false
	}
	return a + b, true
}

// Acc accumulates sums and products of non-negative int64 values and remembers whether any step
// overflowed, so that an estimate reads as a formula and is checked once at the end.
type Acc struct {
	overflow bool
}

// Mul returns the product of xs (0 once overflowed).
func (c *Acc) Mul(xs ...int64) int64 {
	p := int64(1)
	for _, x := range xs {
		var ok bool
		if p, ok = Mul(p, x); !ok {
			c.overflow = true
			return 0
		}
	}
	return p
}

// Add returns the sum of xs (0 once overflowed).
func (c *Acc) Add(xs ...int64) int64 {
	s := int64(0)
	for _, x := range xs {
		var ok bool
		if s, ok = Add(s, x); !ok {
			c.overflow = true
			return 0
		}
	}
	return s
}

// Overflowed tells whether any operation overflowed.
func (c *Acc) Overflowed() bool { return c.overflow }

// AddressSpaceLeft is RLIMIT_AS's soft limit (ulimit -v) minus the address space this process
// has reserved (VmSize); ok is false when there is no such limit or it cannot be measured.
func AddressSpaceLeft() (int64, bool) {
	limit, ok := addressSpaceLimit()
	if !ok {
		return 0, false
	}
	status, err := readKV(filepath.Join("/proc", "self", "status"), ":")
	if err != nil {
		return 0, false
	}
	kb, ok := status["VmSize"]
	if !ok {
		return 0, false
	}
	return max(limit-kbToBytes(kb), 0), true
}
