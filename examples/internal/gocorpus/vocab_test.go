package gocorpus

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data/tokenizer"
)

// TestVocabMap: the specials first, then the training ids by frequency (ties by id), then the
// "other" id for the rest; Apply, OtherRate and Size agree with that; a nil map is the identity.
func TestVocabMap(t *testing.T) {
	specials := []uint32{0, 1, 2}
	train := []uint32{1, 50, 7, 7, 9, 9, 9, 50, 8, 7, 1, 1, 1}
	m, err := NewVocabMap(train, specials, 6)
	if err != nil {
		t.Fatal(err)
	}
	// 7 and 9 three times each (7 first: the smaller id), 50 twice, 8 once: room for two.
	if !slices.Equal(m.Mistral, []uint32{0, 1, 2, 7, 9}) || m.Other != 5 || m.Size() != 6 {
		t.Fatalf("map %v, other %d, size %d; want [0 1 2 7 9], 5, 6", m.Mistral, m.Other, m.Size())
	}
	if got := m.Apply([]uint32{2, 9, 50, 7, 0, 31999}); !slices.Equal(got, []int32{2, 4, 5, 3, 0, 5}) {
		t.Errorf("Apply = %v, want [2 4 5 3 0 5]", got)
	}
	if r := m.OtherRate([]uint32{7, 50, 8, 1}); r != 0.5 {
		t.Errorf("OtherRate = %v, want 0.5", r)
	}
	small, err := NewVocabMap([]uint32{5}, specials, 100)
	if err != nil || small.Size() != 5 {
		t.Errorf("a map of 100 over one distinct id: size %d (%v), want 5 (specials, the id, other)", small.Size(), err)
	}
	if _, err := NewVocabMap(train, specials, 4); err == nil || !strings.Contains(err.Error(), "-vocab") {
		t.Errorf("no room beside the specials: error %v, want one naming -vocab", err)
	}

	var none *VocabMap
	if got := none.Apply([]uint32{0, 31999}); !slices.Equal(got, []int32{0, 31999}) || none.OtherRate(train) != 0 {
		t.Errorf("nil map: Apply %v, OtherRate %v; want the identity and 0", got, none.OtherRate(train))
	}
	if !none.Equal(nil) || none.Equal(m) || m.Equal(nil) || !m.Equal(m) || m.Equal(small) {
		t.Error("Equal: want nil = nil, a map equal to itself only")
	}

	tok, err := tokenizer.FromFile(testTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	if s := SpecialIDs(tok); !slices.Equal(s, []uint32{0, 1, 2}) {
		t.Errorf("SpecialIDs = %v, want Mistral's <unk> <s> </s> (0 1 2)", s)
	}
	if n := none.ModelVocabSize(tok); n != 32000 || m.ModelVocabSize(tok) != 6 {
		t.Errorf("ModelVocabSize: %d without a map, %d with one; want 32000 and 6", n, m.ModelVocabSize(tok))
	}
}

// TestVocabMapFile: Save and LoadVocabMap round-trip through the JSON keys the examples document; a
// missing file is no map; a corrupt one is an error naming it.
func TestVocabMapFile(t *testing.T) {
	m, err := NewVocabMap([]uint32{9, 9, 4}, []uint32{0, 1, 2}, 10)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, VocabFile)
	if err := m.Save(path); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if want := `{"mistral_ids_by_compact_id":[0,1,2,9,4],"other_id":5}`; string(b) != want {
		t.Errorf("%s = %s, want %s", VocabFile, b, want)
	}
	got, err := LoadVocabMap(path)
	if err != nil || !got.Equal(m) || !slices.Equal(got.Apply([]uint32{4, 7}), []int32{4, 5}) {
		t.Errorf("reloaded map %+v (%v), want %+v mapping alike", got, err, m)
	}
	if got, err := LoadVocabMap(filepath.Join(dir, "missing.json")); got != nil || err != nil {
		t.Errorf("missing file: %v, %v; want nil, nil", got, err)
	}
	for name, body := range map[string]string{
		"dup.json":   `{"mistral_ids_by_compact_id":[0,1,1],"other_id":3}`,
		"other.json": `{"mistral_ids_by_compact_id":[0,1,2],"other_id":7}`,
		"bad.json":   `{"mistral_ids_by_compact_id":`,
	} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadVocabMap(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %v, want one naming the file", name, err)
		}
	}
}
