// Package membudget measures how much memory the host can still give this process, and does the
// overflow-checked byte arithmetic that memory estimates need. It is the shared floor of gotpu's
// resource budget: models.New and models.Load check parameter bytes against it, and
// trainer.CheckBudget checks a whole training run (parameters, gradients, optimizer state,
// activations and input batches) against it before anything is allocated.
//
// # What "available" means
//
// Probe returns the smallest of three bounds, and names the one that decided:
//
//   - MemAvailable in /proc/meminfo: the kernel's estimate of what can be allocated without
//     swapping (free memory plus reclaimable page cache);
//   - the cgroup's memory limit less its usage (cgroup v2 memory.max − memory.current, v1
//     memory.limit_in_bytes − memory.usage_in_bytes, each less the inactive file cache the
//     kernel reclaims first), taken over the process's cgroup and its ancestors: containers and CI
//     runners get killed at this limit long before the host's memory runs out;
//   - RLIMIT_AS (ulimit -v) less the process's current virtual size (VmSize in
//     /proc/self/status): past it, an allocation fails and the Go runtime aborts.
//
// Outside Linux, or when /proc cannot be read, the host is unknown (Host.Known is false) and
// callers skip the comparison rather than guess. The figure is a snapshot: other processes may
// take memory after it is read, so a budget that fits is necessary, not sufficient.
//
// # Concurrency
//
// Everything here is a pure function of its arguments or of the files it reads; there is no
// global mutable state.
package membudget
