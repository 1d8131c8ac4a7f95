//go:build !unix

package membudget

// addressSpaceLimit: no RLIMIT_AS outside Unix.
func addressSpaceLimit() (int64, bool) { return 0, false }
