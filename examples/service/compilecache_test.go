package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/xla"
	"github.com/gotpu/gotpu/xla/compilecache"
)

// TestCompilationCacheFlag: -compilation_cache_dir with -device go stops the service at start,
// naming the flag (compilecache.Resolve, whose rules TestResolve checks: the flag, else
// $GOTPU_COMPILATION_CACHE_DIR, else the default, for PJRT devices only), and a runtime
// configuration that asks for a cache on the pure-Go backend is refused by run before listening.
func TestCompilationCacheFlag(t *testing.T) {
	tmp := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	noEnv := func(string) string { return "" }
	if _, _, err := compilecache.Resolve(filepath.Join(tmp, "a"), 0, true, noEnv, log); err == nil ||
		!strings.Contains(err.Error(), "--compilation_cache_dir "+filepath.Join(tmp, "a")) {
		t.Errorf("-compilation_cache_dir with -device go: %v; want an error naming the flag", err)
	}
	err := run(context.Background(), Config{DataDir: filepath.Join(tmp, "data"), Logger: log},
		xla.Config{Device: "go", NumDevices: 1, CompilationCache: compilecache.Config{Dir: filepath.Join(tmp, "a")}}, "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "CompilationCache.Dir") || !strings.Contains(err.Error(), "PJRT device") {
		t.Fatalf("run with a cache on -device go: %v; want the refusal naming the cache directory", err)
	}
	t.Logf("run with a cache on -device go: %v", err)
}

// TestCompileMetricsOnGoBackend: on gotpu's pure-Go backend /metrics has the compile series (its
// own compiles: fusion planning, counted once a job has run) and cache series at 0 (it has no
// cache); GoMLX's simplego keeps no compile counters, and its /metrics has none of the series.
func TestCompileMetricsOnGoBackend(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	ts := startServer(t, openRuntime(t), Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root, tmp}, BaseDir: root})
	tokens := filepath.Join(tmp, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 8, 32, 1000)
	var p Progress
	callJSON(t, "POST", ts.url+"/jobs", `{"model_name_or_path": "testdata/models/gpt2-tiny", "train_file": "`+tokens+`",
		"per_device_train_batch_size": 2, "max_steps": 1, "save_strategy": "no"}`, http.StatusCreated, &p)
	waitFor(t, ts.url+p.URLs["self"], "completion", func(p Progress) bool { return p.State == StateCompleted })
	_, body := call(t, "GET", ts.url+"/metrics", "")
	text := string(body)
	if n := metricValue(t, text, "gotpu_xla_compiles_total"); n < 1 {
		t.Errorf("gotpu_xla_compiles_total %v after a job on gotpu's backend", n)
	}
	for _, name := range []string{"gotpu_compilation_cache_hits_total", "gotpu_compilation_cache_misses_total",
		"gotpu_compilation_cache_writes_total", "gotpu_compilation_cache_errors_total", "gotpu_compilation_cache_load_seconds_total"} {
		if v := metricValue(t, text, name); v != 0 {
			t.Errorf("%s %v on a backend without a cache", name, v)
		}
	}

	simple, err := xla.Open(context.Background(), xla.Config{Device: "go", NumDevices: 1, GoBackend: xla.GoBackendSimpleGo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { simple.Close() })
	ts2 := startServer(t, simple, Config{DataDir: filepath.Join(tmp, "data2"), InputRoots: []string{root, tmp}, BaseDir: root})
	_, body = call(t, "GET", ts2.url+"/metrics", "")
	if strings.Contains(string(body), "gotpu_xla_compile") || strings.Contains(string(body), "gotpu_compilation_cache") {
		t.Errorf("simplego's /metrics has compile series:\n%s", body)
	}
}
