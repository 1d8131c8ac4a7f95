package data

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data/tokenizer"
)

func loadTokenizer(t *testing.T, name string) *tokenizer.Pipeline {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", "tokenizers", name, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestGroupTexts: blocks are the concatenated token streams cut to a multiple of block_size per
// group of 1000 documents, as run_clm's group_texts.
func TestGroupTexts(t *testing.T) {
	tok := loadTokenizer(t, "gpt2")
	path := filepath.Join(t.TempDir(), "corpus.txt")
	var lines []string
	for i := range 2500 { // three groups: 1000, 1000, 500 documents
		lines = append(lines, strings.Repeat("package main func f() int { return 42 } ", 1+i%3))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const block = 64
	blocks, err := GroupTexts(context.Background(), tok, TextLines(path), block, true)
	if err != nil {
		t.Fatal(err)
	}
	// Expected: per group, the concatenation of each line's ids, cut to a multiple of 64.
	var want []int32
	for g := 0; g < len(lines); g += 1000 {
		var concat []int32
		for _, l := range lines[g:min(g+1000, len(lines))] {
			e, err := tok.Encode(l, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range e.IDs {
				concat = append(concat, int32(id))
			}
		}
		want = append(want, concat[:len(concat)/block*block]...)
	}
	if blocks.Tokens() != len(want) || blocks.Len() != len(want)/block {
		t.Fatalf("%d tokens in %d blocks, want %d", blocks.Tokens(), blocks.Len(), len(want))
	}
	for i := range blocks.Len() {
		ex, _ := blocks.Get(i)
		if !slices.Equal(ex.InputIDs, want[i*block:(i+1)*block]) {
			t.Fatalf("block %d differs", i)
		}
	}
	if _, err := GroupTexts(context.Background(), tok, TextLines(path), 1<<30, true); err == nil {
		t.Error("a block longer than the corpus succeeded")
	}
}

func TestLabeledJSONL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "train.jsonl")
	content := `{"sentence": "good movie", "label": "pos"}
{"sentence": "bad movie", "label": "neg"}
{"sentence": "fine", "label": "pos"}
`
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := ReadLabeledJSONL(path, "sentence", "", "label")
	if err != nil {
		t.Fatal(err)
	}
	ids, names := Labels(recs)
	if !slices.Equal(names, []string{"neg", "pos"}) || ids["pos"] != 1 {
		t.Fatalf("labels %v %v", ids, names)
	}
	tok := loadTokenizer(t, "bert-base-uncased")
	ds, err := TokenizeLabeled(context.Background(), tok, recs, ids, 16)
	if err != nil {
		t.Fatal(err)
	}
	ex, _ := ds.Get(0)
	cls, _ := tok.TokenToID("[CLS]")
	if ex.InputIDs[0] != int32(cls) || ex.Label != 1 || !ex.HasLabel {
		t.Fatalf("example 0 = %+v", ex)
	}
	if _, err := TokenizeLabeled(context.Background(), tok, recs, ids, 2); err == nil {
		t.Error("over-long encodings were accepted without truncation")
	}
	if _, err := ReadLabeledJSONL(path, "text", "", "label"); err == nil || !strings.Contains(err.Error(), `train.jsonl:1: no field "text"`) {
		t.Errorf("missing field: %v", err)
	}
}
