package compilecache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// logBuffer collects a store's log output; safe for the store's concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// openStore opens a store on dir (a fresh temporary directory if "") with its log captured.
func openStore(t *testing.T, dir string, maxBytes int64) (*Store, *logBuffer) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	logs := &logBuffer{}
	s, err := Open(Config{Dir: dir, MaxBytes: maxBytes}, slog.New(slog.NewJSONHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// testKey is a key shaped like the runtime's, with the given program hash and device count.
func testKey(program, devices string) Key {
	return Key{Fields: []KeyField{
		{"program_sha256", program},
		{"compile_options_sha256", "0f3a"},
		{"plugin_path", "/usr/lib/pjrt_c_api_cpu_plugin.so"},
		{"plugin_version", "0.61"},
		{FieldPlatform, "cpu"},
		{FieldDevices, devices},
		{"gotpu_version", "(devel)"},
	}}
}

func testPayload(seed byte, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = seed + byte(i*7)
	}
	return p
}

// wantMiss checks that Get misses k and, when warning is non-empty, that it logged one warning
// naming the file whose problem contains warning; with warning "", that it logged nothing.
func wantMiss(t *testing.T, s *Store, logs *logBuffer, k Key, warning string) {
	t.Helper()
	before := logs.String()
	if p, _, ok := s.Get(k); ok || p != nil {
		t.Fatalf("Get hit (%d bytes); want a miss", len(p))
	}
	logged := strings.TrimPrefix(logs.String(), before)
	if warning == "" {
		if logged != "" {
			t.Errorf("a miss logged %q; want nothing", logged)
		}
		return
	}
	var rec struct{ Level, Msg, File, Problem string }
	if err := json.Unmarshal([]byte(logged), &rec); err != nil {
		t.Fatalf("logged %q: want one JSON record (%v)", logged, err)
	}
	if rec.Level != "WARN" || !strings.Contains(rec.Msg, "will recompile") || rec.File != s.path(k.ID()) ||
		!strings.Contains(rec.Problem, warning) {
		t.Errorf("logged %+v; want a warning naming %s with a problem containing %q", rec, s.path(k.ID()), warning)
	}
}

// TestRoundTrip: Put then Get returns the payload and the entry's description; a missing entry
// is a silent miss; an empty payload is an entry too.
func TestRoundTrip(t *testing.T) {
	s, logs := openStore(t, "", 0)
	if s.MaxBytes() != DefaultMaxBytes {
		t.Errorf("MaxBytes %d, want the default %d", s.MaxBytes(), DefaultMaxBytes)
	}
	k := testKey("aa", "8")
	wantMiss(t, s, logs, k, "")
	payload := testPayload(1, 100_000)
	before := time.Now()
	if n, err := s.Put(k, payload, Meta{Name: "train_step", CompileSeconds: 12.5}); err != nil || n != 0 {
		t.Fatalf("Put: %d evicted, %v", n, err)
	}
	got, e, ok := s.Get(k)
	if !ok || !bytes.Equal(got, payload) {
		t.Fatalf("Get: ok=%v, %d bytes; want the %d put", ok, len(got), len(payload))
	}
	fi, err := os.Stat(filepath.Join(s.Dir(), k.ID()+".xlaexe"))
	if err != nil {
		t.Fatal(err)
	}
	if e.ID != k.ID() || e.Path != filepath.Join(s.Dir(), k.ID()+".xlaexe") || e.Bytes != fi.Size() ||
		e.PayloadBytes != int64(len(payload)) || e.Name != "train_step" || e.CompileSeconds != 12.5 ||
		e.Created.Before(before.Add(-time.Second)) || e.LastUsed.Before(e.Created) || e.Key.diff(k) != "" || e.Problem != "" {
		t.Errorf("entry %+v", e)
	}
	empty := testKey("empty", "8")
	if _, err := s.Put(empty, nil, Meta{}); err != nil {
		t.Fatal(err)
	}
	if got, _, ok := s.Get(empty); !ok || len(got) != 0 {
		t.Errorf("empty payload: ok=%v, %d bytes", ok, len(got))
	}
	if logs.String() != "" {
		t.Errorf("logged %q", logs.String())
	}
	st, err := s.Stats()
	if err != nil || st.Entries != 2 || st.Bytes <= int64(len(payload)) {
		t.Errorf("Stats %+v, %v", st, err)
	}
}

// rewrite applies edit to the entry file of k.
func rewrite(t *testing.T, s *Store, k Key, edit func([]byte) []byte) {
	t.Helper()
	p := s.path(k.ID())
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, edit(b), 0o644); err != nil {
		t.Fatal(err)
	}
}

