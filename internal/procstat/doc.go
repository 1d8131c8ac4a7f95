// Package procstat reads process and machine resource figures from Linux /proc for benchmarks
// and tools: the peak resident set of this process (VmHWM of /proc/self/status) and its reset
// (writing 5 to /proc/self/clear_refs), the current resident set (VmRSS), this process's own CPU
// time (utime + stime of /proc/self/stat), the machine's busy CPU time (/proc/stat's "cpu" line:
// user, nice, system, irq and softirq; idle, iowait and steal left out) and a CPUMonitor of the
// share of the machine's CPUs that other processes used over an interval, so that a benchmark
// measured on a shared machine can say how disturbed it was. LiveHeap, the Go heap in use after
// a full collection, sits beside them: the benchmarks report it with the others.
//
// It exists because the benchmarks of data/, trainer/ and trainer/step each carried a copy of
// the same readers; one copy keeps the figures they report computed the same way.
//
// Where /proc is unavailable (not Linux, or a sandbox without it) nothing fails: the byte
// readers return 0, the CPU readers return ok == false, ResetPeakRSS returns the error, and a
// CPUMonitor reports 0. Callers decide whether to report, skip or fail. CPU times are in seconds
// at /proc's resolution of USER_HZ ticks (1/100 s), the same as Python's os.times(), so figures
// compare with a Python script's measuring the same way.
//
// The package holds no global state: each call reads /proc afresh. All functions and a
// CPUMonitor's methods are safe for concurrent use, but what they measure is process-wide: the
// peak resident set covers every goroutine, and ResetPeakRSS resets it for the whole process, so
// two measurements of peak RSS must not overlap.
package procstat
