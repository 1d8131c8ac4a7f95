package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/xla/compilecache"
)

// cacheKey is a key shaped like the runtime's.
func cacheKey(program, devices string) compilecache.Key {
	return compilecache.Key{Fields: []compilecache.KeyField{
		{Name: "program_sha256", Value: program},
		{Name: compilecache.FieldPlatform, Value: "cpu"},
		{Name: compilecache.FieldDevices, Value: devices},
	}}
}

// fillCache puts train_step (8 devices, 300 KiB), eval_step (4 devices, 2000 B) and a third entry
// that it then corrupts into a fresh directory, and reads train_step last so that it is the most
// recently used. It returns the directory and the three keys.
func fillCache(t *testing.T) (string, []compilecache.Key) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cache")
	s, err := compilecache.Open(compilecache.Config{Dir: dir}, nil)
	if err != nil {
		t.Fatal(err)
	}
	keys := []compilecache.Key{cacheKey("aa", "8"), cacheKey("bb", "4"), cacheKey("cc", "8")}
	for i, m := range []compilecache.Meta{{Name: "train_step", CompileSeconds: 41.5}, {Name: "eval_step", CompileSeconds: 3}, {Name: "broken"}} {
		size := []int{300 << 10, 2000, 1000}[i]
		if _, err := s.Put(keys[i], make([]byte, size), m); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, keys[2].ID()+".xlaexe")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-40] ^= 1
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.Get(keys[0]); !ok {
		t.Fatal("train_step missed")
	}
	return dir, keys
}

// TestCacheList: `gotpu cache` lists the directory with its source, the size against the limit
// and one line per entry, most recently used first, the corrupt entry with its problem; the
// subcommand may come after the flags.
func TestCacheList(t *testing.T) {
	dir, keys := fillCache(t)
	for _, args := range [][]string{{"cache", "--compilation_cache_dir", dir}, {"cache", "--compilation_cache_dir", dir, "list"}} {
		out, errOut, code := runGotpu(t, nil, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut)
		}
		t.Logf("gotpu %s:\n%s", strings.Join(args, " "), out)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 5 {
			t.Fatalf("%d lines; want 5", len(lines))
		}
		if want := "cache        " + dir + " (from --compilation_cache_dir)"; lines[0] != want {
			t.Errorf("line 1 %q; want %q", lines[0], want)
		}
		if !regexp.MustCompile(`^size         30\d\.\d KiB of 10\.0 GiB limit, 3 entries$`).MatchString(lines[1]) {
			t.Errorf("line 2 %q", lines[1])
		}
		ts := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)`
		for i, want := range []string{
			"^  " + keys[0].ID()[:12] + `  30\d\.\d KiB  ` + ts + "  train_step  platform=cpu devices=8$",
		} {
			if !regexp.MustCompile(want).MatchString(lines[2+i]) {
				t.Errorf("line %d %q; want %s", 3+i, lines[2+i], want)
			}
		}
		// eval_step and the corrupt entry were put within microseconds: either order.
		rest := strings.Join(lines[3:], "\n")
		for _, want := range []string{
			"  " + keys[1].ID()[:12] + `  2\.\d KiB  ` + ts + "  eval_step  platform=cpu devices=4",
			"  " + keys[2].ID()[:12] + `  1\.\d KiB  ` + ts + `  \(problem: checksum mismatch: the file is corrupt\)`,
		} {
			if !regexp.MustCompile(want).MatchString(rest) {
				t.Errorf("no line matches %s in\n%s", want, rest)
			}
		}
	}
}

// TestCacheListJSON: --json gives the documented object, entries most recently used first,
// the key as a map, the problem only on the corrupt entry.
func TestCacheListJSON(t *testing.T) {
	dir, keys := fillCache(t)
	out, errOut, code := runGotpu(t, nil, "cache", "list", "--json", "--compilation_cache_dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// The contract's names, spelled out here rather than taken from the command's own types.
	var got struct {
		Dir      string `json:"dir"`
		Source   string `json:"source"`
		MaxBytes int64  `json:"max_bytes"`
		Bytes    int64  `json:"bytes"`
		Entries  []struct {
			ID             string            `json:"id"`
			Path           string            `json:"path"`
			Name           string            `json:"name"`
			Problem        string            `json:"problem"`
			Bytes          int64             `json:"bytes"`
			PayloadBytes   int64             `json:"payload_bytes"`
			Created        *time.Time        `json:"created"`
			LastUsed       time.Time         `json:"last_used"`
			CompileSeconds float64           `json:"compile_seconds"`
			Key            map[string]string `json:"key"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	if got.Dir != dir || got.Source != "flag" || got.MaxBytes != compilecache.DefaultMaxBytes || len(got.Entries) != 3 {
		t.Fatalf("got %+v", got)
	}
	var sum int64
	for _, e := range got.Entries {
		sum += e.Bytes
	}
	e := got.Entries[0]
	if got.Bytes != sum || e.ID != keys[0].ID() || e.Name != "train_step" || e.PayloadBytes != 300<<10 || e.CompileSeconds != 41.5 ||
		e.Created == nil || e.LastUsed.Before(*e.Created) || e.Key["devices"] != "8" || e.Key["program_sha256"] != "aa" ||
		e.Problem != "" || e.Path != filepath.Join(dir, keys[0].ID()+".xlaexe") {
		t.Errorf("first entry %+v (bytes %d of %d)", e, got.Bytes, sum)
	}
	problems := 0
	for _, e := range got.Entries {
		if e.Problem != "" {
			problems++
			if e.ID != keys[2].ID() || !strings.Contains(e.Problem, "checksum mismatch") || e.Created != nil {
				t.Errorf("entry with a problem: %+v", e)
			}
		}
	}
	if problems != 1 || strings.Count(out, `"problem"`) != 1 || strings.Count(out, `"created"`) != 2 {
		t.Errorf("%d problems; want 1, and no empty problem or zero created:\n%s", problems, out)
	}
}

