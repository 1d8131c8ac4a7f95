//go:build !cgo || !linux

package aslimit

// ArenasCapped is false: without cgo there is no glibc malloc in the process to cap.
func ArenasCapped() bool { return false }
