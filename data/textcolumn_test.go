package data

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data/table"
)

// TestPickTextColumn: run_clm's `text_column_name = "text" if "text" in column_names else
// column_names[0]`, with --text_column_name over it, and the refusals naming the columns.
func TestPickTextColumn(t *testing.T) {
	s := func(n string) table.Column { return table.Column{Name: n, Type: "string"} }
	i64 := func(n string) table.Column { return table.Column{Name: n, Type: "int64"} }
	for _, tc := range []struct {
		cols     []table.Column
		named    string
		want     string
		fallback bool
		err      string // substring of the error; "" for none
	}{
		{[]table.Column{i64("id"), s("text")}, "", "text", false, ""},
		{[]table.Column{s("body"), i64("id")}, "", "body", true, ""},
		{[]table.Column{i64("id"), s("body")}, "", "", false, `column "id" holds numbers, not text; columns: id, body; name one with --text_column_name`},
		{[]table.Column{i64("id"), s("body")}, "body", "body", false, ""},
		{[]table.Column{s("text"), s("body")}, "body", "body", false, ""},
		{[]table.Column{i64("id"), s("body")}, "nope", "", false, `--text_column_name "nope" is not a column; columns: id, body`},
		{[]table.Column{{Name: "ids", Type: "list<int64>"}, s("b")}, "", "", false, `column "ids" holds lists (list<int64>)`},
		{[]table.Column{{Name: "ok", Type: "bool"}}, "", "", false, `column "ok" holds booleans`},
		{[]table.Column{{Name: "x", Type: "null"}}, "", "x", true, ""},
		{nil, "", "", false, "no columns"},
	} {
		got, fb, err := pickTextColumn(tc.cols, tc.named)
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrTextColumn)):
			t.Errorf("%v named %q: %v; want an ErrTextColumn saying %s", tc.cols, tc.named, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want || fb != tc.fallback):
			t.Errorf("%v named %q = %q, %v, %v; want %q, %v", tc.cols, tc.named, got, fb, err, tc.want, tc.fallback)
		}
	}
}

// TestTextColumnCSV: CSV cells have no type; a first column pandas reads as numbers (ids, floats,
// blanks among them) is refused like a typed one, one holding any text is taken, with the info
// line naming it.
func TestTextColumnCSV(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		csv, want, err string
	}{
		{"id,body\n1,hello\n2,world\n", "", `column "id" holds numbers, not text (as pandas.read_csv reads it); columns: id, body`},
		{"score,body\n1.5,a\n,b\n-2e3,c\n", "", `column "score" holds numbers`},
		{"code,body\n12,a\nA7,b\n", "code", ""},
		{"body,id\nhello,1\n", "body", ""},
		{"text,id\n1,1\n", "", `column "text" holds numbers`},
	} {
		p := filepath.Join(dir, "t.csv")
		if err := os.WriteFile(p, []byte(tc.csv), 0o644); err != nil {
			t.Fatal(err)
		}
		tb, err := table.Open(p, table.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		got, err := TextColumn(context.Background(), slog.New(slog.NewTextHandler(&logs, nil)), "test", tb, "")
		tb.Close()
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: %v; want an error saying %s", tc.csv, err, tc.err)
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%q = %q, %v; want %q", tc.csv, got, err, tc.want)
		case tc.err == "" && !strings.Contains(logs.String(), `using column \"`+tc.want+`\" for text`):
			t.Errorf("%q: no info line naming %q:\n%s", tc.csv, tc.want, logs.String())
		case tc.err != "" && logs.Len() != 0:
			t.Errorf("%q: a refused column was logged as used:\n%s", tc.csv, logs.String())
		}
	}
}