// TestCacheClear: clear removes the entries, keeps the directory and what is not the cache's,
// and says what it removed; a second clear removes nothing.
func TestCacheClear(t *testing.T) {
	dir, _ := fillCache(t)
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	var total int64
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if fi, err := de.Info(); err == nil && strings.HasSuffix(de.Name(), ".xlaexe") {
			total += fi.Size()
		}
	}
	out, errOut, code := runGotpu(t, nil, "cache", "clear", "--compilation_cache_dir", dir)
	if want := fmt.Sprintf("removed 3 entries (%.1f MiB) from %s\n", float64(total)/(1<<20), dir); code != 0 || out != want {
		t.Fatalf("exit %d, stdout %q, stderr %q; want %q", code, out, errOut, want)
	}
	des, err := os.ReadDir(dir)
	if err != nil || len(des) != 1 || des[0].Name() != "notes.txt" {
		t.Errorf("left %v, %v; want notes.txt only", des, err)
	}
	out, _, code = runGotpu(t, nil, "cache", "clear", "--json", "--compilation_cache_dir", dir)
	if code != 0 || out != fmt.Sprintf(`{"bytes":0,"dir":%q,"removed":0}`+"\n", dir) {
		t.Errorf("second clear: exit %d, %q", code, out)
	}
	out, _, _ = runGotpu(t, nil, "cache", "--compilation_cache_dir", dir, "--compilation_cache_max_bytes", "1610612736")
	if !strings.Contains(out, "size         0 B of 1.5 GiB limit, 0 entries\n") {
		t.Errorf("list after clear:\n%s", out)
	}
}

// TestCacheDirSources: without the flag the directory is $GOTPU_COMPILATION_CACHE_DIR, else the
// default under the user's cache directory; a directory that does not exist lists as empty and
// is not created; "off" means no cache.
func TestCacheDirSources(t *testing.T) {
	dir, _ := fillCache(t)
	out, errOut, code := runGotpu(t, []string{compilecache.EnvDir + "=" + dir}, "cache")
	if code != 0 || !strings.HasPrefix(out, "cache        "+dir+" (from GOTPU_COMPILATION_CACHE_DIR)\nsize ") || !strings.Contains(out, "3 entries") {
		t.Errorf("from the environment: exit %d\n%s%s", code, out, errOut)
	}
	home := t.TempDir()
	want := filepath.Join(home, "gotpu", "xla-executables")
	for _, sub := range []string{"list", "clear"} {
		out, errOut, code = runGotpu(t, []string{compilecache.EnvDir + "=", "XDG_CACHE_HOME=" + home}, "cache", sub)
		wantOut := "cache        " + want + " (default)\nsize         0 B of 10.0 GiB limit, 0 entries\n"
		if sub == "clear" {
			wantOut = "removed 0 entries (0.0 MiB) from " + want + "\n"
		}
		if code != 0 || out != wantOut {
			t.Errorf("default, %s: exit %d, stdout %q, stderr %q; want %q", sub, code, out, errOut, wantOut)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "gotpu")); !os.IsNotExist(err) {
		t.Errorf("the default directory was created: %v", err)
	}
	out, _, code = runGotpu(t, []string{compilecache.EnvDir + "=off"}, "cache")
	if code != 0 || out != "cache        off (from GOTPU_COMPILATION_CACHE_DIR=off)\n" {
		t.Errorf("off: exit %d, %q", code, out)
	}
	out, _, code = runGotpu(t, []string{compilecache.EnvDir + "=" + dir}, "cache", "--compilation_cache_dir", "off", "--json")
	if code != 0 || out != `{"dir":"","source":"flag","max_bytes":10737418240,"bytes":0,"entries":[]}`+"\n" {
		t.Errorf("off --json: exit %d, %q", code, out)
	}
}

// TestCacheUsageErrors: an unknown subcommand or an extra argument is a usage error (exit 2)
// naming it, with a did-you-mean for a near miss; a directory that cannot be one is an error
// naming it.
func TestCacheUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cache", "lst"}, `unknown subcommand "lst"; did you mean "list"? (gotpu cache takes list or clear)`},
		{[]string{"cache", "--compilation_cache_dir", "x", "purge"}, `unknown subcommand "purge" (gotpu cache takes list or clear)`},
		// As everywhere in gotpu, a word after a boolean flag is its value.
		{[]string{"cache", "--json", "clear"}, `invalid value "clear" for --json`},
		{[]string{"cache", "list", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"cache", "--compilation_cache_dri", "x"}, "did you mean --compilation_cache_dir?"},
		{[]string{"cache", "--compilation_cache_max_bytes", "-1"}, "--compilation_cache_max_bytes -1: must not be negative"},
	} {
		out, errOut, code := runGotpu(t, nil, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.want)
		}
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	_, errOut, code := runGotpu(t, nil, "cache", "--compilation_cache_dir", file)
	if code != 1 || !strings.Contains(errOut, file) {
		t.Errorf("a file as the directory: exit %d, %q", code, errOut)
	}
}
