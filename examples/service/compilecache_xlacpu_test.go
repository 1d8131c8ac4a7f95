//go:build !noxla

package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/gotpu/gotpu/xla/pjrttest"
)

// TestCompilationCacheMetricsOnXLACPU: a real server on loopback, its runtime on XLA's CPU plugin
// (2 devices) with a compilation cache directory, runs two identical tiny training jobs one after
// the other. /metrics after the first shows the programs compiled, cache misses and writes and
// no hits; after the second, hits and no new compiles (the second job's programs are the
// first's, loaded from the cache).
func TestCompilationCacheMetricsOnXLACPU(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	cacheDir := filepath.Join(tmp, "xla-cache")
	rt := pjrttest.OpenCPUPluginWithCache(t, 2, cacheDir)
	ts := startServer(t, rt, Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root, tmp}, BaseDir: root})
	tokens := filepath.Join(tmp, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 8, 32, 1000)
	job := fmt.Sprintf(`{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": %q,
		"per_device_train_batch_size": 2, "max_steps": 2, "learning_rate": 5e-3, "logging_steps": 1, "save_strategy": "no", "seed": 3}`, tokens)
	scrape := func() map[string]float64 {
		t.Helper()
		code, body := call(t, "GET", ts.url+"/metrics", "")
		if code != http.StatusOK {
			t.Fatalf("GET /metrics: %d %s", code, body)
		}
		out := map[string]float64{}
		for _, name := range []string{"gotpu_xla_compiles_total", "gotpu_xla_compile_seconds_total", "gotpu_compilation_cache_hits_total",
			"gotpu_compilation_cache_misses_total", "gotpu_compilation_cache_load_seconds_total", "gotpu_compilation_cache_writes_total",
			"gotpu_compilation_cache_errors_total"} {
			out[name] = metricValue(t, string(body), name)
		}
		return out
	}
	runJob := func() Progress {
		t.Helper()
		var p Progress
		callJSON(t, "POST", ts.url+"/jobs", job, http.StatusCreated, &p)
		return waitFor(t, ts.url+p.URLs["self"], "completion", func(p Progress) bool { return p.State == StateCompleted })
	}
	before := scrape()
	j1 := runJob()
	m1 := scrape()
	t.Logf("after job 1 (loss %v): %v", *j1.Loss, m1)
	if m1["gotpu_xla_compiles_total"] < 1 || m1["gotpu_compilation_cache_misses_total"] < 1 || m1["gotpu_compilation_cache_writes_total"] < 1 ||
		m1["gotpu_xla_compile_seconds_total"] <= 0 || m1["gotpu_compilation_cache_hits_total"] != 0 || m1["gotpu_compilation_cache_errors_total"] != 0 {
		t.Errorf("after job 1 (before it: %v): %v; want compiles, misses and writes, no hits, no errors", before, m1)
	}
	j2 := runJob()
	m2 := scrape()
	t.Logf("after job 2 (loss %v): %v", *j2.Loss, m2)
	if m2["gotpu_compilation_cache_hits_total"] < 1 || m2["gotpu_xla_compiles_total"] != m1["gotpu_xla_compiles_total"] ||
		m2["gotpu_compilation_cache_misses_total"] != m1["gotpu_compilation_cache_misses_total"] ||
		m2["gotpu_compilation_cache_load_seconds_total"] <= 0 || m2["gotpu_compilation_cache_errors_total"] != 0 {
		t.Errorf("after job 2: %v (after job 1: %v); want cache hits and nothing compiled", m2, m1)
	}
	if *j1.Loss != *j2.Loss {
		t.Errorf("job 1's last loss %v, job 2's %v: the cached programs trained differently", *j1.Loss, *j2.Loss)
	}
}
