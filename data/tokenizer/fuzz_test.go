package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gotpu/gotpu/data/tokenizer/internal/unorm"
)

// Seeds for FuzzLoad: small files exercising every component type, so the
// fuzzer starts from the parsers' interesting paths.
var loadSeeds = []string{
	baseJSON,
	`{"model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 5,
	  "vocab": {"[UNK]": 0, "a": 1, "##b": 2, "[CLS]": 3, "[SEP]": 4}},
	 "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
	 "pre_tokenizer": {"type": "BertPreTokenizer"},
	 "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 4], "cls": ["[CLS]", 3]},
	 "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
	 "added_tokens": [{"id": 3, "content": "[CLS]", "special": true, "normalized": false, "lstrip": true, "rstrip": true, "single_word": true}],
	 "truncation": {"max_length": 4, "stride": 1, "strategy": "LongestFirst", "direction": "Left"},
	 "padding": {"strategy": {"Fixed": 6}, "direction": "Left", "pad_to_multiple_of": 4, "pad_id": 0, "pad_type_id": 1, "pad_token": "[UNK]"}}`,
	`{"model": {"type": "Unigram", "unk_id": 0, "byte_fallback": true, "vocab": [["<unk>", 0], ["▁a", -1.5], ["b", -2], ["<0x41>", -3]]},
	 "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
	   {"type": "Strip", "strip_left": true, "strip_right": false}, {"type": "Lowercase"}, {"type": "StripAccents"}, {"type": "NFD"}]},
	 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"}, {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": true},
	   {"type": "Digits", "individual_digits": true}, {"type": "Punctuation", "behavior": "Contiguous"}]},
	 "post_processor": {"type": "TemplateProcessing", "single": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}],
	   "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "</s>", "type_id": 1}}],
	   "special_tokens": {"</s>": {"id": "</s>", "ids": [0], "tokens": ["<unk>"]}}},
	 "decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Metaspace", "replacement": "▁", "add_prefix_space": true}, {"type": "Strip", "content": " ", "start": 1, "stop": 1}]}}`,
	`{"model": {"vocab": {"<unk>": 0, "a": 1, "b": 2}, "unk_token": "<unk>"},
	 "pre_tokenizer": {"type": "Split", "pattern": {"String": "a"}, "behavior": "MergedWithNext", "invert": true},
	 "post_processor": {"type": "Sequence", "processors": [{"type": "ByteLevel", "trim_offsets": true}, {"type": "RobertaProcessing", "sep": ["b", 2], "cls": ["a", 1], "trim_offsets": true, "add_prefix_space": true}]},
	 "decoder": {"type": "Replace", "pattern": {"String": "a"}, "content": "x"}}`,
	`{"model": {"type": "BPE", "vocab": {"<unk>": 0, "a": 1, "b</w>": 2, "##b</w>": 3, "ab</w>": 4}, "merges": [["a", "##b</w>"]], "unk_token": "<unk>",
	  "continuing_subword_prefix": "##", "end_of_word_suffix": "</w>", "fuse_unk": true, "ignore_merges": true},
	 "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\s+(?!\\S)|\\p{L}+"}, "behavior": "MergedWithPrevious", "invert": false},
	 "normalizer": {"type": "Prepend", "prepend": "▁"}, "decoder": {"type": "BPEDecoder", "suffix": "</w>"}}`,
}

// FuzzLoad checks that no tokenizer.json makes loading (or encoding with
// what loaded) panic or hang.
func FuzzLoad(f *testing.F) {
	for _, s := range loadSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := FromBytes(data)
		if err != nil {
			if _, ok := err.(*LoadError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		for _, s := range []string{"", "a b", "ab AB  ab\n", "héllo 123 日本", "<s>[CLS]</s>"} {
			if e, err := p.Encode(s, true); err == nil {
				checkOffsets(t, "fuzzed", s, e, false)
				_, _ = p.Decode(e.IDs, true)
			}
			_, _ = p.EncodePair(s, s, true)
		}
	})
}

// checkOffsets verifies the invariants every encoding must satisfy: offsets
// within the text, start <= end, and (when monotone is set, which holds for
// the reference tokenizers) token starts that never go backwards.
func checkOffsets(t *testing.T, name, text string, e *Encoding, monotone bool) {
	t.Helper()
	n := utf8.RuneCountInString(text)
	nTok := e.Len()
	for _, l := range []int{len(e.Tokens), len(e.Offsets), len(e.ByteOffsets), len(e.WordIDs), len(e.TypeIDs), len(e.SpecialTokensMask), len(e.AttentionMask)} {
		if l != nTok {
			t.Fatalf("%s: %q: field lengths differ (%d tokens)", name, text, nTok)
		}
	}
	last := 0
	for i, o := range e.Offsets {
		if e.SpecialTokensMask[i] == 1 {
			continue
		}
		b := e.ByteOffsets[i]
		if o[0] < 0 || o[0] > o[1] || o[1] > n || b[0] < 0 || b[0] > b[1] || b[1] > len(text) {
			t.Fatalf("%s: %q: token %d %q has offsets %v (bytes %v), text has %d characters", name, text, i, e.Tokens[i], o, b, n)
		}
		if monotone && o[0] < last {
			t.Fatalf("%s: %q: token %d %q starts at %d, before the previous token's start %d", name, text, i, e.Tokens[i], o[0], last)
		}
		last = o[0]
	}
}

func corpusTexts(t testing.TB) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(readMaybeGz(t, filepath.Join(tokDir, "corpus.jsonl"))))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r struct {
			Text string `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r.Text)
	}
	return out
}

func nfc(s string) string {
	var b strings.Builder
	for _, c := range unorm.Transform(unorm.NFC, s, nil) {
		b.WriteRune(c.R)
	}
	return b.String()
}

// FuzzEncode encodes arbitrary text with every reference tokenizer: no
// panic, offsets in range and monotone, and for the byte-level tokenizers
// decode(encode(x)) gives x back (NFC-normalized for Qwen).
func FuzzEncode(f *testing.F) {
	for _, s := range corpusTexts(f) {
		f.Add(s)
	}
	toks := map[string]*Pipeline{}
	for _, name := range tokenizerNames {
		toks[name] = loadTestTokenizer(f, name)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, name := range tokenizerNames {
			e, err := toks[name].Encode(text, true)
			if !utf8.ValidString(text) {
				if err == nil {
					t.Fatalf("%s: invalid UTF-8 accepted", name)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %q: %v", name, text, err)
			}
			checkOffsets(t, name, text, e, true)
			plain, err := toks[name].Encode(text, false)
			if err != nil {
				t.Fatal(err)
			}
			got, err := toks[name].Decode(plain.IDs, false)
			if err != nil {
				t.Fatal(err)
			}
			switch name {
			case "gpt2":
				if got != text {
					t.Fatalf("gpt2: decode(encode(%q)) = %q", text, got)
				}
			case "qwen3":
				if want := nfc(text); got != want {
					t.Fatalf("qwen3: decode(encode(%q)) = %q, want the NFC form %q", text, got, want)
				}
			}
		}
	})
}
