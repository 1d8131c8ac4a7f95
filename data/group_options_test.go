package data

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestGroupTextsSpecialTokens: GroupOptions{} adds the tokenizer's special tokens, as HF's
// tokenizer call (add_special_tokens=True) in run_clm's tokenize_function does; NoSpecialTokens
// leaves them out. Reference ids are bert-base-uncased's vocabulary: [CLS] 101, [SEP] 102,
// "hello" 7592, "world" 2088 (BertTokenizerFast("hello world") is [101, 7592, 2088, 102]).
func TestGroupTextsSpecialTokens(t *testing.T) {
	tok := loadTokenizer(t, "bert-base-uncased")
	path := filepath.Join(t.TempDir(), "corpus.txt")
	if err := os.WriteFile(path, []byte("hello world\nhello world\nhello world\nhello world\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		opts GroupOptions
		want [][]int32
	}{
		{"default (HF's add_special_tokens=True)", GroupOptions{}, [][]int32{
			{101, 7592, 2088, 102}, {101, 7592, 2088, 102}, {101, 7592, 2088, 102}, {101, 7592, 2088, 102}}},
		{"NoSpecialTokens", GroupOptions{NoSpecialTokens: true}, [][]int32{
			{7592, 2088, 7592, 2088}, {7592, 2088, 7592, 2088}}},
	} {
		blocks, err := GroupTexts(context.Background(), tok, TextLines(path), 4, c.opts)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got [][]int32
		for i := range blocks.Len() {
			ex, err := blocks.Get(i)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, ex.InputIDs)
		}
		if !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("%s: blocks %v, want %v", c.name, got, c.want)
		}
		t.Logf("%s: %d blocks, first %v", c.name, len(got), got[0])
		if err := blocks.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
