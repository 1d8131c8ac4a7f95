package data

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

func collectDocs(t *testing.T, docs Documents) ([]string, error) {
	t.Helper()
	var out []string
	for d, err := range docs {
		if err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

// TestTextLinesFrom: a reader's lines are the documents TextLines reads from a file of the same
// text (empty lines kept, a last line without a newline included), and a read error is an
// error naming the source.
func TestTextLinesFrom(t *testing.T) {
	for _, text := range []string{"a\n\nb c\n", "one\ntwo", "", "\n\n", "crlf\r\nline\r\n"} {
		path := filepath.Join(t.TempDir(), "t.txt")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		want, err := collectDocs(t, TextLines(path))
		if err != nil {
			t.Fatal(err)
		}
		got, err := collectDocs(t, TextLinesFrom(strings.NewReader(text), "embedded"))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%q: got %q, %v; TextLines gives %q", text, got, err, want)
		}
	}
	broken := io.MultiReader(strings.NewReader("first\n"), iotest.ErrReader(errors.New("connection reset")))
	got, err := collectDocs(t, TextLinesFrom(broken, "stdin"))
	if !slices.Equal(got, []string{"first"}) || err == nil || !strings.Contains(err.Error(), "stdin: connection reset") {
		t.Errorf("a failing reader: %q, %v; want the first line, then an error naming stdin", got, err)
	}
}
