package table

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data/table/tabletest"
)

// Hostile inputs of issue 38 (findings 4, 5 and 10): small files that made the readers take far
// more memory than the record or batch they hold. Each test bounds what the read allocates, in
// bytes (runtime.MemStats), well below what the readers took before.

// allocated returns the bytes allocated by fn (TotalAlloc), the garbage included.
func allocated(fn func()) uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	fn()
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc - before
}

// nestedArrays returns depth nested JSON arrays whose first element is the next array and whose
// second is pad: [[[1,"pad"],"pad"],"pad"]. Typing the first element of each level by re-parsing
// the rest of the value made the work and the copies kept depth × size.
func nestedArrays(depth int, pad string) string {
	var b strings.Builder
	b.WriteString(strings.Repeat("[", depth))
	b.WriteString("1")
	for range depth {
		b.WriteString(`,"` + pad + `"]`)
	}
	return b.String()
}

// TestNestedJSONOnePass (finding 4): a 1 MB JSON line of 999 nested arrays (1,000 levels with the
// object's braces, the most a record may have) is typed in one pass with memory about the
// record; deeper nesting is an error naming the file, row and the limit, in Open and in scans.
func TestNestedJSONOnePass(t *testing.T) {
	pad := strings.Repeat("x", 1000)
	line := `{"text": "hi", "nested": ` + nestedArrays(MaxJSONDepth-1, pad) + "}\n"
	p := writeFile(t, "nested.jsonl", line)
	var cols []Column
	var texts []string
	n := allocated(func() {
		tb, err := Open(p, Options{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		cols = tb.Columns()
		texts = scanAllStrings(t, p, "text")
	})
	t.Logf("%d-byte line, %d levels: %.1f MiB allocated", len(line), MaxJSONDepth, mib(int64(n)))
	want := strings.Repeat("list<", MaxJSONDepth-1) + "int64" + strings.Repeat(">", MaxJSONDepth-1)
	if len(cols) != 2 || cols[1].Type != want {
		t.Fatalf("columns %v", cols)
	}
	if len(texts) != 1 || texts[0] != "hi" {
		t.Fatalf("texts %q", texts)
	}
	// Before: about 1 GB for this line. The line is held twice at most (read, and grown).
	if limit := uint64(8<<20 + 4*len(line)); n > limit {
		t.Fatalf("typing a %d-byte line allocated %.1f MiB, more than %.1f MiB", len(line), mib(int64(n)), mib(int64(limit)))
	}

	deep := nestedArrays(MaxJSONDepth, "y")
	limit := fmt.Sprint(MaxJSONDepth)
	for name, content := range map[string]string{
		"deep-first.jsonl": `{"text": "a", "nested": ` + deep + "}\n",
		"deep-first.json":  `[{"text": "a", "nested": ` + deep + "}]",
	} {
		_, err := Open(writeFile(t, name, content), Options{})
		wantErr(t, name, err, ErrTooLarge, name, "row 0", limit)
	}
	for name, content := range map[string]string{
		"deep-later.jsonl": `{"text": "a"}` + "\n" + `{"text": "b", "nested": ` + deep + "}\n",
		"deep-later.json":  `[{"text": "a"}, {"text": "b", "nested": ` + deep + "}]",
	} {
		err := scanErr(t, writeFile(t, name, content), "text")
		wantErr(t, name, err, ErrTooLarge, name, "row 1", limit)
	}
}

// manyKeys returns a JSON object of n keys.
func manyKeys(n int) string {
	var b strings.Builder
	b.WriteString(`{"text": "x"`)
	for i := range n {
		fmt.Fprintf(&b, `,"k%d":0`, i)
	}
	b.WriteString("}")
	return b.String()
}

// TestFieldsPerRecord (finding 5): a CSV record of millions of commas and a JSON object of
// millions of keys are refused with an error naming the file, the row and MaxRecordFields,
// without holding one string or map entry per field; a limit set in Options is honoured, and
// commas inside a quoted cell are not fields.
func TestFieldsPerRecord(t *testing.T) {
	commas := strings.Repeat(",", 2<<20)
	keys := manyKeys(1 << 20)
	limit := fmt.Sprint(DefaultMaxRecordFields)
	for _, c := range []struct {
		name, content, row string
		inOpen             bool
	}{
		{"header.csv", "text" + commas + "\nx\n", "header", true},
		{"row.csv", "text,n\na,1\nb" + commas + "\n", "row 1", false},
		{"first.jsonl", keys + "\n", "row 0", true},
		{"later.jsonl", `{"text": "a"}` + "\n" + keys + "\n", "row 1", false},
		{"later.json", `[{"text": "a"}, ` + keys + "]", "row 1", false},
	} {
		p := writeFile(t, c.name, c.content)
		var err error
		n := allocated(func() {
			var tb *Table
			if tb, err = Open(p, Options{}); err == nil && !c.inOpen {
				err = tb.ScanStrings(context.Background(), "text", noop3)
			}
		})
		t.Logf("%s: %d bytes: %.1f MiB allocated: %v", c.name, len(c.content), mib(int64(n)), err)
		wantErr(t, c.name, err, ErrTooLarge, c.name, c.row, "MaxRecordFields", limit)
		// Before: a header of 2M commas took about 500 MB, a line of 1M keys about 250 MB.
		if bound := uint64(16<<20 + 4*len(c.content)); n > bound {
			t.Errorf("%s: %.1f MiB allocated for a %d-byte file, more than %.1f MiB", c.name, mib(int64(n)), len(c.content), mib(int64(bound)))
		}
	}

	// A quoted cell of 100k commas is one field under the default limit.
	text := strings.Repeat("a,", 100_000)
	got := scanAllStrings(t, writeFile(t, "quoted.csv", "text,n\n\""+text+"\",1\n"), "text")
	if len(got) != 1 || got[0] != text {
		t.Errorf("a quoted cell of commas: %d rows", len(got))
	}
}

// TestMaxRecordFields: the limit is an option; commas and newlines inside a quoted cell are not
// fields, "" inside one is a quote, a bare quote inside an unquoted cell does not start one, and
// the keys of a nested object are not the record's.
func TestMaxRecordFields(t *testing.T) {
	opts := Options{MaxRecordFields: 3}
	ok := writeFile(t, "ok.csv", "a,b,c\n\"1,2,3,\"\"4\"\"\n,5\",x\"y,z\n")
	if _, err := readEverything(ok, opts); err != nil {
		t.Errorf("3 fields under a limit of 3: %v", err)
	}
	if got := scanAllStringsOpts(t, ok, "a", opts); len(got) != 1 || got[0] != "1,2,3,\"4\"\n,5" {
		t.Errorf("quoted cell: %q", got)
	}
	_, err := Open(writeFile(t, "four.csv", "a,b,c,d\n"), opts)
	wantErr(t, "four.csv", err, ErrTooLarge, "four.csv", "header", "MaxRecordFields 3")
	_, err = Open(writeFile(t, "four.jsonl", `{"a":1,"b":2,"c":3,"d":4}`+"\n"), opts)
	wantErr(t, "four.jsonl", err, ErrTooLarge, "four.jsonl", "row 0", "MaxRecordFields 3")
	if _, err := Open(writeFile(t, "three.jsonl", `{"a":1,"b":{"x":1,"y":2,"z":3,"w":4},"c":3}`+"\n"), opts); err != nil {
		t.Errorf("keys of a nested object counted: %v", err)
	}
	wantErr(t, "negative", Options{MaxRecordFields: -1}.Validate(), nil, "Options.MaxRecordFields")
}

func scanAllStringsOpts(t testing.TB, path, col string, opts Options) []string {
	t.Helper()
	tb, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if err := tb.ScanStrings(context.Background(), col, func(_ int64, s string, _ bool) error {
		out = append(out, strings.Clone(s))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// writeRepeatedParquet is tabletest.WriteRepeatedParquet, failing the test on an error.
func writeRepeatedParquet(t *testing.T, path string, small, rows, size int, dict bool) {
	t.Helper()
	if err := tabletest.WriteRepeatedParquet(path, small, rows, size, dict); err != nil {
		t.Fatal(err)
	}
}

// scanPeak scans the text column of path, checking that every row is want (or, for the first
// small rows, "x"), and returns the rows, the peak of the heap in use over what it was before
// (sampled in the callback, where a batch is live) and the scan's error.
func scanPeak(t *testing.T, path string, opts Options, small int64, want string) (rows int64, peak uint64, err error) {
	t.Helper()
	tb, err := Open(path, opts)
	if err != nil {
		return 0, 0, err
	}
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	runtime.GC()
	runtime.GC() // the second empties sync.Pools' victim caches (the writer's buffers)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	err = tb.ScanStrings(context.Background(), "text", func(r int64, s string, valid bool) error {
		if w := want; !valid || (r < small && s != "x") || (r >= small && s != w) {
			return fmt.Errorf("row %d: a %d-byte string, want %d bytes", r, len(s), len(want))
		}
		if r%16 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse-min(ms.HeapInuse, base))
		}
		rows++
		return nil
	})
	return rows, peak, err
}

// TestParquetRepeatedLongStrings (finding 10): a 345-byte zstd file of 5,000 rows of one 1 MiB
// string (a dictionary of one entry) is legitimate: it reads with the heap bounded by a few MiB,
// the rows sharing the dictionary's string, not in a batch of 4,096 rows sized from the
// metadata's few bytes a row (refused before, after taking 2 GB).
func TestParquetRepeatedLongStrings(t *testing.T) {
	const size = 1 << 20
	long := tabletest.Long(size)
	dict := filepath.Join(t.TempDir(), "dict.parquet")
	writeRepeatedParquet(t, dict, 0, 5000, size, true)
	st, err := os.Stat(dict)
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []Options{{MaxCellBytes: 4 * size}, {}} {
		rows, peak, err := scanPeak(t, dict, opts, 0, long)
		t.Logf("dictionary, %d-byte file, MaxCellBytes %d: %d rows, peak heap %.1f MiB over the start: %v", st.Size(), opts.MaxCellBytes, rows, mib(int64(peak)), err)
		if err != nil || rows != 5000 {
			t.Fatalf("MaxCellBytes %d: %d rows: %v", opts.MaxCellBytes, rows, err)
		}
		if peak > 64<<20 {
			t.Errorf("MaxCellBytes %d: peak heap %.1f MiB over the start, more than 64 MiB", opts.MaxCellBytes, mib(int64(peak)))
		}
	}
}

// TestParquetDeltaRepeated (finding 10): 200 rows of one 256 KiB string as DELTA_BYTE_ARRAY (each
// row the previous one's prefix: a file of about a kilobyte) read in batches sized from the
// decoded bytes of the rows before them, not from the metadata's few bytes a row; and rows that
// grow suddenly past a batch's budget are read again in smaller batches.
func TestParquetDeltaRepeated(t *testing.T) {
	long := tabletest.Long(256 << 10)
	delta := filepath.Join(t.TempDir(), "delta.parquet")
	writeRepeatedParquet(t, delta, 0, 200, 256<<10, false)
	rows, peak, err := scanPeak(t, delta, Options{MaxCellBytes: 1 << 20}, 0, long)
	t.Logf("DELTA_BYTE_ARRAY, 200 rows of 256 KiB: %d rows, peak heap %.1f MiB over the start: %v", rows, mib(int64(peak)), err)
	if err != nil || rows != 200 {
		t.Fatalf("delta: %d rows: %v", rows, err)
	}
	if peak > 32<<20 {
		t.Errorf("delta: peak heap %.1f MiB over the start, more than 32 MiB", mib(int64(peak)))
	}

	// 1,000 rows of "x" take the batches to 512 rows; the next, of 292 rows of 256 KiB, outgrows
	// what a batch may take (here the 36 MiB bound on one buffer) before it is allocated, and the
	// row group is read again from there a row at a time, the batches growing from the sizes of
	// those rows.
	skewed := filepath.Join(t.TempDir(), "skewed.parquet")
	writeRepeatedParquet(t, skewed, 1000, 300, 256<<10, false)
	rows, peak, err = scanPeak(t, skewed, Options{MaxCellBytes: 1 << 20}, 1000, long)
	t.Logf("DELTA_BYTE_ARRAY, 1,000 rows of 1 byte and 300 of 256 KiB: %d rows, peak heap %.1f MiB over the start: %v", rows, mib(int64(peak)), err)
	if err != nil || rows != 1300 {
		t.Fatalf("skewed: %d rows: %v", rows, err)
	}
	// The batch refused took up to its budget before it was refused; the heap holds that garbage
	// until the collector runs.
	if limit := uint64(rowsBudget + 32<<20); peak > limit {
		t.Errorf("skewed: peak heap %.1f MiB over the start, more than %.1f MiB", mib(int64(peak)), mib(int64(limit)))
	}
}
