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

// groupTextsReference is run_clm's group_texts written plainly: per group of 1000 documents,
// the concatenation of each one's ids, cut to a multiple of block.
func groupTextsReference(t *testing.T, tok tokenizer.Tokenizer, docs []string, block int) []int32 {
	t.Helper()
	var want []int32
	for g := 0; g < len(docs); g += 1000 {
		var concat []int32
		for _, d := range docs[g:min(g+1000, len(docs))] {
			e, err := tok.Encode(d, true)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range e.IDs {
				concat = append(concat, int32(id))
			}
		}
		want = append(want, concat[:len(concat)/block*block]...)
	}
	return want
}

// TestGroupTexts: blocks are the concatenated token streams cut to a multiple of block_size per
// group of 1000 documents, as run_clm's group_texts. The long corpora give the tokenizer a group
// in several chunks (groupTextsChunkBytes), one of them a single document longer than a chunk:
// blocks that straddle chunks are kept, only each group's last partial block is dropped.
func TestGroupTexts(t *testing.T) {
	tok := loadTokenizer(t, "gpt2")
	const block = 64
	corpora := map[string][]string{}
	for i := range 2500 { // three groups: 1000, 1000, 500 documents
		corpora["short"] = append(corpora["short"], strings.Repeat("package main func f() int { return 42 } ", 1+i%3))
		corpora["long"] = append(corpora["long"], strings.Repeat("package main func f() int { return 42 } ", 7+i%11))
	}
	corpora["one long document"] = slices.Clone(corpora["short"][:1500])
	corpora["one long document"][700] = strings.Repeat("x = y + 1; ", groupTextsChunkBytes/7)
	for name, lines := range corpora {
		path := filepath.Join(t.TempDir(), "corpus.txt")
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		blocks, err := GroupTexts(context.Background(), tok, TextLines(path), block, GroupOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := groupTextsReference(t, tok, lines, block)
		if blocks.Tokens() != len(want) || blocks.Len() != len(want)/block {
			t.Fatalf("%s: %d tokens in %d blocks, want %d", name, blocks.Tokens(), blocks.Len(), len(want))
		}
		for i := range blocks.Len() {
			ex, _ := blocks.Get(i)
			if !slices.Equal(ex.InputIDs, want[i*block:(i+1)*block]) {
				t.Fatalf("%s: block %d differs", name, i)
			}
		}
		if _, err := GroupTexts(context.Background(), tok, TextLines(path), 1<<30, GroupOptions{}); err == nil {
			t.Errorf("%s: a block longer than the corpus succeeded", name)
		}
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
