package data

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ids is a JSON array of n small ids.
func ids(n int) string {
	var sb strings.Builder
	sb.WriteByte('[')
	for i := range n {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprint(&sb, i%50)
	}
	sb.WriteByte(']')
	return sb.String()
}

// TestJSONLMaxSeqLength: lines whose sequence columns hold more values than the model takes are
// refused while the file is indexed, naming the file, line and field; everything the limit
// does not concern (other keys, strings, scalar labels) is left alone.
func TestJSONLMaxSeqLength(t *testing.T) {
	ok := func(line string) {
		t.Helper()
		p := writeFile(t, "ok.jsonl", `{"input_ids": [1, 2]}`+"\n"+line+"\n")
		ds, err := OpenJSONLWith(p, JSONLOptions{MaxSeqLength: 8})
		if err != nil {
			t.Errorf("%s: %v", line, err)
			return
		}
		ds.Close()
	}
	refused := func(line, field string) {
		t.Helper()
		p := writeFile(t, "long.jsonl", "\n"+`{"input_ids": [1, 2]}`+"\n\n"+line+"\n")
		_, err := OpenJSONLWith(p, JSONLOptions{MaxSeqLength: 8})
		if !errors.Is(err, ErrSequenceTooLong) || !strings.Contains(err.Error(), p+":4:") ||
			!strings.Contains(err.Error(), `field "`+field+`": more than 8 values`) {
			t.Errorf("%s: %v", line, err)
		}
	}
	ok(`{"input_ids": ` + ids(8) + `, "labels": ` + ids(8) + `}`)
	ok(`{"input_ids": ` + ids(3) + `, "other": ` + ids(100) + `, "text": "[1,2,3,4,5,6,7,8,9,10]", "label": 3}`)
	ok(`{"input_ids": [], "meta": {"input_ids": ` + ids(20) + `}}`) // only top-level keys are columns
	ok(`{"input_ids": [[1,2,3,4,5,6,7,8,9], 2]}`)                   // malformed for ParseExample, but 2 values
	refused(`{"input_ids": `+ids(9)+`}`, "input_ids")
	refused(`{"input_ids": [1], "attention_mask": `+ids(9)+`}`, "attention_mask")
	refused(`{"text": "x", "labels": `+ids(9)+`}`, "labels")
	refused(`{"INPUT_IDS": `+ids(9)+`}`, "input_ids")           // encoding/json matches keys case-insensitively
	refused(`{"input\u005fids": `+ids(9)+`}`, "input_ids")      // and decodes escapes
	refused(`{"a\"b": 1, "input_ids":`+ids(9)+`}`, "input_ids") // an escaped quote does not end a key
	refused(`{"input_ids": ["1","2","3","4","5","6","7","8","9"]}`, "input_ids")
	if _, err := OpenJSONLWith("x", JSONLOptions{MaxSeqLength: -1}); err == nil {
		t.Error("a negative MaxSeqLength was accepted")
	}
}

// TestJSONLCountsAcrossChunks: a line longer than the reader's 1 MiB buffer is counted chunk by
// chunk: refused past the limit, and read back exactly when within it.
func TestJSONLCountsAcrossChunks(t *testing.T) {
	const n = 600_000 // "i%50, " is about 4 bytes: a 2.3 MB line
	line := `{"input_ids": ` + ids(n) + "}"
	p := writeFile(t, "big.jsonl", line+"\r\n"+`{"input_ids": [7]}`+"\n")
	if _, err := OpenJSONLWith(p, JSONLOptions{MaxSeqLength: n - 1}); !errors.Is(err, ErrSequenceTooLong) ||
		!strings.Contains(err.Error(), ":1:") {
		t.Fatalf("limit %d: %v", n-1, err)
	}
	ds, err := OpenJSONLWith(p, JSONLOptions{MaxSeqLength: n})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	ex, err := ds.Get(0)
	if err != nil || len(ex.InputIDs) != n || ex.InputIDs[n-1] != int32((n-1)%50) {
		t.Fatalf("Get(0): %d ids, %v", len(ex.InputIDs), err)
	}
	raw, _, err := ds.idx.Line(0)
	if err != nil || string(raw) != line {
		t.Errorf("the long line read back differs (%d bytes, want %d): %v", len(raw), len(line), err)
	}
	if ex, err := ds.Get(1); err != nil || !slices.Equal(ex.InputIDs, []int32{7}) {
		t.Errorf("Get(1) = %v, %v", ex.InputIDs, err)
	}
}

// TestIndexLinesBlankAndEnds: the streaming index keeps IndexLines' rules: blank lines (Unicode
// white space too) are skipped, line ends (\n, \r\n) are not part of a line, line numbers count
// every line.
func TestIndexLinesBlankAndEnds(t *testing.T) {
	long := strings.Repeat("x", 3<<20)
	p := writeFile(t, "lines.txt", "a\r\n\n  \t\n\u00a0\u2003\nb\n"+long+"\r\r\n\nlast")
	idx, err := IndexLines(p)
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	want := []struct {
		text string
		no   int
	}{{"a", 1}, {"b", 5}, {long, 6}, {"last", 8}}
	if idx.Len() != len(want) {
		t.Fatalf("%d lines, want %d", idx.Len(), len(want))
	}
	for i, w := range want {
		got, no, err := idx.Line(i)
		if err != nil || string(got) != w.text || no != w.no {
			t.Errorf("line %d: %q (%d bytes) at %d, %v; want %d bytes at %d", i, clipText(string(got)), len(got), no, err, len(w.text), w.no)
		}
	}
}

func clipText(s string) string {
	if len(s) > 20 {
		return s[:20] + "…"
	}
	return s
}

// TestFirstRecordKeys: the first record's keys, read without holding the record.
func TestFirstRecordKeys(t *testing.T) {
	p := writeFile(t, "k.jsonl", "\n\n"+`{"text": "a,b:c", "input_ids": `+ids(400_000)+`, "lab\u0065ls": 1}`+"\n"+`{"x": 1}`)
	keys, err := FirstRecordKeys(p)
	if err != nil || !slices.Equal(keys, []string{"text", "input_ids", "labels"}) {
		t.Errorf("FirstRecordKeys = %q, %v", keys, err)
	}
	if _, err := FirstRecordKeys(writeFile(t, "empty.jsonl", "\n \n")); err == nil {
		t.Error("a file without records has keys")
	}
}

// TestReadLineLimit: JSON-lines text columns and whole-file documents are capped, refused before
// more than the limit is held.
func TestReadLineLimit(t *testing.T) {
	r := bufio.NewReaderSize(strings.NewReader(strings.Repeat("y", 100)+"\nok\n"), 16)
	if _, err := readLine(r, 64); !errors.Is(err, errLineTooLong) {
		t.Errorf("a 100-byte line under a 64-byte limit: %v", err)
	}
	r = bufio.NewReaderSize(strings.NewReader("short\nnext"), 16)
	if line, err := readLine(r, 64); err != nil || string(line) != "short\n" {
		t.Errorf("readLine = %q, %v", line, err)
	}
	p := writeFile(t, "doc.txt", strings.Repeat("z", 100))
	if _, err := readFileLimit(p, 99); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("a 100-byte document under a 99-byte limit: %v", err)
	}
	if b, err := readFileLimit(p, 100); err != nil || len(b) != 100 {
		t.Errorf("readFileLimit = %d bytes, %v", len(b), err)
	}
}
