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

// TestCompilationCacheFlag: -compilation_cache_dir resolves as the gotpu CLI's flag does — the
// flag, else $GOTPU_COMPILATION_CACHE_DIR, else the default under the user's cache directory,
// "off" disables it; the environment and the default stay off the pure-Go backend, and the flag
// with -device go stops the service at start with an error naming the field.
func TestCompilationCacheFlag(t *testing.T) {
	tmp := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == compilecache.EnvDir {
				return v
			}
			return ""
		}
	}
	def, err := compilecache.DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flag, env, device string
		maxBytes          int64
		want              compilecache.Config
	}{
		{filepath.Join(tmp, "a"), filepath.Join(tmp, "b"), "cpu", 1 << 20, compilecache.Config{Dir: filepath.Join(tmp, "a"), MaxBytes: 1 << 20}},
		{"", filepath.Join(tmp, "b"), "tpu", 0, compilecache.Config{Dir: filepath.Join(tmp, "b")}},
		{"", "", "auto", 0, compilecache.Config{Dir: def}},
		{"off", filepath.Join(tmp, "b"), "cpu", 0, compilecache.Config{}},
		{"", "off", "cpu", 0, compilecache.Config{}},
		{"", filepath.Join(tmp, "b"), "go", 0, compilecache.Config{}},                             // env: PJRT devices only
		{"", "", "Go", 0, compilecache.Config{}},                                                  // default: likewise
		{filepath.Join(tmp, "a"), "", "go", 0, compilecache.Config{Dir: filepath.Join(tmp, "a")}}, // refused at Open (below)
	} {
		got, err := compilationCache(c.flag, c.maxBytes, c.device, env(c.env), log)
		if err != nil || got != c.want {
			t.Errorf("flag %q, env %q, device %s: %+v, %v; want %+v", c.flag, c.env, c.device, got, err, c.want)
		}
	}
	if _, err := compilationCache("", -1, "cpu", env(""), log); err == nil || !strings.Contains(err.Error(), "-compilation_cache_max_bytes -1") {
		t.Errorf("negative max bytes: %v", err)
	}
	// The flag with -device go: run stops before listening, naming the field and what to do.
	cc, _ := compilationCache(filepath.Join(tmp, "a"), 0, "go", env(""), log)
	err = run(context.Background(), Config{DataDir: filepath.Join(tmp, "data"), Logger: log},
		xla.Config{Device: "go", NumDevices: 1, CompilationCache: cc}, "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "CompilationCache.Dir") || !strings.Contains(err.Error(), "PJRT device") {
		t.Fatalf("run with -compilation_cache_dir and -device go: %v; want the refusal naming the cache directory", err)
	}
	t.Logf("-device go -compilation_cache_dir %s: %v", cc.Dir, err)
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
