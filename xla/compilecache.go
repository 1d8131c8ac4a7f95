package xla

import "github.com/gotpu/gotpu/xla/internal/gobackend"

// CompileStats counts what a runtime's backend spent compiling programs, and what the persistent
// compilation cache (Config.CompilationCache) saved. The cache is for PJRT plugins only: gotpu's
// pure-Go backend compiles a graph by planning its fusions and buffers, a small part of a start
// (BenchmarkStartCost's figures in docs/tpu-vm.md), not worth a cache.
type CompileStats struct {
	// CacheDir is the cache in use, "" when it is off.
	CacheDir string `json:"cache_dir,omitempty"`
	// Compiles and CompileSeconds: programs the plugin compiled (every program with the cache
	// off; the misses with it on), and the wall time of those compiles (serializing into the
	// cache not included).
	Compiles       int     `json:"compiles"`
	CompileSeconds float64 `json:"compile_seconds"`
	// CacheHits and LoadSeconds: programs answered from the cache, and the time reading,
	// checking and loading them took.
	CacheHits   int     `json:"cache_hits"`
	LoadSeconds float64 `json:"load_seconds"`
	// CacheMisses: lookups that found no usable entry (each then compiled).
	CacheMisses int `json:"cache_misses"`
	// CacheWrites and CacheErrors: executables stored, and entries that could not be stored or
	// that the plugin refused to load (each a warning in the log).
	CacheWrites int `json:"cache_writes"`
	CacheErrors int `json:"cache_errors"`
}

// Sub returns s minus an earlier snapshot o of the same runtime: what happened in between.
func (s CompileStats) Sub(o CompileStats) CompileStats {
	return CompileStats{CacheDir: s.CacheDir,
		Compiles: s.Compiles - o.Compiles, CompileSeconds: s.CompileSeconds - o.CompileSeconds,
		CacheHits: s.CacheHits - o.CacheHits, LoadSeconds: s.LoadSeconds - o.LoadSeconds,
		CacheMisses: s.CacheMisses - o.CacheMisses, CacheWrites: s.CacheWrites - o.CacheWrites,
		CacheErrors: s.CacheErrors - o.CacheErrors}
}

// compileSource is a PJRT runtime's compile hook (compilehook_pjrt.go); nil on the pure-Go
// backend and in the noxla build.
type compileSource interface {
	snapshot() CompileStats
	release()
}

// CompileStats returns the runtime's compile counters so far. On gotpu's pure-Go backend,
// Compiles and CompileSeconds are its own compiles (fusion and buffer planning) and there is no
// cache. It returns false on a runtime that keeps none: GoMLX's simplego, or a plugin gotpu could
// not hook (a warning at Open said why).
func (r *Runtime) CompileStats() (CompileStats, bool) {
	if r.compile != nil {
		return r.compile.snapshot(), true
	}
	if b, ok := r.backend.(*gobackend.Backend); ok {
		n, d := b.CompileStats()
		return CompileStats{Compiles: n, CompileSeconds: d.Seconds()}, true
	}
	return CompileStats{}, false
}
