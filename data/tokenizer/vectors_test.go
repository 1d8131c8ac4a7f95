package tokenizer

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

// The conformance vectors: what Hugging Face's Rust tokenizers returns for
// the shared corpus (see testdata/tokenizers/README.md).

const tokDir = "../../testdata/tokenizers"

var tokenizerNames = []string{"gpt2", "bert-base-uncased", "mistral-7b", "qwen3", "unigram-synthetic"}

type vecEncoding struct {
	IDs               []uint32 `json:"ids"`
	Tokens            []string `json:"tokens"`
	Offsets           []Offset `json:"offsets"`
	WordIDs           []*int   `json:"word_ids"`
	TypeIDs           []uint32 `json:"type_ids"`
	SpecialTokensMask []uint32 `json:"special_tokens_mask"`
	SequenceIDs       []*int   `json:"sequence_ids"`
}

type vecRecord struct {
	ID                string      `json:"id"`
	Text              string      `json:"text"`
	TextPair          string      `json:"text_pair"`
	Encode            vecEncoding `json:"encode"`
	EncodeSpecial     vecEncoding `json:"encode_special"`
	Decode            *string     `json:"decode"`
	DecodeSpecial     string      `json:"decode_special"`
	DecodeSpecialSkip string      `json:"decode_special_skip"`
	Roundtrip         bool        `json:"roundtrip"`
}

type manifest struct {
	Corpus struct {
		Strings int `json:"strings"`
		Pairs   int `json:"pairs"`
	} `json:"corpus"`
	Tokenizers map[string]struct {
		TokenizerSHA    string `json:"tokenizer_json_sha256"`
		VocabWithAdded  int    `json:"vocab_size_with_added"`
		Vectors         int    `json:"vectors"`
		PairVectors     int    `json:"pair_vectors"`
		ExactRoundtrips int    `json:"exact_roundtrips"`
		ExpectedSHA     string `json:"expected_sha256"`
		PairsSHA        string `json:"pairs_sha256"`
	} `json:"tokenizers"`
}