// headerLen is the header length recorded in an entry.
func headerLen(b []byte) int { return int(binary.BigEndian.Uint32(b[12:16])) }

// TestCorruptEntry: one flipped byte in the payload, the header, the prefix's header length or
// the trailing checksum makes the entry a miss with a warning; a Put then repairs it.
func TestCorruptEntry(t *testing.T) {
	s, logs := openStore(t, "", 0)
	k := testKey("aa", "8")
	payload := testPayload(3, 5000)
	for _, tc := range []struct {
		name    string
		offset  func(b []byte) int
		warning string
	}{
		{"payload", func(b []byte) int { return 16 + headerLen(b) + 2500 }, "checksum mismatch"},
		{"header", func(b []byte) int { return 16 + headerLen(b)/2 }, "checksum mismatch"},
		{"header length", func(b []byte) int { return 15 }, "checksum mismatch"},
		{"header length high", func(b []byte) int { return 12 }, "more than the format's"},
		{"checksum", func(b []byte) int { return len(b) - 1 }, "checksum mismatch"},
		{"magic", func(b []byte) int { return 0 }, "not a gotpu compilation cache entry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := s.Put(k, payload, Meta{}); err != nil {
				t.Fatal(err)
			}
			rewrite(t, s, k, func(b []byte) []byte { b[tc.offset(b)] ^= 0x40; return b })
			wantMiss(t, s, logs, k, tc.warning)
		})
	}
	if _, err := s.Put(k, payload, Meta{}); err != nil {
		t.Fatal(err)
	}
	if got, _, ok := s.Get(k); !ok || !bytes.Equal(got, payload) {
		t.Error("a Put over a corrupt entry does not repair it")
	}
}

