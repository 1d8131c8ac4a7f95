package table

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// fixtures is testdata/tables: files written by testdata/tables/gen/generate.mjs with npm writers
// (hyparquet-writer, parquet-wasm, apache-arrow, csv-stringify).
const fixtures = "../../testdata/tables"

func fixture(name string) string { return filepath.Join(fixtures, name) }

// row is one row as the tests compare it: nil Text / nil IDs for nulls.
type row struct {
	Text *string
	IDs  []int32 // nil: null; non-nil empty: []
}

// loadExpected reads a generator's JSON.stringify dump of its in-memory rows.
func loadExpected(t testing.TB, name string) []row {
	t.Helper()
	b, err := os.ReadFile(fixture(name))
	if err != nil {
		t.Fatal(err)
	}
	var raw []struct {
		Text     *string          `json:"text"`
		InputIDs *json.RawMessage `json:"input_ids"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw) == 0 {
		t.Fatalf("%s holds no rows", name)
	}
	rows := make([]row, len(raw))
	for i, r := range raw {
		rows[i].Text = r.Text
		if r.InputIDs != nil && string(*r.InputIDs) != "null" {
			ids := []int32{}
			if err := json.Unmarshal(*r.InputIDs, &ids); err != nil {
				t.Fatal(err)
			}
			rows[i].IDs = ids
		}
	}
	return rows
}

// readRows opens path and reads its text and input_ids columns with the two scans.
func readRows(t testing.TB, path string, opts Options) []row {
	t.Helper()
	tb, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer tb.Close()
	var rows []row
	err = tb.ScanStrings(context.Background(), "text", func(r int64, s string, valid bool) error {
		if r != int64(len(rows)) {
			t.Fatalf("%s: row %d after %d rows", path, r, len(rows))
		}
		var p *string
		if valid {
			s := s // keep a copy: s is valid only during the callback
			p = &s
		}
		rows = append(rows, row{Text: p})
		return nil
	})
	if err != nil {
		t.Fatalf("ScanStrings: %v", err)
	}
	n := 0
	err = tb.ScanIntLists(context.Background(), []string{"input_ids"}, nil, func(r int64, lists [][]int32) error {
		if r != int64(n) || n >= len(rows) {
			t.Fatalf("%s: int-list row %d after %d rows (%d text rows)", path, r, n, len(rows))
		}
		if lists[0] != nil {
			rows[n].IDs = slices.Clone(lists[0])
			if rows[n].IDs == nil {
				rows[n].IDs = []int32{}
			}
		}
		n++
		return nil
	})
	if err != nil {
		t.Fatalf("ScanIntLists: %v", err)
	}
	if n != len(rows) {
		t.Fatalf("%s: %d int-list rows, %d text rows", path, n, len(rows))
	}
	return rows
}

// sameRows reports the first difference of got from want.
func sameRows(t testing.TB, label string, got, want []row) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", label, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if (g.Text == nil) != (w.Text == nil) || (g.Text != nil && *g.Text != *w.Text) {
			t.Fatalf("%s: row %d text = %s, want %s", label, i, show(g.Text), show(w.Text))
		}
		if (g.IDs == nil) != (w.IDs == nil) || !slices.Equal(g.IDs, w.IDs) {
			t.Fatalf("%s: row %d input_ids = %v (nil %v), want %v (nil %v)", label, i, g.IDs, g.IDs == nil, w.IDs, w.IDs == nil)
		}
	}
}

func show(s *string) string {
	if s == nil {
		return "null"
	}
	b, _ := json.Marshal(*s)
	return string(b)
}

// writeFile writes a temporary fixture and returns its path.
func writeFile(t testing.TB, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
