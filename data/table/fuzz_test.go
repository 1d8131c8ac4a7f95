package table

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// fuzzFile writes data under name in a fresh directory and reads everything in it: a panic, an
// error that does not name the file, or more than maxAllocPerRead allocated fails.
func fuzzFile(t *testing.T, name string, data []byte) {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	checkAlloc(t, name, func() {
		if _, err := readEverything(p, corruptOpts); err != nil && !strings.Contains(err.Error(), p) {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}

// maxAllocPerRead bounds what reading one small corrupt file may allocate in all, under
// corruptOpts: a reader's buffers are a few MiB; a size claim believed would be far more.
const maxAllocPerRead = 64 << 20

func checkAlloc(t testing.TB, what string, read func()) {
	t.Helper()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	read()
	runtime.ReadMemStats(&ms)
	if d := ms.TotalAlloc - before; d > maxAllocPerRead {
		t.Fatalf("%s: reading allocated %.0f MiB", what, float64(d)/(1<<20))
	}
}

// seed adds every fixture named, whole and cut in half, to f's corpus. The fuzzer minimizes each
// new interesting input, which takes long on big ones: the seeds are the small fixtures (the big
// ones are read whole by the other tests) and, for text formats, their first lines.
func seed(f *testing.F, names ...string) {
	for _, n := range names {
		b, err := os.ReadFile(fixture(n))
		if err != nil {
			f.Fatal(err)
		}
		if !strings.HasSuffix(n, "parquet") && !strings.HasSuffix(n, "arrow") {
			b = firstLines(b, 12)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
}

func firstLines(b []byte, n int) []byte {
	at := 0
	for i := 0; i < n && at < len(b); i++ {
		j := bytes.IndexByte(b[at:], '\n')
		if j < 0 {
			return b
		}
		at += j + 1
	}
	return b[:at]
}

func FuzzParquet(f *testing.F) {
	seed(f, "corpus-gzip.parquet", "nulls.parquet", "wide.parquet")
	f.Fuzz(func(t *testing.T, b []byte) { fuzzFile(t, "f.parquet", b) })
}

func FuzzArrow(f *testing.F) {
	seed(f, "nulls.arrow", "dict/test/data-00000-of-00001.arrow")
	f.Fuzz(func(t *testing.T, b []byte) { fuzzFile(t, "f.arrow", b) })
}

func FuzzCSV(f *testing.F) {
	seed(f, "corpus.csv", "nulls.csv")
	f.Add([]byte("text,input_ids\n\"a\"\"\n\",[1,2]\n,\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzFile(t, "f.csv", b)
		fuzzFile(t, "f.txt", b) // the text loader reads the same bytes line by line
	})
}

func FuzzJSON(f *testing.F) {
	seed(f, "corpus.jsonl", "corpus-array.json", "nulls.jsonl")
	f.Add([]byte(`[{"text": null, "input_ids": []}, {"text": "\u00e9"}]`))
	f.Fuzz(func(t *testing.T, b []byte) { fuzzFile(t, "f.json", b) })
}

// FuzzIntList checks parseIntList against encoding/json: what it accepts, encoding/json decodes
// to the same int32s; and an array encoding/json decodes to int32s, it accepts.
func FuzzIntList(f *testing.F) {
	for _, s := range []string{"[1, 2, 3]", "[]", " [ -2147483648 ,2147483647 ] ", "[1,]", "[01]", "[1.0]", "[1e3]", "[null]", "[2147483648]", "[[1]]", `["1"]`, "[-0]", "[1] x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseIntList(s, nil, 1<<20)
		var want []int32
		jerr := json.Unmarshal([]byte(s), &want)
		isArray := strings.HasPrefix(strings.TrimLeft(s, " \t\r\n"), "[")
		if err == nil {
			if jerr != nil || !slices.Equal(got, want) {
				t.Fatalf("%q: parsed %v, encoding/json %v (%v)", s, got, want, jerr)
			}
			return
		}
		// encoding/json decodes null elements as zeros; this parser refuses them, and any
		// non-array (a bare null) too.
		if jerr == nil && isArray && !strings.Contains(s, "null") {
			t.Fatalf("%q: refused (%v), encoding/json read %v", s, err, want)
		}
		if errors.Is(err, ErrRange) && jerr == nil {
			t.Fatalf("%q: out of range for this parser, not for encoding/json", s)
		}
	})
}