// TestTruncatedEntry: an entry cut anywhere (empty, in the prefix, in the header, in the
// payload, in the checksum) is a miss with a warning.
func TestTruncatedEntry(t *testing.T) {
	s, logs := openStore(t, "", 0)
	k := testKey("aa", "8")
	payload := testPayload(5, 3000)
	if _, err := s.Put(k, payload, Meta{Name: "eval_step"}); err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile(s.path(k.ID()))
	if err != nil {
		t.Fatal(err)
	}
	h := headerLen(full)
	for _, n := range []int{0, 1, 8, 15, 16, 17, 16 + h/2, 16 + h, 16 + h + 1500, len(full) - 32, len(full) - 1} {
		if err := os.WriteFile(s.path(k.ID()), full[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("cut at %d of %d bytes", n, len(full))
		wantMiss(t, s, logs, k, "truncated")
	}
	// Extra bytes at the end are corruption too.
	if err := os.WriteFile(s.path(k.ID()), append(full, 0), 0o644); err != nil {
		t.Fatal(err)
	}
	wantMiss(t, s, logs, k, "1 bytes longer than its header says")
}

// TestForeignEntry: an entry put for 8 devices, copied under the name of the same program's key
// for 4 devices, is never loaded for 4 devices (a warning says it holds another key) and List
// reports it; the 8-device key still hits its own file.
func TestForeignEntry(t *testing.T) {
	s, logs := openStore(t, "", 0)
	k8, k4 := testKey("aa", "8"), testKey("aa", "4")
	payload := testPayload(7, 2000)
	if _, err := s.Put(k8, payload, Meta{Name: "train_step"}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(s.path(k8.ID()))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.path(k4.ID()), b, 0o644); err != nil {
		t.Fatal(err)
	}
	wantMiss(t, s, logs, k4, `another key (its devices is "8", wanted "4")`)
	if got, _, ok := s.Get(k8); !ok || !bytes.Equal(got, payload) {
		t.Error("the 8-device entry no longer hits")
	}
	// Another plugin version: a key with the field changed, and one with a field added.
	other := testKey("aa", "8")
	other.Fields[3].Value = "0.62"
	if err := os.WriteFile(s.path(other.ID()), b, 0o644); err != nil {
		t.Fatal(err)
	}
	wantMiss(t, s, logs, other, `another key (its plugin_version is "0.61", wanted "0.62")`)
	longer := Key{Fields: append(testKey("aa", "8").Fields, KeyField{"xla_flags", "--xla_cpu_fast_math"})}
	if err := os.WriteFile(s.path(longer.ID()), b, 0o644); err != nil {
		t.Fatal(err)
	}
	wantMiss(t, s, logs, longer, `another key (it lacks field "xla_flags")`)
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	problems := 0
	for _, e := range list {
		if e.Problem != "" {
			problems++
			if !strings.Contains(e.Problem, "another key") {
				t.Errorf("entry %s: problem %q", e.ID, e.Problem)
			}
		}
	}
	if len(list) != 4 || problems != 3 {
		t.Errorf("List: %d entries, %d with problems; want 4 and 3", len(list), problems)
	}
}

// TestOtherFormatVersion: an entry of another format version (checksum recomputed, so only the
// version differs) is a miss naming the version.
func TestOtherFormatVersion(t *testing.T) {
	s, logs := openStore(t, "", 0)
	k := testKey("aa", "8")
	if _, err := s.Put(k, testPayload(9, 100), Meta{}); err != nil {
		t.Fatal(err)
	}
	rewrite(t, s, k, func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[8:12], 2)
		return fixChecksum(b)
	})
	wantMiss(t, s, logs, k, "format version 2, this gotpu reads version 1")
}

// TestEvictionLRU: with five entries in the cache, two of them just read, a sixth that does not
// fit evicts exactly the two least recently used (put longest ago, never read), the total ends
// within the limit, and the rest still hit.
func TestEvictionLRU(t *testing.T) {
	dir := t.TempDir()
	big, _ := openStore(t, dir, 0)
	keys := make([]Key, 6)
	for i := range keys {
		keys[i] = testKey(fmt.Sprintf("program%d", i), "8")
	}
	for i := range 5 {
		if _, err := big.Put(keys[i], testPayload(byte(i), 1000), Meta{Name: fmt.Sprint("p", i)}); err != nil {
			t.Fatal(err)
		}
	}
	st, err := big.Stats()
	if err != nil || st.Entries != 5 {
		t.Fatalf("Stats %+v, %v", st, err)
	}
	one := st.Bytes / 5
	limit := st.Bytes - one/2 // the sixth entry needs two of the five gone
	s, logs := openStore(t, dir, limit)
	for _, i := range []int{0, 1} {
		if _, _, ok := s.Get(keys[i]); !ok {
			t.Fatalf("Get %d missed", i)
		}
	}
	evicted, err := s.Put(keys[5], testPayload(5, 1000), Meta{})
	if err != nil || evicted != 2 {
		t.Fatalf("Put: %d evicted, %v; want 2", evicted, err)
	}
	if st, err := s.Stats(); err != nil || st.Bytes > limit || st.Entries != 4 {
		t.Errorf("after eviction: %+v, %v; want 4 entries within %d bytes", st, err, limit)
	}
	for i, want := range []bool{true, true, false, false, true, true} {
		if _, _, ok := s.Get(keys[i]); ok != want {
			t.Errorf("entry %d: hit %v, want %v", i, ok, want)
		}
	}
	if logs.String() != "" {
		t.Errorf("logged %q", logs.String())
	}
	list, err := s.List()
	if err != nil || len(list) != 4 {
		t.Fatalf("List: %d, %v", len(list), err)
	}
	// The Gets just above ran in the order 0, 1, 4, 5: the most recent first.
	for j, i := range []int{5, 4, 1, 0} {
		if list[j].ID != keys[i].ID() {
			t.Errorf("List[%d] is %s, want entry %d", j, list[j].Name, i)
		}
	}
}

