package table

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
)

// TestFormatsMatchCorpus reads every fixture format and compares its rows with the generator's
// own dump of its corpus; since each equals the dump, the formats equal each other.
func TestFormatsMatchCorpus(t *testing.T) {
	corpus := loadExpected(t, "corpus.expected.json")
	dict := loadExpected(t, "dict.expected.json")
	cases := []struct {
		file   string
		format Format
		want   []row
		rows   bool // NumRows known without a scan
	}{
		{"corpus.parquet", FormatParquet, corpus, true},           // hyparquet-writer, snappy
		{"corpus-zstd.parquet", FormatParquet, dict, true},        // parquet-wasm, zstd, dictionary
		{"corpus-gzip.parquet", FormatParquet, corpus[:40], true}, // parquet-wasm, gzip
		{"corpus.arrow", FormatArrow, corpus, true},               // IPC stream
		{"corpus.file.arrow", FormatArrow, corpus, true},          // IPC file
		{"save_to_disk", FormatArrow, corpus, true},               // two stream shards
		{"corpus.csv", FormatCSV, corpus, false},
		{"corpus.jsonl", FormatJSON, corpus, false},
		{"corpus-array.json", FormatJSON, corpus, false},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			tb, err := Open(fixture(c.file), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if tb.Format() != c.format || tb.Path() != fixture(c.file) {
				t.Errorf("Format %q Path %q, want %q %q", tb.Format(), tb.Path(), c.format, fixture(c.file))
			}
			cols := tb.Columns()
			if len(cols) != 2 || cols[0].Name != "text" || cols[1].Name != "input_ids" {
				t.Errorf("Columns = %v, want text then input_ids", cols)
			}
			n, known := tb.NumRows()
			if known != c.rows || (known && n != int64(len(c.want))) {
				t.Errorf("NumRows = %d, %v; want %d, %v", n, known, len(c.want), c.rows)
			}
			sameRows(t, c.file, readRows(t, fixture(c.file), Options{}), c.want)
		})
	}
}

