// Package aslimit fits a gotpu process to an address-space limit (RLIMIT_AS, `ulimit -v`).
//
// Such a limit counts reserved address space, not memory used, and a Go program with cgo
// reserves much of it up front: the Go runtime's page-allocator index (about 1 GiB on
// linux/amd64) and a 64 MiB glibc malloc arena for each thread that calls malloc (six of them,
// 384 MiB, in a `gotpu train` run). Under a 2 GiB limit that left about 300 MiB for the heap.
//
// Importing the package caps glibc's malloc arenas at two when the process starts under a finite
// RLIMIT_AS (a C constructor: arenas are made as threads first call malloc, before any Go code
// could act); without a limit nothing changes, arenas being free address space then. SoftLimit
// turns what is left of the address space into the Go runtime's soft memory limit, so the
// collector works harder as the heap nears it instead of the process dying with garbage it could
// have freed. Both are for entry points (cmd/gotpu); a library does not change its host's
// allocator.
package aslimit