// TestPutOverLimit: a payload whose entry alone exceeds MaxBytes is refused with an error
// saying so, and nothing is written or evicted; Get refuses to read a file over the limit.
func TestPutOverLimit(t *testing.T) {
	s, logs := openStore(t, "", 4096)
	small := testKey("small", "8")
	if _, err := s.Put(small, testPayload(1, 100), Meta{}); err != nil {
		t.Fatal(err)
	}
	_, err := s.Put(testKey("big", "8"), testPayload(2, 4096), Meta{Name: "train_step"})
	if err == nil || !strings.Contains(err.Error(), "more than the cache's limit of 4096 bytes") || !strings.Contains(err.Error(), "train_step") {
		t.Fatalf("Put of an oversized entry: %v", err)
	}
	des, _ := os.ReadDir(s.Dir())
	if len(des) != 1 {
		t.Errorf("directory holds %d files, want the small entry only", len(des))
	}
	if _, _, ok := s.Get(small); !ok {
		t.Error("the small entry went")
	}
	// Get does not read a file larger than any entry of this cache could be.
	huge := testKey("huge", "8")
	if err := os.WriteFile(s.path(huge.ID()), make([]byte, s.readLimit()+1), 0o644); err != nil {
		t.Fatal(err)
	}
	wantMiss(t, s, logs, huge, "more than the cache's limit of 4096")
}

