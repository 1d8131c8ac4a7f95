package table

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sync/errgroup"
)

// wantErr fails unless err wraps target and its message holds every one of parts.
func wantErr(t *testing.T, label string, err, target error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %v", label, target)
		return
	}
	if target != nil && !errors.Is(err, target) {
		t.Errorf("%s: %v is not %v", label, err, target)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %q does not say %q", label, err, p)
		}
	}
}

func noop3(int64, string, bool) error { return nil }
func noop2(int64, [][]int32) error    { return nil }
func open(t *testing.T, path string) *Table {
	t.Helper()
	tb, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestMissingColumn(t *testing.T) {
	ctx := context.Background()
	for _, f := range []string{"corpus.parquet", "corpus.arrow", "save_to_disk", "corpus.csv", "corpus.jsonl", "corpus.txt"} {
		tb := open(t, fixture(f))
		err := tb.ScanStrings(ctx, "content", noop3)
		wantErr(t, f, err, ErrNoColumn, f, `"content"`, "columns: text string")
		err = tb.ScanIntLists(ctx, []string{"attention_mask"}, nil, noop2)
		wantErr(t, f+" int lists", err, ErrNoColumn, f, `"attention_mask"`)
	}
	// Optional columns the file lacks read as nil; present ones are read.
	for _, f := range []string{"corpus.parquet", "corpus.arrow", "corpus.csv", "corpus.jsonl"} {
		tb := open(t, fixture(f))
		rows := 0
		err := tb.ScanIntLists(context.Background(), []string{"input_ids", "attention_mask", "labels"}, []string{"attention_mask", "labels"},
			func(_ int64, lists [][]int32) error {
				if len(lists) != 3 || lists[0] == nil || lists[1] != nil || lists[2] != nil {
					return fmt.Errorf("lists %v", lists)
				}
				rows++
				return nil
			})
		if err != nil || rows != 150 {
			t.Errorf("%s optional: %d rows, %v", f, rows, err)
		}
		err = tb.ScanIntLists(ctx, []string{"labels"}, []string{"labels"}, noop2)
		wantErr(t, f+" only absent optional", err, ErrNoColumn, "labels")
	}
}

func TestWrongType(t *testing.T) {
	ctx := context.Background()
	wantErr(t, "parquet list as string", open(t, fixture("corpus.parquet")).ScanStrings(ctx, "input_ids", noop3), ErrType, "corpus.parquet", "list<int32>")
	wantErr(t, "arrow string as list", open(t, fixture("corpus.file.arrow")).ScanIntLists(ctx, []string{"text"}, nil, noop2), ErrType, "corpus.file.arrow", "is string")
	wantErr(t, "int64 as string", open(t, fixture("wide.parquet")).ScanStrings(ctx, "label", noop3), ErrType, "wide.parquet", "int64")
	wantErr(t, "int64 as list", open(t, fixture("wide.parquet")).ScanIntLists(ctx, []string{"label"}, nil, noop2), ErrType, "int64")
	wantErr(t, "jsonl list as string", open(t, fixture("corpus.jsonl")).ScanStrings(ctx, "input_ids", noop3), ErrType, "list<int64>")
	wantErr(t, "text as list", open(t, fixture("corpus.txt")).ScanIntLists(ctx, []string{"text"}, nil, noop2), ErrType, "corpus.txt")
	// CSV cells are all strings: a text cell read as a list fails at the cell, naming it.
	wantErr(t, "csv text as list", open(t, fixture("corpus.csv")).ScanIntLists(ctx, []string{"text"}, nil, noop2), nil, "corpus.csv", "row 0", `"text"`, "not a JSON array of integers")
}

func TestIntRange(t *testing.T) {
	ctx := context.Background()
	corpus := loadExpected(t, "corpus.expected.json")
	// wide.parquet's input_ids are list<int64> within int32: they read as the corpus's.
	tb := open(t, fixture("wide.parquet"))
	n := 0
	err := tb.ScanIntLists(ctx, []string{"input_ids"}, nil, func(r int64, l [][]int32) error {
		if fmt.Sprint(l[0]) != fmt.Sprint(corpus[r].IDs) {
			return fmt.Errorf("row %d: %v, want %v", r, l[0], corpus[r].IDs)
		}
		n++
		return nil
	})
	if err != nil || n != 20 {
		t.Fatalf("wide input_ids: %d rows, %v", n, err)
	}
	// Its labels hold 3000000000 in row 7.
	err = tb.ScanIntLists(ctx, []string{"input_ids", "labels"}, nil, noop2)
	wantErr(t, "parquet int64", err, ErrRange, "wide.parquet", "row 7", `"labels"`, "3000000000")

	cases := map[string]string{
		"big.jsonl": "{\"input_ids\": [1, 2]}\n{\"input_ids\": [2147483648]}\n",
		"neg.jsonl": "{\"input_ids\": [1, 2]}\n{\"input_ids\": [-2147483649]}\n",
		"big.csv":   "input_ids\n[1]\n\"[1, 99999999999999999999999]\"\n",
	}
	for name, content := range cases {
		err := open(t, writeFile(t, name, content)).ScanIntLists(ctx, []string{"input_ids"}, nil, noop2)
		wantErr(t, name, err, ErrRange, name, "row 1", `"input_ids"`)
	}
	// The int32 edges themselves are in range (corpus row 3 holds 0 and 2147483647).
	p := writeFile(t, "edge.jsonl", "{\"input_ids\": [-2147483648, 2147483647, 0]}\n")
	err = open(t, p).ScanIntLists(ctx, []string{"input_ids"}, nil, func(_ int64, l [][]int32) error {
		if fmt.Sprint(l[0]) != "[-2147483648 2147483647 0]" {
			return fmt.Errorf("edges read as %v", l[0])
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// TestCellLimits: a cell beyond MaxCellBytes and a record beyond MaxRecordBytes are errors naming
// file, row and column, in every format.
func TestCellLimits(t *testing.T) {
	ctx := context.Background()
	corpus := loadExpected(t, "corpus.expected.json")
	longest, at := 0, 0
	for i, r := range corpus {
		if len(*r.Text) > longest {
			longest, at = len(*r.Text), i
		}
	}
	opts := Options{MaxCellBytes: longest - 1}
	for _, f := range []string{"corpus.parquet", "corpus.arrow", "corpus.csv", "corpus.jsonl", "corpus-array.json"} {
		tb, err := Open(fixture(f), opts)
		if err != nil {
			t.Fatal(err)
		}
		err = tb.ScanStrings(ctx, "text", noop3)
		wantErr(t, f, err, ErrTooLarge, f, fmt.Sprintf("row %d", at), `"text"`)
	}
	// Lists: 4 bytes a value.
	tb, err := Open(fixture("corpus.parquet"), Options{MaxCellBytes: 4 * 10})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "list cell", tb.ScanIntLists(ctx, []string{"input_ids"}, nil, noop2), ErrTooLarge, "corpus.parquet", `"input_ids"`)

	// Records: a JSON line or array object, a CSV record, a text line, refused while read.
	big := strings.Repeat("x", 3*windowSlack)
	for name, content := range map[string]string{
		"r.jsonl": `{"text": "a"}` + "\n" + `{"text": "` + big + `"}` + "\n",
		"r.json":  `[{"text": "a"}, {"text": "` + big + `"}]`,
		"r.csv":   "text\na\n\"" + big + "\"\n",
	} {
		tb, err := Open(writeFile(t, name, content), Options{MaxCellBytes: 100, MaxRecordBytes: 1000})
		if err != nil {
			t.Fatal(err)
		}
		wantErr(t, name, tb.ScanStrings(ctx, "text", noop3), ErrTooLarge, name, "MaxRecordBytes")
	}
	tb, err = Open(writeFile(t, "r.txt", "a\n"+big+"\n"), Options{MaxCellBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	wantErr(t, "text line", tb.ScanStrings(ctx, "text", noop3), ErrTooLarge, "r.txt", "line 2")
}

func TestOptions(t *testing.T) {
	if err := DefaultOptions().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{{Format: "xlsx"}, {MaxCellBytes: -1}, {MaxRecordBytes: -1}} {
		err := o.Validate()
		if err == nil {
			t.Errorf("%+v validated", o)
			continue
		}
		if _, err2 := Open(fixture("corpus.csv"), o); err2 == nil {
			t.Errorf("%+v opened", o)
		}
	}
	wantErr(t, "bad Format", Options{Format: "xlsx"}.Validate(), nil, "Options.Format")
	wantErr(t, "bad MaxCellBytes", Options{MaxCellBytes: -1}.Validate(), nil, "Options.MaxCellBytes")
	_, err := Open(writeFile(t, "data.xlsx", "x"), Options{})
	wantErr(t, "unknown extension", err, nil, "data.xlsx", "Options.Format")
	// An explicit format overrides the extension.
	tb, err := Open(writeFile(t, "data.dat", "text\nhello\n"), Options{Format: FormatCSV})
	if err != nil || tb.Format() != FormatCSV {
		t.Fatalf("explicit csv: %v", err)
	}
	_, err = Open(fixture("save_to_disk"), Options{Format: FormatCSV})
	wantErr(t, "directory as csv", err, nil, "save_to_disk")
	_, err = Open(fixture("absent.parquet"), Options{})
	wantErr(t, "absent file", err, nil, "absent.parquet")
}

// TestCallbacks: fn's error stops the scan and comes back wrapped; fn's panic is the caller's and
// passes through untouched; a cancelled context stops the scan; Close stops later scans.
func TestCallbacks(t *testing.T) {
	errStop := errors.New("stop here")
	for _, f := range []string{"corpus.parquet", "corpus.arrow", "corpus.csv", "corpus.jsonl", "corpus.txt"} {
		tb := open(t, fixture(f))
		seen := 0
		err := tb.ScanStrings(context.Background(), "text", func(r int64, _ string, _ bool) error {
			seen++
			if r == 5 {
				return errStop
			}
			return nil
		})
		if !errors.Is(err, errStop) || seen != 6 || !strings.Contains(err.Error(), f) {
			t.Errorf("%s: after %d rows err %v, want errStop at row 5", f, seen, err)
		}
		func() {
			defer func() {
				if r := recover(); r != "callback panic" {
					t.Errorf("%s: recovered %v, want the callback's own panic", f, r)
				}
			}()
			_ = tb.ScanStrings(context.Background(), "text", func(int64, string, bool) error { panic("callback panic") })
		}()
		ctx, cancel := context.WithCancel(context.Background())
		err = tb.ScanStrings(ctx, "text", func(r int64, _ string, _ bool) error {
			cancel()
			return nil
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s: cancelled scan: %v", f, err)
		}
		tb.Close()
		wantErr(t, f+" after Close", tb.ScanStrings(context.Background(), "text", noop3), nil, f, "Close")
	}
}

// TestConcurrentScans: scans of one Table may run at once (each has its own handles); run under
// -race in CI.
func TestConcurrentScans(t *testing.T) {
	for _, f := range []string{"corpus-zstd.parquet", "save_to_disk", "corpus.jsonl"} {
		tb := open(t, fixture(f))
		var g errgroup.Group
		var mu sync.Mutex
		totals := map[int]int{}
		for i := range 4 {
			g.Go(func() error {
				n := 0
				err := tb.ScanIntLists(context.Background(), []string{"input_ids"}, nil, func(_ int64, l [][]int32) error {
					n += len(l[0])
					return nil
				})
				mu.Lock()
				totals[i] = n
				mu.Unlock()
				return err
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		if totals[0] == 0 || totals[0] != totals[1] || totals[1] != totals[2] || totals[2] != totals[3] {
			t.Errorf("%s: concurrent scans counted %v ids", f, totals)
		}
	}
}
