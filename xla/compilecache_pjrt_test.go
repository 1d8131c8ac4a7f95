//go:build !noxla

package xla

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/gotpu/gotpu/xla/compilecache"
)

// The persistent compilation cache on XLA's CPU plugin (issue #41): what a runtime compiles is
// stored, the next runtime with the same program loads it and computes the same bits, and no
// entry that is corrupt, truncated, foreign or refused by the plugin is ever loaded.

// cacheProgram is a small program with a few fusions; scale changes it (another program). The
// program's module name is the Go function's: inlined at several call sites, the closure would
// get a name per site, and the same program as many texts (and cache keys).
//
//go:noinline
func cacheProgram(scale float32) func(x *graph.Node) *graph.Node {
	return func(x *graph.Node) *graph.Node {
		y := graph.Add(graph.Mul(x, x), graph.Sin(graph.MulScalar(x, float64(scale))))
		return graph.ReduceAllSum(graph.Tanh(y))
	}
}

// openCached opens the CPU plugin with n devices and the cache in dir (limit maxBytes, 0: the
// default); the runtime is closed when the test ends.
func openCached(t *testing.T, n int, dir string, maxBytes int64) *Runtime {
	t.Helper()
	openCPUPlugin(t, 1).Close() // skips without the plugin, fails under CI
	rt, err := Open(context.Background(), Config{Device: DeviceCPU, NumDevices: n,
		CompilationCache: compilecache.Config{Dir: dir, MaxBytes: maxBytes}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// runCached runs prog once on rt and returns its result and what the runtime's compile hook
// counted meanwhile.
func runCached(t *testing.T, rt *Runtime, prog func(*graph.Node) *graph.Node) (float32, CompileStats) {
	t.Helper()
	before, ok := rt.CompileStats()
	if !ok {
		t.Fatal("a PJRT runtime has no compile stats")
	}
	e, err := graph.NewExec(rt.Backend(), prog)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	out, err := e.Exec([]float32{0.5, -1, 2, 3.25, -0.125, 7})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := rt.CompileStats()
	return out[0].Value().(float32), after.Sub(before)
}

// captureLog routes the default logger (the compile hook's, taken at Open) into a buffer until
// the test ends.
func captureLog(t *testing.T) *syncBuffer {
	t.Helper()
	var buf syncBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { slog.SetDefault(prev) })
	return &buf
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func entriesOf(t *testing.T, dir string) []compilecache.Entry {
	t.Helper()
	s, err := compilecache.Open(compilecache.Config{Dir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	es, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	return es
}

func keyValue(e compilecache.Entry, name string) string {
	for _, f := range e.Key.Fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// TestCompilationCacheCPUPlugin: the first runtime compiles and stores; a second one, on a fresh
// client, loads the executable instead of compiling and returns the same bits; the entry's key
// names the plugin, its devices and the program.
func TestCompilationCacheCPUPlugin(t *testing.T) {
	dir := t.TempDir()
	prog := cacheProgram(1)
	want, st := runCached(t, openCached(t, 2, dir, 0), prog)
	if st.Compiles != 1 || st.CacheMisses != 1 || st.CacheWrites != 1 || st.CacheHits != 0 || st.CacheErrors != 0 {
		t.Fatalf("first runtime: %+v, want one compile, one miss, one write", st)
	}
	es := entriesOf(t, dir)
	if len(es) != 1 || es[0].Problem != "" {
		t.Fatalf("entries after one compile: %+v", es)
	}
	for _, f := range []string{"program_sha256", "compile_options_sha256", "plugin_path", "plugin_file", "pjrt_api_version",
		"platform", "devices", "gotpu", "host_cpu"} {
		if keyValue(es[0], f) == "" {
			t.Errorf("the key has no %s: %+v", f, es[0].Key)
		}
	}
	if keyValue(es[0], "devices") != "2" || keyValue(es[0], "platform") != "cpu" {
		t.Errorf("key devices=%q platform=%q, want 2 and cpu", keyValue(es[0], "devices"), keyValue(es[0], "platform"))
	}
	got, st2 := runCached(t, openCached(t, 2, dir, 0), prog)
	if st2.CacheHits != 1 || st2.Compiles != 0 || st2.CacheMisses != 0 || st2.CacheErrors != 0 {
		t.Fatalf("second runtime: %+v, want one hit and no compile", st2)
	}
	if got != want {
		t.Fatalf("loaded executable computed %v, the compiled one %v", got, want)
	}
	t.Logf("compiled in %.3f s, loaded in %.4f s (%d-byte entry); result %v both times",
		st.CompileSeconds, st2.LoadSeconds, es[0].Bytes, got)
	// Without a cache the hook still counts compiles.
	rt, err := Open(context.Background(), Config{Device: DeviceCPU, NumDevices: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if _, st := runCached(t, rt, prog); st.Compiles != 1 || st.CacheMisses != 0 || st.CacheHits != 0 || st.CacheDir != "" {
		t.Errorf("runtime without a cache: %+v, want one compile and no cache", st)
	}
}

// TestCompilationCacheBadEntriesOnXLACPU: a corrupt, a truncated and a foreign entry (the same
// program compiled for 4 devices, put under the 2-device key's name), and one whose checksum holds
// but that the plugin cannot load, are each never loaded: a warning names the file, the program
// compiles, computes what it should, and its entry is written afresh (the next runtime hits).
func TestCompilationCacheBadEntriesOnXLACPU(t *testing.T) {
	dir := t.TempDir()
	prog := cacheProgram(2)
	want, _ := runCached(t, openCached(t, 2, dir, 0), prog)
	good := entriesOf(t, dir)[0]
	goodBytes, err := os.ReadFile(good.Path)
	if err != nil {
		t.Fatal(err)
	}
	runCached(t, openCached(t, 4, dir, 0), prog)
	var foreign compilecache.Entry
	for _, e := range entriesOf(t, dir) {
		if keyValue(e, "devices") == "4" {
			foreign = e
		}
	}
	foreignBytes, err := os.ReadFile(foreign.Path)
	if foreign.Path == "" || err != nil {
		t.Fatalf("no 4-device entry: %v", err)
	}
	store, err := compilecache.Open(compilecache.Config{Dir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, warning string
		spoil         func()
	}{
		{"corrupt", "ignored", func() {
			b := slices.Clone(goodBytes)
			b[len(b)/2] ^= 0x40
			writeFile(t, good.Path, b)
		}},
		{"truncated", "ignored", func() { writeFile(t, good.Path, goodBytes[:len(goodBytes)/3]) }},
		{"foreign", "ignored", func() { writeFile(t, good.Path, foreignBytes) }},
		{"unloadable", "the plugin refused a stored executable", func() {
			if _, err := store.Put(good.Key, bytes.Repeat([]byte("not an executable "), 64), compilecache.Meta{Name: "junk"}); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		c.spoil()
		logs := captureLog(t)
		got, st := runCached(t, openCached(t, 2, dir, 0), prog)
		if got != want {
			t.Errorf("%s entry: computed %v, want %v", c.name, got, want)
		}
		if st.CacheHits != 0 || st.Compiles != 1 || st.CacheWrites != 1 {
			t.Errorf("%s entry: %+v, want it ignored, the program compiled and stored again", c.name, st)
		}
		if out := logs.String(); !strings.Contains(out, c.warning) || !strings.Contains(out, "level=WARN") ||
			(c.name != "unloadable" && !strings.Contains(out, filepath.Base(good.Path))) {
			t.Errorf("%s entry: the log does not warn %q naming the file:\n%s", c.name, c.warning, out)
		} else {
			t.Logf("%s entry: %s", c.name, firstLine(out, "WARN"))
		}
		if _, st := runCached(t, openCached(t, 2, dir, 0), prog); st.CacheHits != 1 || st.Compiles != 0 {
			t.Errorf("after the %s entry was rewritten: %+v, want a hit", c.name, st)
		}
	}
}

func firstLine(s, sub string) string {
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCompilationCacheEvictionOnXLACPU: at the size limit the least recently used executable
// goes, and a hit makes an entry recently used.
func TestCompilationCacheEvictionOnXLACPU(t *testing.T) {
	probe := t.TempDir()
	runCached(t, openCached(t, 1, probe, 0), cacheProgram(10))
	size := entriesOf(t, probe)[0].Bytes
	dir := t.TempDir()
	limit := size*5/2 + size/10 // two entries fit, not three
	id := map[float32]string{}
	run := func(scale float32) CompileStats {
		_, st := runCached(t, openCached(t, 1, dir, limit), cacheProgram(scale))
		for _, e := range entriesOf(t, dir) {
			if !slices.Contains(mapValues(id), e.ID) {
				id[scale] = e.ID
			}
		}
		time.Sleep(20 * time.Millisecond) // distinct modification times: the LRU clock
		return st
	}
	have := func() []string {
		var out []string
		for _, e := range entriesOf(t, dir) {
			for s, i := range id {
				if i == e.ID {
					out = append(out, fmt.Sprint(s))
				}
			}
		}
		slices.Sort(out)
		return out
	}
	run(11)
	run(12)
	if st := run(11); st.CacheHits != 1 { // 11 is now more recent than 12
		t.Fatalf("program 11 again: %+v, want a hit", st)
	}
	run(13) // evicts 12, the least recently used
	if got := have(); !slices.Equal(got, []string{"11", "13"}) {
		t.Errorf("after 11, 12, 11 (hit), 13 with room for two: entries of programs %v, want [11 13]", got)
	}
	total := int64(0)
	for _, e := range entriesOf(t, dir) {
		total += e.Bytes
	}
	if total > limit {
		t.Errorf("entries hold %d bytes, over the %d limit", total, limit)
	}
	t.Logf("entries of ~%d bytes, limit %d: programs %v remain, %d bytes", size, limit, have(), total)
}

func mapValues(m map[float32]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// TestCompilationCacheOpenErrors: a cache directory that cannot be made is an error of Open that
// names it; Device "go" with a cache is refused by Validate.
func TestCompilationCacheOpenErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	writeFile(t, file, []byte("x"))
	openCPUPlugin(t, 1).Close()
	_, err := Open(context.Background(), Config{Device: DeviceCPU, NumDevices: 1, CompilationCache: compilecache.Config{Dir: file}})
	if err == nil || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "CompilationCache") {
		t.Errorf("cache dir on a regular file: %v, want an error naming the field and %s", err, file)
	}
	err = Config{Device: DeviceGo, CompilationCache: compilecache.Config{Dir: t.TempDir()}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "xla.Config.CompilationCache.Dir") {
		t.Errorf("Device go with a cache: %v, want the field named", err)
	}
}

// cacheChildEnv makes the test binary a child of TestCompilationCacheTwoProcessesOnXLACPU.
const cacheChildEnv = "GOTPU_TEST_COMPILECACHE_CHILD"

// TestCompilationCacheTwoProcessesOnXLACPU: two processes compile the same program into one cache
// at the same moment: both compute the right result, the entry left is whole, and a third
// runtime loads it.
func TestCompilationCacheTwoProcessesOnXLACPU(t *testing.T) {
	if dir := os.Getenv(cacheChildEnv); dir != "" {
		cacheChild(t, dir)
		return
	}
	openCPUPlugin(t, 1).Close()
	dir := t.TempDir()
	start := filepath.Join(t.TempDir(), "go")
	var wg sync.WaitGroup
	outs := make([][]byte, 2)
	errs := make([]error, 2)
	for i := range outs {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestCompilationCacheTwoProcessesOnXLACPU$", "-test.v")
		cmd.Env = append(os.Environ(), cacheChildEnv+"="+dir, cacheChildEnv+"_START="+start)
		wg.Go(func() { outs[i], errs[i] = cmd.CombinedOutput() })
	}
	time.Sleep(300 * time.Millisecond) // both children up and waiting
	writeFile(t, start, nil)
	wg.Wait()
	var results []childResult
	for i, out := range outs {
		if errs[i] != nil {
			t.Fatalf("child %d: %v\n%s", i, errs[i], out)
		}
		var r childResult
		for l := range strings.SplitSeq(string(out), "\n") {
			if s, ok := strings.CutPrefix(strings.TrimSpace(l), "child-result "); ok {
				if err := json.Unmarshal([]byte(s), &r); err != nil {
					t.Fatal(err)
				}
			}
		}
		results = append(results, r)
	}
	want, _ := runCached(t, openCached(t, 2, t.TempDir(), 0), cacheProgram(3)) // no cache involved
	es := entriesOf(t, dir)
	if len(es) != 1 || es[0].Problem != "" {
		t.Fatalf("entries after two processes: %+v", es)
	}
	for i, r := range results {
		if r.Value != want {
			t.Errorf("child %d computed %v, want %v", i, r.Value, want)
		}
	}
	got, st := runCached(t, openCached(t, 2, dir, 0), cacheProgram(3))
	if st.CacheHits != 1 || got != want {
		t.Errorf("third runtime: %+v, result %v; want a hit computing %v", st, got, want)
	}
	t.Logf("children: %+v and %+v; one whole entry of %d bytes; the third runtime loaded it", results[0].Stats, results[1].Stats, es[0].Bytes)
}

type childResult struct {
	Value float32
	Stats CompileStats
}

func cacheChild(t *testing.T, dir string) {
	start := os.Getenv(cacheChildEnv + "_START")
	rt, err := Open(context.Background(), Config{Device: DeviceCPU, NumDevices: 2, CompilationCache: compilecache.Config{Dir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if _, err := os.Stat(start); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no start signal")
		}
	}
	v, st := runCached(t, rt, cacheProgram(3))
	b, _ := json.Marshal(childResult{v, st})
	fmt.Printf("child-result %s\n", b)
}
