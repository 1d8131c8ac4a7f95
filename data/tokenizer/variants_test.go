package tokenizer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The variant vectors: Hugging Face's outputs for tokenizers built from the
// reference ones by recipes (testdata/tokenizers/variants), covering the
// components, options, truncation and padding the published files do not
// use.

type variantRecipe struct {
	Name        string                     `json:"name"`
	Base        *string                    `json:"base"`
	Set         map[string]json.RawMessage `json:"set"`
	ModelFile   string                     `json:"model_file"`
	ModelSet    map[string]json.RawMessage `json:"model_set"`
	ModelDelete []string                   `json:"model_delete"`
}

type variantEncoding struct {
	Error string `json:"error"`
	vecEncoding
	AttentionMask []uint32          `json:"attention_mask"`
	Overflowing   []variantEncoding `json:"overflowing"`
}

type variantRecord struct {
	Variant string `json:"variant"`
	Meta    *struct {
		VocabSize      int               `json:"vocab_size"`
		VocabWithAdded int               `json:"vocab_size_with_added"`
		AddedIDs       map[string]uint32 `json:"added_token_ids"`
	} `json:"meta"`
	Text              string          `json:"text"`
	TextPair          *string         `json:"text_pair"`
	Encode            variantEncoding `json:"encode"`
	EncodeSpecial     variantEncoding `json:"encode_special"`
	Decode            *string         `json:"decode"`
	DecodeSpecial     *string         `json:"decode_special"`
	DecodeSpecialSkip *string         `json:"decode_special_skip"`
	// A batch record: encodeBatch of the texts (padding to the longest).
	Batch          []string          `json:"batch"`
	BatchEncodings []variantEncoding `json:"batch_encodings"`
	BatchError     string            `json:"batch_error"`
}

const variantsDir = tokDir + "/variants"

