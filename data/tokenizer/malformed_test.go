package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// baseJSON is a small valid tokenizer.json that the cases below break in one
// place each.
const baseJSON = `{
  "version": "1.0",
  "truncation": null,
  "padding": null,
  "added_tokens": [{"id": 4, "content": "<s>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": null,
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3}, "merges": ["a b"]}
}`

// edit decodes baseJSON, lets f change it, and encodes it again.
func edit(t *testing.T, f func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(baseJSON), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func modelOf(m map[string]any) map[string]any { return m["model"].(map[string]any) }

// TestBaseJSONLoads guards the premise of TestMalformedFiles: each case
// breaks a file that is otherwise valid.
func TestBaseJSONLoads(t *testing.T) {
	p, err := FromBytes([]byte(baseJSON))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Encode("ab c<s>", true); err != nil {
		t.Fatal(err)
	}
}

func TestMalformedFiles(t *testing.T) {
	cases := []struct {
		name  string
		data  func(t *testing.T) []byte
		field string // expected LoadError.Field
		msg   string // expected in the message
		unsup bool   // must wrap ErrUnsupported
	}{
		{"truncated JSON", func(*testing.T) []byte { return []byte(baseJSON[:len(baseJSON)/2]) }, "pre_tokenizer.add_prefix_space", "invalid JSON at line 7, column 70: unexpected end of JSON input", false},
		{"truncated JSON at the end", func(*testing.T) []byte {
			return []byte(strings.TrimSpace(baseJSON)[:len(strings.TrimSpace(baseJSON))-1])
		}, "model", "invalid JSON at line 11, column 1: unexpected end of JSON input", false},
		{"not an object", func(*testing.T) []byte { return []byte(`[1, 2]`) }, "", "expected a JSON object at the top level", false},
		{"non-UTF-8 vocabulary key", func(*testing.T) []byte {
			return []byte(strings.Replace(baseJSON, `"c": 3`, "\"c\xff\": 3", 1))
		}, `model.vocab`, "invalid UTF-8 at byte", false},
		{"normalizer with null type", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) { m["normalizer"] = map[string]any{"type": nil} })
		}, "normalizer.type", "is null", false},
		{"unknown normalizer type", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) { m["normalizer"] = map[string]any{"type": "Frobnicate"} })
		}, "normalizer.type", `unknown normalizer type "Frobnicate"`, false},
		{"null inside a normalizer sequence", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) {
				m["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}, nil}}
			})
		}, "normalizer.normalizers[1]", "got null", false},
		{"unknown pre-tokenizer in a sequence", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) {
				m["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": []any{
					map[string]any{"type": "Whitespace"}, map[string]any{"type": "Nope"}}}
			})
		}, "pre_tokenizer.pretokenizers[1].type", `unknown pre-tokenizer type "Nope"`, false},
		{"invalid Split regex", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) {
				m["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `(\p{L}`}, "behavior": "Isolated", "invert": false}
			})
		}, "pre_tokenizer.pattern.Regex", "missing ')'", false},
		{"missing model", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) { delete(m, "model") })
		}, "model", "missing", false},
		{"null model", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) { m["model"] = nil })
		}, "model", "is null", false},
		{"model is a string", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) { m["model"] = "BPE" })
		}, "model", "expected an object, got a string", false},
		{"unknown model type", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) { modelOf(m)["type"] = "Transformer" })
		}, "model.type", `unknown model type "Transformer"`, false},
		{"vocabulary id too large", func(t *testing.T) []byte {
			return []byte(strings.Replace(baseJSON, `"c": 3`, `"c": 4294967296`, 1))
		}, "model.vocab.c", "out of range [0, 4294967295]", false},
		{"negative vocabulary id", func(t *testing.T) []byte {
			return []byte(strings.Replace(baseJSON, `"c": 3`, `"c": -3`, 1))
		}, "model.vocab.c", "is negative", false},
		{"fractional vocabulary id", func(t *testing.T) []byte {
			return []byte(strings.Replace(baseJSON, `"c": 3`, `"c": 2.5`, 1))
		}, "model.vocab.c", "not an integer", false},
		{"duplicate vocabulary ids", func(t *testing.T) []byte {
			return []byte(strings.Replace(baseJSON, `"c": 3`, `"c": 1`, 1))
		}, "model.vocab", `id 1 is used by both "b" and "c"`, false},
		{"merge with an unknown token", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) { modelOf(m)["merges"] = []any{"a b", "ab zz"} })
		}, "model.merges[1]", `token "zz" is not in model.vocab`, false},
		{"merge whose result is not in the vocabulary", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) { modelOf(m)["merges"] = []any{"a b", "b c"} })
		}, "model.merges[1]", `merged token "bc" is not in model.vocab`, false},
		{"merge with three parts", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) { modelOf(m)["merges"] = []any{"a b c"} })
		}, "model.merges[0]", "two tokens separated by one space", false},
		{"merge pair of wrong arity", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) { modelOf(m)["merges"] = []any{[]any{"a", "b", "c"}} })
		}, "model.merges[0]", "must have 2 tokens, got 3", false},
		{"merges is not a list", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) { modelOf(m)["merges"] = map[string]any{"a": "b"} })
		}, "model.merges", "expected an array, got an object", false},
		{"BPE dropout", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) { modelOf(m)["dropout"] = 0.1 })
		}, "model.dropout", "not supported", true},
		{"added token id too large", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) {
				m["added_tokens"].([]any)[0].(map[string]any)["id"] = 1e20
			})
		}, "added_tokens[0].id", "out of range [0, 4294967295]", false},
		{"template with an undefined special token", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) {
				m["post_processor"] = map[string]any{"type": "TemplateProcessing",
					"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "[CLS]", "type_id": 0}}, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}}},
					"special_tokens": map[string]any{}}
			})
		}, "post_processor.special_tokens", `missing special token(s) used by the templates: "[CLS]"`, false},
		{"template in the string form", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) {
				m["post_processor"] = map[string]any{"type": "TemplateProcessing", "single": "<s> $A", "special_tokens": map[string]any{}}
			})
		}, "post_processor.single", "the string form is not valid in tokenizer.json", false},
		{"Unigram unk_id out of range", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) {
				m["model"] = map[string]any{"type": "Unigram", "unk_id": 7, "vocab": []any{[]any{"<unk>", 0.0}, []any{"a", -1.0}}}
			})
		}, "model.unk_id", "out of range", false},
		{"Unigram piece without a score", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) {
				m["model"] = map[string]any{"type": "Unigram", "unk_id": 0, "vocab": []any{[]any{"<unk>", 0.0}, []any{"a"}}}
			})
		}, "model.vocab[1]", "expected [piece, score], got 1 elements", false},
		{"Strip decoder with a long content", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) {
				m["decoder"] = map[string]any{"type": "Strip", "content": "ab", "start": 1, "stop": 0}
			})
		}, "decoder.content", "exactly one character", false},
		{"padding to a fixed length of zero", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) {
				m["padding"] = map[string]any{"strategy": map[string]any{"Fixed": 0}, "direction": "Right", "pad_id": 0, "pad_type_id": 0, "pad_token": "a"}
			})
		}, "padding.strategy.Fixed", "positive length", false},
		{"truncation length is a string", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) {
				m["truncation"] = map[string]any{"max_length": "512", "strategy": "LongestFirst", "stride": 0, "direction": "Right"}
			})
		}, "truncation.max_length", "expected a non-negative integer, got a string", false},
		{"legacy model matching no type", func(t *testing.T) []byte {
			return edit(t, func(m map[string]any) { m["model"] = map[string]any{"dropout": nil} })
		}, "model", "cannot tell the model type", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := FromBytes(c.data(t))
			if err == nil {
				t.Fatal("no error")
			}
			var le *LoadError
			if !errors.As(err, &le) {
				t.Fatalf("error %v (%T) is not a *LoadError", err, err)
			}
			if le.File != "tokenizer.json" || le.Field != c.field {
				t.Errorf("File %q Field %q, want tokenizer.json and %q (error: %v)", le.File, le.Field, c.field, err)
			}
			if !strings.Contains(err.Error(), c.msg) {
				t.Errorf("error %q does not say %q", err, c.msg)
			}
			want := "tokenizer.json: "
			if c.field != "" {
				want += c.field + ": "
			}
			if !strings.HasPrefix(err.Error(), want) {
				t.Errorf("error %q does not start with %q", err, want)
			}
			if errors.Is(err, ErrUnsupported) != c.unsup {
				t.Errorf("errors.Is(err, ErrUnsupported) = %v, want %v", !c.unsup, c.unsup)
			}
		})
	}
}

func TestFromFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := FromFile(filepath.Join(dir, "nope.json")); err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := FromFile(dir); err == nil || !strings.Contains(err.Error(), "no tokenizer.json") {
		t.Errorf("directory without tokenizer.json: %v", err)
	}
	bad := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(bad, []byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["a a"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := FromFile(dir)
	var le *LoadError
	if !errors.As(err, &le) || le.File != "tokenizer.json" || le.Field != "model.merges[0]" {
		t.Errorf("bad file in a directory: %v", err)
	}
}

// TestModelTypeTag loads real tokenizers with and without model.type (files
// written before tokenizers 0.9 have none; gpt2 and bert-base-uncased here
// are such files) and checks both layouts against the reference vectors.
func TestModelTypeTag(t *testing.T) {
	for _, c := range []struct{ name, typ string }{
		{"gpt2", "BPE"}, {"bert-base-uncased", "WordPiece"}, {"unigram-synthetic", "Unigram"},
	} {
		for _, tagged := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/type=%v", c.name, tagged), func(t *testing.T) {
				var doc map[string]json.RawMessage
				if err := json.Unmarshal(readMaybeGz(t, filepath.Join(tokDir, c.name, "tokenizer.json.gz")), &doc); err != nil {
					t.Fatal(err)
				}
				var mdl map[string]json.RawMessage
				if err := json.Unmarshal(doc["model"], &mdl); err != nil {
					t.Fatal(err)
				}
				delete(mdl, "type")
				if tagged {
					mdl["type"], _ = json.Marshal(c.typ)
				}
				doc["model"], _ = json.Marshal(mdl)
				data, _ := json.Marshal(doc)
				tok, err := FromBytes(data)
				if err != nil {
					t.Fatal(err)
				}
				recs := readRecords(t, readMaybeGz(t, filepath.Join(tokDir, "expected", c.name+".jsonl.gz")))
				var st vecStats
				for _, r := range recs {
					st.check(t, tok, r)
				}
				if st.plain != len(recs) || st.special != len(recs) {
					t.Errorf("%d/%d and %d/%d vectors match", st.plain, len(recs), st.special, len(recs))
				}
			})
		}
	}
}