func readMaybeGz(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		if data, err = io.ReadAll(zr); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func readManifest(t testing.TB) manifest {
	var m manifest
	if err := json.Unmarshal(readMaybeGz(t, filepath.Join(tokDir, "expected", "MANIFEST.json")), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func readRecords(t testing.TB, data []byte) []vecRecord {
	var out []vecRecord
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r vecRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// Loading qwen3 parses 11 MB of JSON; share loaded tokenizers across tests.
var (
	loadedMu sync.Mutex
	loaded   = map[string]*Pipeline{}
)

func loadTestTokenizer(t testing.TB, name string) *Pipeline {
	t.Helper()
	loadedMu.Lock()
	defer loadedMu.Unlock()
	if p, ok := loaded[name]; ok {
		return p
	}
	p, err := FromFile(filepath.Join(tokDir, name))
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	loaded[name] = p
	return p
}

func intPtrs(xs []int) []*int {
	out := make([]*int, len(xs))
	for i := range xs {
		if xs[i] >= 0 {
			v := xs[i]
			out[i] = &v
		}
	}
	return out
}

// diffEncoding describes every field where got differs from want, precisely
// enough to debug from the test log alone.
func diffEncoding(got *Encoding, want vecEncoding, withOffsets bool) []string {
	var d []string
	cmp := func(field string, g, w any) {
		if want := reflect.ValueOf(w); want.IsNil() {
			return // not in this vector
		}
		gv, wv := reflect.ValueOf(g), reflect.ValueOf(w)
		if gv.Len() == 0 && wv.Len() == 0 || reflect.DeepEqual(g, w) {
			return // nil and empty are the same here
		}
		i := 0
		for i < gv.Len() && i < wv.Len() && reflect.DeepEqual(gv.Index(i).Interface(), wv.Index(i).Interface()) {
			i++
		}
		show := func(v reflect.Value) string {
			if i >= v.Len() {
				return "<end>"
			}
			x := v.Index(i).Interface()
			if p, ok := x.(*int); ok {
				if p == nil {
					return "null"
				}
				return fmt.Sprint(*p)
			}
			return fmt.Sprintf("%#v", x)
		}
		ctx := ""
		if i < len(got.Tokens) {
			ctx = fmt.Sprintf(" (got token %q)", got.Tokens[i])
		}
		d = append(d, fmt.Sprintf("%s differ at %d: got %s, want %s; len got %d want %d%s", field, i, show(gv), show(wv), gv.Len(), wv.Len(), ctx))
	}
	cmp("ids", got.IDs, want.IDs)
	cmp("tokens", got.Tokens, want.Tokens)
	if withOffsets {
		cmp("offsets", got.Offsets, want.Offsets)
		cmp("word_ids", intPtrs(got.WordIDs), want.WordIDs)
		cmp("special_tokens_mask", got.SpecialTokensMask, want.SpecialTokensMask)
		cmp("sequence_ids", intPtrs(got.SequenceIDs()), want.SequenceIDs)
	}
	cmp("type_ids", got.TypeIDs, want.TypeIDs)
	return d
}

type vecStats struct {
	plain, special, decodes, pairs, pairsPlain int
	roundtrips                                 int
}

func TestConformanceVectors(t *testing.T) {
	m := readManifest(t)
	corpus := readMaybeGz(t, filepath.Join(tokDir, "corpus.jsonl"))
	if n := bytes.Count(corpus, []byte("\n")); n != m.Corpus.Strings {
		t.Fatalf("corpus has %d strings, manifest says %d", n, m.Corpus.Strings)
	}
	for _, name := range tokenizerNames {
		t.Run(name, func(t *testing.T) {
			info := m.Tokenizers[name]
			if got := sha(readMaybeGz(t, filepath.Join(tokDir, name, "tokenizer.json.gz"))); got != info.TokenizerSHA {
				t.Fatalf("tokenizer.json sha256 %s, manifest %s", got, info.TokenizerSHA)
			}
			expData := readMaybeGz(t, filepath.Join(tokDir, "expected", name+".jsonl.gz"))
			pairData := readMaybeGz(t, filepath.Join(tokDir, "expected", name+".pairs.jsonl"))
			if sha(expData) != info.ExpectedSHA || sha(pairData) != info.PairsSHA {
				t.Fatalf("expected vectors do not match the manifest's sha256")
			}
			tok := loadTestTokenizer(t, name)
			if got := tok.VocabSize(true); got != info.VocabWithAdded {
				t.Errorf("VocabSize(true) = %d, want %d", got, info.VocabWithAdded)
			}
			recs := readRecords(t, expData)
			if len(recs) != info.Vectors {
				t.Fatalf("%d vectors, manifest says %d", len(recs), info.Vectors)
			}
			var st vecStats
			for _, r := range recs {
				st.check(t, tok, r)
			}
			pairs := readRecords(t, pairData)
			if len(pairs) != info.PairVectors {
				t.Fatalf("%d pair vectors, manifest says %d", len(pairs), info.PairVectors)
			}
			for _, r := range pairs {
				st.checkPair(t, tok, r)
			}
			if st.roundtrips != info.ExactRoundtrips {
				t.Errorf("exact round-trips: %d, reference %d", st.roundtrips, info.ExactRoundtrips)
			}
			t.Logf("%s: encode %d/%d, encode+special %d/%d, decodes %d/%d, pairs %d/%d (+%d/%d without special), round-trips %d (reference %d)",
				name, st.plain, len(recs), st.special, len(recs), st.decodes, 3*len(recs), st.pairs, 3*len(pairs), st.pairsPlain, len(pairs),
				st.roundtrips, info.ExactRoundtrips)
		})
	}
}

func (st *vecStats) check(t *testing.T, tok *Pipeline, r vecRecord) {
	t.Helper()
	e0, err := tok.Encode(r.Text, false)
	if err != nil {
		t.Errorf("%s: Encode: %v", r.ID, err)
		return
	}
	if d := diffEncoding(e0, r.Encode, true); len(d) > 0 {
		t.Errorf("%s %q without special tokens:\n  %s", r.ID, r.Text, strings.Join(d, "\n  "))
	} else {
		st.plain++
	}
	e1, err := tok.Encode(r.Text, true)
	if err != nil {
		t.Errorf("%s: Encode(special): %v", r.ID, err)
		return
	}
	if d := diffEncoding(e1, r.EncodeSpecial, true); len(d) > 0 {
		t.Errorf("%s %q with special tokens:\n  %s", r.ID, r.Text, strings.Join(d, "\n  "))
	} else {
		st.special++
	}
	for _, c := range []struct {
		what string
		ids  []uint32
		skip bool
		want string
	}{
		{"decode", r.Encode.IDs, false, *r.Decode},
		{"decode_special", r.EncodeSpecial.IDs, false, r.DecodeSpecial},
		{"decode_special_skip", r.EncodeSpecial.IDs, true, r.DecodeSpecialSkip},
	} {
		got, err := tok.Decode(c.ids, c.skip)
		if err != nil || got != c.want {
			t.Errorf("%s: %s = %q (err %v), want %q", r.ID, c.what, got, err, c.want)
			continue
		}
		st.decodes++
	}
	if got, _ := tok.Decode(e0.IDs, false); got == r.Text {
		st.roundtrips++
	}
}

func (st *vecStats) checkPair(t *testing.T, tok *Pipeline, r vecRecord) {
	t.Helper()
	e0, err := tok.EncodePair(r.Text, r.TextPair, false)
	if err != nil {
		t.Errorf("%s: EncodePair: %v", r.ID, err)
		return
	}
	if d := diffEncoding(e0, r.Encode, false); len(d) > 0 {
		t.Errorf("pair %s without special tokens:\n  %s", r.ID, strings.Join(d, "\n  "))
	} else {
		st.pairsPlain++
	}
	e1, err := tok.EncodePair(r.Text, r.TextPair, true)
	if err != nil {
		t.Errorf("%s: EncodePair(special): %v", r.ID, err)
		return
	}
	ok := true
	if d := diffEncoding(e1, r.EncodeSpecial, true); len(d) > 0 {
		t.Errorf("pair %s with special tokens:\n  %s", r.ID, strings.Join(d, "\n  "))
		ok = false
	}
	for _, c := range []struct {
		what string
		skip bool
		want string
	}{{"decode_special", false, r.DecodeSpecial}, {"decode_special_skip", true, r.DecodeSpecialSkip}} {
		got, err := tok.Decode(r.EncodeSpecial.IDs, c.skip)
		if err != nil || got != c.want {
			t.Errorf("pair %s: %s = %q (err %v), want %q", r.ID, c.what, got, err, c.want)
			ok = false
		}
	}
	if ok {
		st.pairs += 3
	}
}
