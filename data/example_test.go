package data

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseExample(t *testing.T) {
	ex, err := ParseExample([]byte(`{"input_ids": [1, 2, 3], "attention_mask": [1, 1, 0], "labels": [1, 2, -100], "text": "ignored"}`))
	if err != nil || len(ex.InputIDs) != 3 || ex.AttentionMask[2] != 0 || ex.Labels[2] != IgnoreIndex || ex.HasLabel {
		t.Fatalf("%+v, %v", ex, err)
	}
	ex, err = ParseExample([]byte(`{"input_ids": [101, 7, 102], "token_type_ids": [0, 0, 0], "label": 2}`))
	if err != nil || !ex.HasLabel || ex.Label != 2 || ex.Labels != nil {
		t.Fatalf("%+v, %v", ex, err)
	}
	for _, tc := range []struct{ line, want string }{
		{`{}`, "input_ids"},
		{`{"input_ids": []}`, "input_ids"},
		{`{"input_ids": [1, "x"]}`, "input_ids"},
		{`{"input_ids": [1, 2], "attention_mask": [1]}`, "attention_mask"},
		{`{"input_ids": [1, 2], "attention_mask": [1, 2]}`, "attention_mask[1]"},
		{`{"input_ids": [1, 2], "token_type_ids": [0]}`, "token_type_ids"},
		{`{"input_ids": [1, 2], "labels": [1]}`, "labels"},
		{`{"input_ids": [1, 2], "labels": "pos"}`, "labels"},
		{`{"input_ids": [99999999999]}`, "out of range"},
		{`{"input_ids": [1]} {"x": 1}`, "trailing"},
		{`[1, 2]`, "JSON object"},
	} {
		if _, err := ParseExample([]byte(tc.line)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want mention of %q", tc.line, err, tc.want)
		}
	}
}

func TestJSONLDatasetErrorsNameFileAndLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "train.jsonl")
	content := "{\"input_ids\": [1, 2]}\n\n{\"input_ids\": [3]}\r\n{\"input_ids\": \"bad\"}\n"
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	ds, err := OpenJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	if ds.Len() != 3 {
		t.Fatalf("Len = %d, want 3 (blank line skipped)", ds.Len())
	}
	if ex, err := ds.Get(1); err != nil || ex.InputIDs[0] != 3 {
		t.Fatalf("Get(1) = %+v, %v", ex, err)
	}
	err = ds.Validate()
	if err == nil || !strings.Contains(err.Error(), "train.jsonl:4") || !strings.Contains(err.Error(), "input_ids") {
		t.Fatalf("Validate = %v; want file:line and field", err)
	}
	if _, err := OpenJSONL(filepath.Join(t.TempDir(), "missing.jsonl")); err == nil {
		t.Error("missing file opened")
	}
}

func FuzzParseExample(f *testing.F) {
	for _, s := range []string{
		`{"input_ids": [1, 2, 3], "attention_mask": [1, 1, 0], "labels": [1, 2, -100]}`,
		`{"input_ids": [101, 102], "token_type_ids": [0, 1], "label": 1}`,
		`{"input_ids": [1], "labels": 3}`, `{}`, `null`, `[`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		ex, err := ParseExample(line)
		if err != nil {
			return
		}
		n := len(ex.InputIDs)
		if n == 0 || (ex.AttentionMask != nil && len(ex.AttentionMask) != n) ||
			(ex.TokenTypeIDs != nil && len(ex.TokenTypeIDs) != n) || (ex.Labels != nil && len(ex.Labels) != n) {
			t.Fatalf("inconsistent example from %q: %+v", line, ex)
		}
		// A parsed example always collates.
		if _, err := (CausalLMCollator{BlockSize: n}).Collate([]Example{ex}); err != nil {
			t.Fatal(err)
		}
	})
}
