package table

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// Fuzzing speed. The fuzzer minimizes every input that finds new coverage, trying up to n²/2
// cuts of an n-byte input for up to a minute, and counts none of those runs. With seeds of a few
// KiB (whole fixture files) and a millisecond or more an input (a directory made and removed, a
// file written and flushed), each new find stalled a worker for the whole minute: a run of a
// minute made fewer than 20 execs. So the seeds are a few hundred bytes each, written here by
// arrow-go and by hand to cover the encodings, codecs and forms the fixtures do; each process
// writes its inputs over one file (overwrite); and the limits are small, so that a size claim is
// refused before much is allocated. Regressions larger than the seeds are replayed by
// TestFuzzRegressions instead of sitting in the fuzzer's corpus.

// fuzzOpts are the limits inside the fuzz bodies.
var fuzzOpts = Options{MaxCellBytes: 64 << 10, MaxRecordBytes: 256 << 10, MaxRecordFields: 256}

// fuzzPath is the file a fuzz target writes its inputs to: one per process, in a directory made
// once, as a process runs its inputs one at a time.
func fuzzPath(f *testing.F, name string) string { return filepath.Join(f.TempDir(), name) }

// fuzzFile writes data to path and reads everything in it: a panic, an error that does not name
// the file, or more than maxAllocPerRead allocated fails.
func fuzzFile(t testing.TB, path string, data []byte) {
	if err := overwrite(path, data); err != nil {
		t.Fatal(err)
	}
	checkAlloc(t, filepath.Base(path), func() {
		if _, err := readEverything(path, fuzzOpts); err != nil && !strings.Contains(err.Error(), path) {
			t.Fatalf("error does not name the file: %v", err)
		}
	})
}

// overwrite writes data over the file at path and cuts off what is left of its old contents. A
// file truncated to nothing and written again (os.WriteFile) is flushed to disk when it is closed
// on ext4 (auto_da_alloc): that took milliseconds, most of an input's time.
func overwrite(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Truncate(int64(len(data)))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// maxAllocPerRead bounds what reading one small corrupt file may allocate in all, under
// corruptOpts or fuzzOpts: a reader's buffers are a few MiB; a size claim believed would be far
// more.
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

// addSeeds adds each seed, whole and cut in half (a truncated file is the commonest corruption).
func addSeeds(f *testing.F, seeds [][]byte) {
	for _, b := range seeds {
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
}

func FuzzParquet(f *testing.F) {
	addSeeds(f, parquetSeeds(f))
	path := fuzzPath(f, "f.parquet")
	f.Fuzz(func(t *testing.T, b []byte) { fuzzFile(t, path, b) })
}

func FuzzArrow(f *testing.F) {
	addSeeds(f, arrowSeeds(f))
	path := fuzzPath(f, "f.arrow")
	f.Fuzz(func(t *testing.T, b []byte) { fuzzFile(t, path, b) })
}

func FuzzCSV(f *testing.F) {
	addSeeds(f, csvSeeds)
	csvPath, txtPath := fuzzPath(f, "f.csv"), fuzzPath(f, "f.txt")
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzFile(t, csvPath, b)
		fuzzFile(t, txtPath, b) // the text loader reads the same bytes line by line
	})
}

func FuzzJSON(f *testing.F) {
	addSeeds(f, jsonSeeds)
	path := fuzzPath(f, "f.json")
	f.Fuzz(func(t *testing.T, b []byte) { fuzzFile(t, path, b) })
}

// TestFuzzRegressions replays inputs that once failed a fuzz target and are too large for its
// seed corpus (testdata/regress/<target>/...).
func TestFuzzRegressions(t *testing.T) {
	targets, err := os.ReadDir("testdata/regress")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, target := range targets {
		inputs, err := os.ReadDir(filepath.Join("testdata/regress", target.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range inputs {
			b, err := os.ReadFile(filepath.Join("testdata/regress", target.Name(), in.Name()))
			if err != nil {
				t.Fatal(err)
			}
			name := strings.TrimPrefix(target.Name(), "Fuzz")
			fuzzFile(t, filepath.Join(t.TempDir(), "f."+strings.ToLower(name)), b)
			n++
		}
	}
	if n == 0 {
		t.Fatal("no regression inputs")
	}
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

// FuzzFieldCounter checks fieldCounter against encoding/csv with LazyQuotes: read through it
// with a limit of n fields, an input fails exactly when one of its records has more than n.
func FuzzFieldCounter(f *testing.F) {
	for _, s := range csvSeeds {
		f.Add(s, uint8(2))
	}
	f.Add([]byte("a,\"b\"\"\",c\r\n\"x\r\ny\",z\n\"q\"\r,w\n\n"), uint8(1))
	f.Fuzz(func(t *testing.T, b []byte, n uint8) {
		limit := int(n%8) + 1
		read := func(r io.Reader) (widest int, err error) {
			cr := csv.NewReader(r)
			cr.LazyQuotes, cr.FieldsPerRecord, cr.ReuseRecord = true, -1, true
			for {
				rec, err := cr.Read()
				if errors.Is(err, io.EOF) {
					return widest, nil
				}
				if err != nil {
					return widest, err
				}
				widest = max(widest, len(rec))
			}
		}
		widest, err := read(bytes.NewReader(b))
		if err != nil {
			return // nothing to compare with
		}
		counted, err := read(newFieldCounter(bytes.NewReader(b), ',', limit))
		switch {
		case counted > limit:
			t.Fatalf("%q: a record of %d fields passed a limit of %d", b, counted, limit)
		case errors.Is(err, errFields) && widest <= limit:
			t.Fatalf("%q: refused under a limit of %d, its widest record has %d fields", b, limit, widest)
		case err == nil && widest > limit:
			t.Fatalf("%q: a record of %d fields not refused under a limit of %d", b, widest, limit)
		case err != nil && !errors.Is(err, errFields):
			t.Fatalf("%q: %v", b, err)
		}
	})
}