// buildVariant applies a recipe as gen.mjs does.
func buildVariant(t *testing.T, r variantRecipe) []byte {
	t.Helper()
	doc := map[string]json.RawMessage{}
	if r.Base != nil {
		if err := json.Unmarshal(readMaybeGz(t, filepath.Join(tokDir, *r.Base, "tokenizer.json.gz")), &doc); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range r.Set {
		doc[k] = v
	}
	if r.ModelFile != "" {
		data, err := os.ReadFile(filepath.Join(variantsDir, r.ModelFile))
		if err != nil {
			t.Fatal(err)
		}
		doc["model"] = data
	}
	if len(r.ModelSet) > 0 || len(r.ModelDelete) > 0 {
		model := map[string]json.RawMessage{}
		if err := json.Unmarshal(doc["model"], &model); err != nil {
			t.Fatal(err)
		}
		for k, v := range r.ModelSet {
			model[k] = v
		}
		for _, k := range r.ModelDelete {
			delete(model, k)
		}
		doc["model"], _ = json.Marshal(model)
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func diffVariant(got *Encoding, want *variantEncoding, path string) []string {
	var d []string
	for _, s := range diffEncoding(got, want.vecEncoding, true) {
		d = append(d, path+s)
	}
	if fmt.Sprint(nonNil(got.AttentionMask)) != fmt.Sprint(nonNil(want.AttentionMask)) {
		d = append(d, fmt.Sprintf("%sattention_mask %v, want %v", path, got.AttentionMask, want.AttentionMask))
	}
	if len(got.Overflowing) != len(want.Overflowing) {
		return append(d, fmt.Sprintf("%s%d overflowing encodings, want %d", path, len(got.Overflowing), len(want.Overflowing)))
	}
	for i := range want.Overflowing {
		d = append(d, diffVariant(got.Overflowing[i], &want.Overflowing[i], fmt.Sprintf("%soverflowing[%d].", path, i))...)
	}
	return d
}

func TestVariantVectors(t *testing.T) {
	var recipes struct {
		Recipes []variantRecipe `json:"recipes"`
	}
	data, err := os.ReadFile(filepath.Join(variantsDir, "recipes.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &recipes); err != nil {
		t.Fatal(err)
	}
	byVariant := map[string][]variantRecord{}
	sc := bufio.NewScanner(bytes.NewReader(readMaybeGz(t, filepath.Join(variantsDir, "expected.jsonl.gz"))))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r variantRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		byVariant[r.Variant] = append(byVariant[r.Variant], r)
	}
	if len(byVariant) != len(recipes.Recipes) {
		t.Fatalf("%d variants in expected.jsonl.gz, %d recipes", len(byVariant), len(recipes.Recipes))
	}
	for _, rc := range recipes.Recipes {
		t.Run(rc.Name, func(t *testing.T) {
			tok, err := FromBytes(buildVariant(t, rc))
			if err != nil {
				t.Fatal(err)
			}
			recs := byVariant[rc.Name]
			if len(recs) < 2 || recs[0].Meta == nil {
				t.Fatalf("no vectors for %s", rc.Name)
			}
			m := recs[0].Meta
			if tok.VocabSize(false) != m.VocabSize || tok.VocabSize(true) != m.VocabWithAdded {
				t.Errorf("vocab sizes %d/%d, want %d/%d", tok.VocabSize(false), tok.VocabSize(true), m.VocabSize, m.VocabWithAdded)
			}
			for content, want := range m.AddedIDs {
				if got, ok := tok.TokenToID(content); !ok || got != want {
					t.Errorf("added token %q has id %d (%v), want %d", content, got, ok, want)
				}
			}
			ok, n := 0, 0
			for _, r := range recs[1:] {
				if r.Batch != nil {
					checkVariantBatch(t, tok, r)
					continue
				}
				n++
				if checkVariantRecord(t, tok, r) {
					ok++
				}
			}
			t.Logf("%s: %d/%d inputs identical (encode, encode with special tokens, overflowing, decodes)", rc.Name, ok, n)
		})
	}
}

func checkVariantRecord(t *testing.T, tok *Pipeline, r variantRecord) bool {
	t.Helper()
	name := fmt.Sprintf("%q", r.Text)
	if r.TextPair != nil {
		name += fmt.Sprintf(" + %q", *r.TextPair)
	}
	good := true
	encs := map[bool]*Encoding{}
	for _, add := range []bool{false, true} {
		want := &r.Encode
		if add {
			want = &r.EncodeSpecial
		}
		var got *Encoding
		var err error
		if r.TextPair != nil {
			got, err = tok.EncodePair(r.Text, *r.TextPair, add)
		} else {
			got, err = tok.Encode(r.Text, add)
		}
		switch {
		case want.Error != "" && err == nil:
			t.Errorf("%s (special=%v): no error, the reference fails with %q", name, add, want.Error)
			good = false
		case want.Error == "" && err != nil:
			t.Errorf("%s (special=%v): %v", name, add, err)
			good = false
		case err == nil:
			if d := diffVariant(got, want, ""); len(d) > 0 {
				t.Errorf("%s (special=%v):\n  %s", name, add, strings.Join(d, "\n  "))
				good = false
			}
			encs[add] = got
		}
	}
	for _, c := range []struct {
		what string
		e    *Encoding
		skip bool
		want *string
	}{
		{"decode", encs[false], false, r.Decode},
		{"decode_special", encs[true], false, r.DecodeSpecial},
		{"decode_special_skip", encs[true], true, r.DecodeSpecialSkip},
	} {
		if c.want == nil || c.e == nil {
			continue
		}
		if got, err := tok.Decode(c.e.IDs, c.skip); err != nil || got != *c.want {
			t.Errorf("%s: %s = %q (%v), want %q", name, c.what, got, err, *c.want)
			good = false
		}
	}
	return good
}

func checkVariantBatch(t *testing.T, tok *Pipeline, r variantRecord) {
	t.Helper()
	inputs := make([]Input, len(r.Batch))
	for i, s := range r.Batch {
		inputs[i] = Single(s)
	}
	got, err := tok.EncodeBatch(context.Background(), inputs, true)
	if r.BatchError != "" {
		if err == nil {
			t.Errorf("EncodeBatch: no error, the reference fails with %q", r.BatchError)
		}
		return
	}
	if err != nil {
		t.Fatalf("EncodeBatch: %v", err)
	}
	for i := range got {
		if d := diffVariant(got[i], &r.BatchEncodings[i], ""); len(d) > 0 {
			t.Errorf("EncodeBatch element %d %q:\n  %s", i, r.Batch[i], strings.Join(d, "\n  "))
		}
	}
	t.Logf("EncodeBatch of %d texts checked", len(got))
}