// TestClear: Clear removes every entry and crashed writers' temporary files, keeps a writer's
// fresh temporary file, other files and the directory, and counts what it removed.
func TestClear(t *testing.T) {
	s, _ := openStore(t, "", 0)
	var want int64
	for i := range 3 {
		k := testKey(fmt.Sprint(i), "8")
		if _, err := s.Put(k, testPayload(byte(i), 500*(i+1)), Meta{}); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(s.path(k.ID()))
		if err != nil {
			t.Fatal(err)
		}
		want += fi.Size()
	}
	id := testKey("x", "8").ID()
	stale := filepath.Join(s.Dir(), "."+id+".xlaexe.tmp-0123456789ab")
	fresh := filepath.Join(s.Dir(), "."+id+".xlaexe.tmp-ba9876543210")
	other := filepath.Join(s.Dir(), "README")
	for _, p := range []string{stale, fresh, other} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if list, err := s.List(); err != nil || len(list) != 3 {
		t.Fatalf("List before Clear: %d entries, %v; want 3 (temporary files are not entries)", len(list), err)
	}
	n, bytes, err := s.Clear()
	if err != nil || n != 3 || bytes != want {
		t.Fatalf("Clear: %d entries, %d bytes, %v; want 3, %d", n, bytes, err, want)
	}
	des, err := os.ReadDir(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, de := range des {
		left = append(left, de.Name())
	}
	if strings.Join(left, " ") != "."+id+".xlaexe.tmp-ba9876543210 README" {
		t.Errorf("left %q; want the fresh temporary file and README", left)
	}
	if n, _, err := s.Clear(); n != 0 || err != nil {
		t.Errorf("second Clear: %d, %v", n, err)
	}
}

// TestListProblems: List shows a corrupt and a truncated entry with Problem set, beside the good
// one, and survives a directory entry that is not a regular file.
func TestListProblems(t *testing.T) {
	s, _ := openStore(t, "", 0)
	good, bad, cut := testKey("good", "8"), testKey("bad", "8"), testKey("cut", "8")
	for _, k := range []Key{good, bad, cut} {
		if _, err := s.Put(k, testPayload(4, 800), Meta{Name: k.Fields[0].Value}); err != nil {
			t.Fatal(err)
		}
	}
	rewrite(t, s, bad, func(b []byte) []byte { b[len(b)-100] ^= 1; return b })
	rewrite(t, s, cut, func(b []byte) []byte { return b[:20] })
	if err := os.Mkdir(filepath.Join(s.Dir(), testKey("dir", "8").ID()+".xlaexe"), 0o755); err != nil {
		t.Fatal(err)
	}
	list, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	problems := map[string]string{}
	for _, e := range list {
		problems[e.ID] = e.Problem
	}
	if len(list) != 4 || problems[good.ID()] != "" || !strings.Contains(problems[bad.ID()], "checksum mismatch") ||
		!strings.Contains(problems[cut.ID()], "truncated") || !strings.Contains(problems[testKey("dir", "8").ID()], "not a regular file") {
		t.Errorf("List problems %q", problems)
	}
}

// TestKeyID: IDs are stable, differ when any field changes, and the length prefixes keep
// shifted boundaries apart.
func TestKeyID(t *testing.T) {
	a := Key{Fields: []KeyField{{"ab", "c"}}}
	b := Key{Fields: []KeyField{{"a", "bc"}}}
	c := Key{Fields: []KeyField{{"a", "b"}, {"c", ""}}}
	d := Key{Fields: []KeyField{{"c", ""}, {"a", "b"}}}
	ids := map[string]bool{}
	for _, k := range []Key{a, b, c, d, {}, testKey("aa", "8"), testKey("aa", "4")} {
		ids[k.ID()] = true
	}
	if len(ids) != 7 {
		t.Errorf("%d distinct IDs of 7 keys", len(ids))
	}
	if a.ID() != (Key{Fields: []KeyField{{"ab", "c"}}}).ID() || len(a.ID()) != 64 {
		t.Errorf("ID %q not stable or not hex SHA-256", a.ID())
	}
}

// TestConfigAndPutErrors: bad configurations and keys are refused naming the field.
func TestConfigAndPutErrors(t *testing.T) {
	err := Config{Dir: "/x", MaxBytes: -1}.Validate()
	if err == nil || !strings.Contains(err.Error(), "compilecache.Config.MaxBytes: -1 is negative") {
		t.Errorf("Validate: %v", err)
	}
	if _, err := Open(Config{}, nil); err == nil || !strings.Contains(err.Error(), "compilecache.Config.Dir") {
		t.Errorf("Open with the cache off: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	if _, err := Open(Config{Dir: filepath.Join(file, "cache")}, nil); err == nil || !strings.Contains(err.Error(), "compilecache.Config.Dir") {
		t.Errorf("Open under a file: %v", err)
	}
	t.Chdir(t.TempDir())
	s, err := Open(Config{Dir: "rel"}, nil)
	if err != nil || !filepath.IsAbs(s.Dir()) {
		t.Fatalf("Open(rel): %v", err)
	}
	for _, k := range []Key{{}, {Fields: []KeyField{{"", "x"}}}, {Fields: []KeyField{{"path", "\xff"}}}} {
		if _, err := s.Put(k, nil, Meta{}); err == nil {
			t.Errorf("Put with key %q: no error", k.Fields)
		}
	}
}

// TestResolveDir: flag over environment over default; "off" in either turns the cache off;
// relative directories come back absolute.
func TestResolveDir(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvDir {
				return v
			}
			return ""
		}
	}
	def, err := DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(def, filepath.Join("gotpu", "xla-executables")) {
		t.Errorf("DefaultDir %q", def)
	}
	wd, _ := os.Getwd()
	for _, tc := range []struct {
		flag, env, dir, source string
	}{
		{"/f", "/e", "/f", "flag"},
		{"", "/e", "/e", "env"},
		{"", "", def, "default"},
		{"", "off", "", "env"},
		{"off", "/e", "", "flag"},
		{"rel", "", filepath.Join(wd, "rel"), "flag"},
	} {
		dir, source, err := ResolveDir(tc.flag, env(tc.env))
		if err != nil || dir != tc.dir || source != tc.source {
			t.Errorf("ResolveDir(%q, env %q) = %q, %q, %v; want %q, %q", tc.flag, tc.env, dir, source, err, tc.dir, tc.source)
		}
	}
}

