package procstat

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// userHZ is USER_HZ, the unit of /proc's CPU times: 100 on every Linux ABI Go supports.
const userHZ = 100

// PeakRSS is this process's peak resident set in bytes since it started or since the last
// ResetPeakRSS (VmHWM of /proc/self/status), or 0 where /proc is unavailable.
func PeakRSS() uint64 { return statusBytes("VmHWM") }

// CurrentRSS is this process's resident set now in bytes (VmRSS of /proc/self/status), or 0
// where /proc is unavailable.
func CurrentRSS() uint64 { return statusBytes("VmRSS") }

// ResetPeakRSS returns the memory the Go runtime holds free to the OS (debug.FreeOSMemory, which
// collects first) and then resets the kernel's peak resident set of this process to its current
// one (Linux: 5 written to /proc/self/clear_refs), so that a following PeakRSS reports the peak
// of what runs in between. It returns the error of the reset, e.g. where /proc is unavailable;
// the peak is then the process's since it started.
func ResetPeakRSS() error {
	debug.FreeOSMemory()
	f, err := os.OpenFile("/proc/self/clear_refs", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString("5")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// statusBytes reads a "Name:   123 kB" line of /proc/self/status in bytes, or 0 where the file
// or the line is missing or malformed.
func statusBytes(name string) uint64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, name+":"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// OwnCPUSeconds is this process's user + system CPU time in seconds, all its threads, live and
// exited (utime and stime of /proc/self/stat); ok is false where /proc is unavailable.
func OwnCPUSeconds() (seconds float64, ok bool) {
	raw, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) may hold spaces and parentheses: count fields after its last
	// closing parenthesis, where utime and stime (fields 14 and 15) are the 12th and 13th.
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / userHZ, true
}

// MachineBusySeconds is the CPU time all CPUs of the machine spent busy since boot, in seconds:
// user, nice, system, irq and softirq of /proc/stat's "cpu" line, without idle, iowait and steal
// (time the hypervisor gave another guest is not this machine's load). ok is false where /proc
// is unavailable.
func MachineBusySeconds() (seconds float64, ok bool) {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	// cpu user nice system idle iowait irq softirq steal ...
	f := strings.Fields(line)
	if len(f) < 8 || f[0] != "cpu" {
		return 0, false
	}
	var sum float64
	for _, i := range []int{1, 2, 3, 6, 7} {
		v, _ := strconv.ParseFloat(f[i], 64)
		sum += v
	}
	return sum / userHZ, true
}

// LiveHeap is the Go heap in use (runtime.MemStats.HeapAlloc) after two full collections: the
// second frees what finalizers queued by the first released (GoMLX and the pure-Go backends free
// buffers in finalizers). It stops the world: not for a timed section.
func LiveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// A CPUMonitor measures the share of the machine's CPUs that processes other than this one used
// since StartCPUMonitor: the machine's busy CPU time less this process's own, over wall time ×
// runtime.NumCPU(). A benchmark measured while others ran is unreliable on a shared machine; this
// is how it can tell. Its methods are safe for concurrent use.
type CPUMonitor struct {
	start     time.Time
	busy, own float64 // seconds at the start
	ok        bool
}

// StartCPUMonitor starts measuring now.
func StartCPUMonitor() *CPUMonitor {
	m := &CPUMonitor{start: time.Now()}
	busy, busyOK := MachineBusySeconds()
	own, ownOK := OwnCPUSeconds()
	m.busy, m.own, m.ok = busy, own, busyOK && ownOK
	return m
}

// Others is the share of all CPUs other processes used since the start, or 0 where /proc is
// unavailable. It is in [0, 1] but for /proc's tick resolution over short intervals, unless this
// process may run on fewer CPUs than the machine has (runtime.NumCPU counts the CPUs of its
// affinity mask, /proc/stat all of them): then up to their ratio. It may be called more than
// once, each time over the interval so far.
func (m *CPUMonitor) Others() float64 {
	wall := time.Since(m.start).Seconds()
	busy, busyOK := MachineBusySeconds()
	own, ownOK := OwnCPUSeconds()
	if !m.ok || !busyOK || !ownOK || wall <= 0 {
		return 0
	}
	return max(0, (busy-m.busy)-(own-m.own)) / (wall * float64(runtime.NumCPU()))
}