func TestColumnTypes(t *testing.T) {
	want := map[string]string{
		"corpus.parquet":    "text string, input_ids list<int32>",
		"corpus.arrow":      "text string, input_ids list<int32>",
		"wide.parquet":      "input_ids list<int64>, labels list<int64>, label int64",
		"corpus.csv":        "text string, input_ids string",
		"corpus.jsonl":      "text string, input_ids list<int64>",
		"nulls.jsonl":       "text null, input_ids list<int64>",
		"corpus.txt":        "text string",
		"corpus-array.json": "text string, input_ids list<int64>",
	}
	for f, w := range want {
		tb, err := Open(fixture(f), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if got := tb.columnList(); got != w {
			t.Errorf("%s: columns %q, want %q", f, got, w)
		}
	}
}

// TestNulls: null text, null lists and empty lists, from each writer; the JSON lines file also
// lacks the text key in row 10.
func TestNulls(t *testing.T) {
	want := loadExpected(t, "nulls.expected.json")
	nulls, empties := 0, 0
	for _, r := range want {
		if r.Text == nil {
			nulls++
		}
		if r.IDs != nil && len(r.IDs) == 0 {
			empties++
		}
	}
	if nulls == 0 || empties == 0 {
		t.Fatalf("nulls.expected.json has %d null texts and %d empty lists: the fixture lost its point", nulls, empties)
	}
	for _, f := range []string{"nulls.parquet", "nulls.arrow", "nulls.csv", "nulls.jsonl"} {
		t.Run(f, func(t *testing.T) { sameRows(t, f, readRows(t, fixture(f), Options{}), want) })
	}
}

// TestText: corpus.txt holds the corpus texts one per line; texts with newlines span lines, and
// the text loader yields one row per line.
func TestText(t *testing.T) {
	corpus := loadExpected(t, "corpus.expected.json")
	var texts []string
	for _, r := range corpus {
		texts = append(texts, *r.Text)
	}
	wantLines := strings.Split(strings.Join(texts, "\n"), "\n")
	if len(wantLines) <= len(texts) {
		t.Fatalf("no corpus text holds a newline: the fixture lost its point")
	}
	got := scanAllStrings(t, fixture("corpus.txt"), "text")
	if !slices.Equal(got, wantLines) {
		t.Fatalf("corpus.txt: %d lines, want %d (first diff %s)", len(got), len(wantLines), firstDiff(got, wantLines))
	}

	// Universal newlines, as Python's open: "\r\n" and a lone "\r" end lines too; empty lines are
	// rows; a last line break adds no row.
	for _, c := range []struct{ in, want string }{
		{"a\nb\n", "a|b"},
		{"a\nb", "a|b"},
		{"a\r\nb\r\n", "a|b"},
		{"a\rb\r", "a|b"},
		{"\n\nx\n\n", "||x|"},
		{"a\r\r\nb", "a||b"},
		{"", ""},
	} {
		got := scanAllStrings(t, writeFile(t, "t.txt", c.in), "text")
		if strings.Join(got, "|") != c.want || (c.want == "" && len(got) != 0) {
			t.Errorf("%q: rows %q, want %q", c.in, got, strings.Split(c.want, "|"))
		}
	}
}

func scanAllStrings(t testing.TB, path, col string) []string {
	t.Helper()
	tb, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	if err := tb.ScanStrings(context.Background(), col, func(_ int64, s string, _ bool) error {
		out = append(out, s)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("row %d: %q vs %q", i, a[i], b[i])
		}
	}
	return "in length"
}

// TestLayouts proves what the fixtures are meant to exercise, from their own metadata: several
// row groups, snappy and zstd and gzip, a dictionary-encoded string column, several IPC batches.
func TestLayouts(t *testing.T) {
	for _, c := range []struct {
		file  string
		codec compress.Compression
		dict  bool
	}{
		{"corpus.parquet", compress.Codecs.Snappy, false},
		{"corpus-zstd.parquet", compress.Codecs.Zstd, true},
		{"corpus-gzip.parquet", compress.Codecs.Gzip, true},
	} {
		r, err := file.OpenParquetFile(fixture(c.file), false)
		if err != nil {
			t.Fatal(err)
		}
		rgs := r.NumRowGroups()
		cc, err := r.MetaData().RowGroup(0).ColumnChunk(0)
		if err != nil {
			t.Fatal(err)
		}
		hasDict := cc.HasDictionaryPage() && slices.Contains(cc.Encodings(), parquet.Encodings.RLEDict)
		t.Logf("%s: %d row groups, codec %v, text dictionary %v", c.file, rgs, cc.Compression(), hasDict)
		if c.file != "corpus-gzip.parquet" && rgs < 3 {
			t.Errorf("%s: %d row groups, want several", c.file, rgs)
		}
		if cc.Compression() != c.codec {
			t.Errorf("%s: codec %v, want %v", c.file, cc.Compression(), c.codec)
		}
		if c.dict && !hasDict {
			t.Errorf("%s: text column is not dictionary-encoded", c.file)
		}
		r.Close()
	}
	for _, f := range []string{"corpus.arrow", "save_to_disk/data-00000-of-00002.arrow"} {
		fh, err := os.Open(fixture(f))
		if err != nil {
			t.Fatal(err)
		}
		rr, err := ipc.NewReader(fh)
		if err != nil {
			t.Fatal(err)
		}
		batches := 0
		for rr.Next() {
			batches++
		}
		rr.Release()
		fh.Close()
		if batches < 2 {
			t.Errorf("%s: %d record batches, want several", f, batches)
		}
	}
	fh, err := os.Open(fixture("corpus.file.arrow"))
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	fr, err := ipc.NewFileReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	if fr.NumRecords() < 2 {
		t.Errorf("corpus.file.arrow: %d record batches, want several", fr.NumRecords())
	}
	fr.Close()
}

// TestSaveToDiskOrder: shards are read in the order of state.json's _data_files, not of the
// directory: listing them reversed reverses the halves.
func TestSaveToDiskOrder(t *testing.T) {
	corpus := loadExpected(t, "corpus.expected.json")
	dir := t.TempDir()
	for _, f := range []string{"data-00000-of-00002.arrow", "data-00001-of-00002.arrow", "dataset_info.json"} {
		b, err := os.ReadFile(fixture("save_to_disk/" + f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	state := `{"_data_files": [{"filename": "data-00001-of-00002.arrow"}, {"filename": "data-00000-of-00002.arrow"}], "_split": "train"}`
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
		t.Fatal(err)
	}
	half := (len(corpus) + 1) / 2
	want := append(slices.Clone(corpus[half:]), corpus[:half]...)
	sameRows(t, "reversed save_to_disk", readRows(t, dir, Options{}), want)

	for name, state := range map[string]string{
		"escape":  `{"_data_files": [{"filename": "../corpus.arrow"}]}`,
		"empty":   `{"_data_files": []}`,
		"garbage": `{"_data_files": `,
	} {
		if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(state), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir, Options{}); err == nil || !strings.Contains(err.Error(), "state.json") {
			t.Errorf("%s state.json: err %v, want one naming state.json", name, err)
		}
	}
	if _, err := Open(t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "state.json") {
		t.Errorf("empty directory: err %v, want one saying what a save_to_disk directory holds", err)
	}
}

func TestDatasetDictSplits(t *testing.T) {
	corpus := loadExpected(t, "corpus.expected.json")
	sameRows(t, "dict train", readRows(t, fixture("dict"), Options{Split: "train"}), corpus[:120])
	sameRows(t, "dict test", readRows(t, fixture("dict"), Options{Split: "test"}), corpus[120:])
	tb, err := Open(fixture("dict"), Options{Split: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := tb.NumRows(); !ok || n != int64(len(corpus)-120) {
		t.Errorf("NumRows = %d, %v", n, ok)
	}
	for _, split := range []string{"validation", ""} {
		_, err := Open(fixture("dict"), Options{Split: split})
		if err == nil || !strings.Contains(err.Error(), "splits: train, test") || !strings.Contains(err.Error(), "dict") {
			t.Errorf("split %q: err %v, want one listing the splits", split, err)
		}
		if !errors.Is(err, ErrSplit) {
			t.Errorf("split %q: err %v is not ErrSplit", split, err)
		}
	}
}

// TestCSVDialect: pandas' reading of quoting, CRLF, blank lines, a BOM, empty cells, and .tsv.
func TestCSVDialect(t *testing.T) {
	in := "\ufefftext,input_ids\r\n\"a, \"\"b\"\"\nc\",\"[1, 2]\"\r\n\r\n,[]\r\nplain,\r\n"
	tb, err := Open(writeFile(t, "d.csv", in), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tb.columnList() != "text string, input_ids string" {
		t.Fatalf("columns %q", tb.columnList())
	}
	got := readRows(t, tb.Path(), Options{})
	a := "a, \"b\"\nc"
	p := "plain"
	sameRows(t, "d.csv", got, []row{{&a, []int32{1, 2}}, {nil, []int32{}}, {&p, nil}})

	tsv := writeFile(t, "d.tsv", "text\tn\nx,y\t[3]\n")
	if got := scanAllStrings(t, tsv, "text"); !slices.Equal(got, []string{"x,y"}) {
		t.Errorf("tsv: %q", got)
	}
	ragged := writeFile(t, "r.csv", "text,input_ids\na,[1]\nb\n")
	if err := scanErr(t, ragged, "text"); err == nil || !strings.Contains(err.Error(), "r.csv") || !strings.Contains(err.Error(), "line 3") {
		t.Errorf("ragged CSV: %v", err)
	}
}

// TestJSONForms: JSON lines in a .json file, blank lines, a missing key, and a top-level array
// with trailing data.
func TestJSONForms(t *testing.T) {
	p := writeFile(t, "lines.json", "{\"text\": \"a\", \"input_ids\": [1]}\n\n{\"input_ids\": []}\r\n{\"text\": \"\\u00e9\\n\", \"input_ids\": null, \"extra\": 1}")
	a, e := "a", "é\n"
	sameRows(t, "lines.json", readRows(t, p, Options{}), []row{{&a, []int32{1}}, {nil, []int32{}}, {&e, nil}})

	bad := writeFile(t, "bad.json", `[{"text": "a"}] x`)
	if err := scanErr(t, bad, "text"); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("trailing data: %v", err)
	}
	notObj := writeFile(t, "n.json", `[{"text": "a"}, 3]`)
	if err := scanErr(t, notObj, "text"); err == nil || !strings.Contains(err.Error(), "row 1") {
		t.Errorf("array element not an object: %v", err)
	}
	num := writeFile(t, "num.jsonl", "{\"text\": \"a\"}\n{\"text\": 5}\n")
	if err := scanErr(t, num, "text"); err == nil || !strings.Contains(err.Error(), "row 1 (line 2)") || !errors.Is(err, ErrType) {
		t.Errorf("number in a string column: %v", err)
	}
	if _, err := Open(writeFile(t, "s.json", `"just a string"`), Options{}); err == nil {
		t.Error("a JSON string opened as a table")
	}
}

func scanErr(t testing.TB, path, col string) error {
	tb, err := Open(path, Options{})
	if err != nil {
		return err
	}
	return tb.ScanStrings(context.Background(), col, func(int64, string, bool) error { return nil })
}
