package datasets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub"
	"github.com/gotpu/gotpu/hub/hubtest"
)

// fanOutFiles is a listing of n CSV files under data/.
func fanOutFiles(n int) []string {
	files := make([]string, n)
	for i := range files {
		files[i] = fmt.Sprintf("data/f%05d.csv", i)
	}
	return files
}

// fanOutReadme is a card whose one config lists the patterns pattern(0..n-1) for split train.
func fanOutReadme(n int, pattern func(int) string) []byte {
	var b bytes.Buffer
	b.WriteString("---\nconfigs:\n- config_name: default\n  data_files:\n  - split: train\n    path:\n")
	for i := range n {
		fmt.Fprintf(&b, "    - %q\n", pattern(i))
	}
	b.WriteString("---\n# fan-out\n")
	return b.Bytes()
}

// letters spells i in base 26 with a-z: distinct character classes that exclude no digit.
func letters(i int) string {
	s := ""
	for {
		s += string(rune('a' + i%26))
		if i /= 26; i == 0 {
			return s
		}
	}
}

// allocated runs f and returns the bytes it allocated (runtime.MemStats.TotalAlloc).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestReadmeFanOutRepeatedGlob: a card (340 KB) whose split lists one glob 20,000 times over
// 2,000 files resolves that glob once: the split holds each file once, and resolving allocates
// megabytes, not the 40 million entries (about a gigabyte) of listing every file per copy.
func TestReadmeFanOutRepeatedGlob(t *testing.T) {
	files := fanOutFiles(2000)
	readme := fanOutReadme(20000, func(int) string { return "data/*.csv" })
	var r *Resolved
	var err error
	n := allocated(func() { r, err = ResolveFiles(files, readme, "") })
	if err != nil {
		t.Fatalf("%d-byte card repeating one glob: %v", len(readme), err)
	}
	if got := r.Splits["train"]; len(got) != len(files) || got[0] != files[0] || got[len(got)-1] != files[len(files)-1] {
		t.Errorf("train has %d files, want each of the %d once, in order", len(got), len(files))
	}
	if n > 128<<20 {
		t.Errorf("resolving allocated %d MiB", n>>20)
	}
	t.Logf("%d-byte card, %d copies of one glob over %d files: %d files, %d MiB allocated", len(readme), 20000, len(files), len(r.Splits["train"]), n>>20)
}

// TestReadmeFanOutDistinctPatterns: 20,000 different globs that each match all of 2,000 files
// would list 40 million entries; the card is refused, before any is matched, with an error
// naming README.md and the limit, and resolving allocates megabytes.
func TestReadmeFanOutDistinctPatterns(t *testing.T) {
	files := fanOutFiles(2000)
	readme := fanOutReadme(20000, func(i int) string { return "data/*[!" + letters(i) + "].csv" })
	var err error
	n := allocated(func() { _, err = ResolveFiles(files, readme, "") })
	for _, part := range []string{"README.md", strconv.Itoa(MaxPatternChecks), `split "train"`, "data_files"} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("error %v does not name %s", err, part)
		}
	}
	if n > 128<<20 {
		t.Errorf("refusing allocated %d MiB", n>>20)
	}
	t.Logf("%d-byte card: %v (%d MiB allocated)", len(readme), err, n>>20)

	// The same patterns in a .huggingface.yaml: the error names that file.
	doc, perr := parseStandalone(bytes.TrimSuffix(bytes.TrimPrefix(readme, []byte("---\n")), []byte("---\n# fan-out\n")))
	if perr != nil {
		t.Fatal(perr)
	}
	base, _ := readmeYAML(nil)
	if _, err := resolve(files, base.merge(doc), ""); err == nil || !strings.Contains(err.Error(), standaloneYAML) {
		t.Errorf("patterns from %s: %v, want an error naming it", standaloneYAML, err)
	}
}

// TestResolveHubReadmeOverLimit: a dataset card the Hub announces at 8 MiB is refused from its
// size before it is downloaded (the README limit is 1 MiB): the error names README.md and the
// limit, and not one of its bytes is served.
func TestResolveHubReadmeOverLimit(t *testing.T) {
	s := hubtest.New(t)
	readme := append([]byte("---\nconfigs:\n- config_name: default\n  data_files: data/*.csv\n---\n"), bytes.Repeat([]byte("padding "), 1<<20)...)
	s.AddRepo("dataset", "org/big-card", map[string][]byte{"README.md": readme, "data/a.csv": []byte("x\n1\n")}, hubtest.RepoOptions{})
	c := newHubClient(t, s)
	_, err := ResolveHub(context.Background(), c, hub.Repo{ID: "org/big-card", Type: hub.DatasetRepo}, "")
	if !errors.Is(err, hub.ErrTooLarge) {
		t.Errorf("8 MiB card: %v, want hub.ErrTooLarge", err)
	}
	for _, part := range []string{"README.md", strconv.Itoa(MaxReadmeBytes), strconv.Itoa(len(readme))} {
		if err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("error %v does not name %s", err, part)
		}
	}
	readmeBytes := int64(0)
	for _, r := range s.Requests() {
		if r.Method == "GET" && (r.Host == "cdn" || strings.Contains(r.Path, "README.md")) {
			readmeBytes += r.Bytes
		}
	}
	if readmeBytes != 0 {
		t.Errorf("%d bytes of the card were served before it was refused", readmeBytes)
	}
	t.Logf("%d-byte card: %v; %d bytes served in all", len(readme), err, s.BytesServed())
}

// TestRepeatedPatternResolvedOnce: a pattern a split repeats (also spelled with "./") is resolved
// where it first appears, while a file that two different patterns match is still listed once
// per pattern, in pattern order, as datasets lists it; a literal path is looked up, and one that
// is missing is still an error naming it as written.
func TestRepeatedPatternResolvedOnce(t *testing.T) {
	files := []string{"a.csv", "b.csv", "data/c.csv"}
	card := func(patterns ...string) []byte {
		return fanOutReadme(len(patterns), func(i int) string { return patterns[i] })
	}
	r, err := ResolveFiles(files, card("*.csv", "./*.csv", "a.csv", "*.csv", "./a.csv", "data/*"), "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.Splits["train"], []string{"a.csv", "b.csv", "a.csv", "data/c.csv"}; !slices.Equal(got, want) {
		t.Errorf("train %q, want %q", got, want)
	}
	if _, err := ResolveFiles(files, card("*.csv", "./missing.csv"), ""); err == nil || !strings.Contains(err.Error(), `"./missing.csv"`) {
		t.Errorf("a missing literal path: %v", err)
	}
}