// TestResolve: the flags' rules the CLI and the service share — the flag, else the environment,
// else the default; "off" in either is off; on the pure-Go backend the environment and the
// default are ignored and the flag is an error naming it; a negative limit is an error.
func TestResolve(t *testing.T) {
	tmp := t.TempDir()
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == EnvDir {
				return v
			}
			return ""
		}
	}
	def, err := DefaultDir()
	if err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(tmp, "a"), filepath.Join(tmp, "b")
	for _, c := range []struct {
		flag, env string
		goBackend bool
		maxBytes  int64
		want      Config
		source    string
	}{
		{a, b, false, 1 << 20, Config{Dir: a, MaxBytes: 1 << 20}, SourceFlag},
		{"", b, false, 0, Config{Dir: b}, SourceEnv},
		{"", "", false, 0, Config{Dir: def}, SourceDefault},
		{Off, b, false, 0, Config{}, SourceFlag},
		{"", Off, false, 0, Config{}, SourceEnv},
		{"", b, true, 0, Config{}, SourceEnv},      // the environment: PJRT devices only
		{"", "", true, 0, Config{}, SourceDefault}, // the default: likewise
		{Off, "", true, 0, Config{}, SourceFlag},   // off is fine anywhere
	} {
		got, source, err := Resolve(c.flag, c.maxBytes, c.goBackend, env(c.env), nil)
		if err != nil || got != c.want || source != c.source {
			t.Errorf("Resolve(flag %q, env %q, go %v) = %+v, %q, %v; want %+v, %q", c.flag, c.env, c.goBackend, got, source, err, c.want, c.source)
		}
	}
	if _, _, err := Resolve(a, 0, true, env(""), nil); err == nil || !strings.Contains(err.Error(), "--compilation_cache_dir "+a+": --device go") {
		t.Errorf("the flag on the pure-Go backend: %v, want an error naming the flag", err)
	}
	if _, _, err := Resolve("", -1, false, env(""), nil); err == nil || !strings.Contains(err.Error(), "--compilation_cache_max_bytes -1") {
		t.Errorf("a negative limit: %v, want an error naming the flag", err)
	}
}

// fixChecksum returns a copy of an entry with its trailing checksum recomputed after an edit.
func fixChecksum(b []byte) []byte {
	if len(b) < trailerLen {
		return b
	}
	body := b[:len(b)-trailerLen]
	sum := sha256.Sum256(body)
	return append(append([]byte(nil), body...), sum[:]...)
}

// TestPutRemovesStaleTemps: eviction after a Put removes a crashed writer's temporary file (over
// an hour old) and leaves a writer's fresh one.
func TestPutRemovesStaleTemps(t *testing.T) {
	s, _ := openStore(t, "", 0)
	id := testKey("x", "8").ID()
	stale := filepath.Join(s.Dir(), "."+id+".xlaexe.tmp-0123456789ab")
	fresh := filepath.Join(s.Dir(), "."+id+".xlaexe.tmp-ba9876543210")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-61 * time.Minute)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(testKey("y", "8"), []byte("p"), Meta{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file: %v; want it removed", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temporary file: %v; want it kept", err)
	}
}
