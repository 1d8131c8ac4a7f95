package tokenizer

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// Truncation and padding are checked as properties of the untruncated,
// unpadded encodings (which the conformance test ties to the reference).

func mustWithTruncation(t *testing.T, p *Pipeline, tr *Truncation) *Pipeline {
	t.Helper()
	q, err := p.WithTruncation(tr)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func mustWithPadding(t *testing.T, p *Pipeline, pd *Padding) *Pipeline {
	t.Helper()
	q, err := p.WithPadding(pd)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// isRun reports whether sub occurs in full at position at.
func isRun(sub, full []uint32, at int) bool {
	return at >= 0 && at+len(sub) <= len(full) && reflect.DeepEqual(sub, full[at:at+len(sub)])
}

// indexRun finds sub in full (the first occurrence at or after from).
func indexRun(sub, full []uint32, from int) int {
	for i := max(from, 0); i+len(sub) <= len(full); i++ {
		if isRun(sub, full, i) {
			return i
		}
	}
	return -1
}

// TestTruncationSingle checks the invariants of truncation with overflow
// (the exact windows are checked against the reference by the variant
// vectors): every window fits, holds the special tokens around a contiguous
// run of the untruncated tokens, the first run starts (Right) or ends
// (Left) the text, and consecutive windows overlap by the stride.
func TestTruncationSingle(t *testing.T) {
	base := loadTestTokenizer(t, "bert-base-uncased") // [CLS] $A [SEP]
	const maxLen, stride = 8, 2
	for _, dir := range []Direction{Right, Left} {
		t.Run(dir.String(), func(t *testing.T) {
			tr := mustWithTruncation(t, base, &Truncation{MaxLength: maxLen, Stride: stride, Direction: dir})
			for _, s := range corpusTexts(t) {
				content, err := base.Encode(s, false)
				if err != nil {
					t.Fatal(err)
				}
				full, _ := base.Encode(s, true)
				got, err := tr.Encode(s, true)
				if err != nil {
					t.Fatal(err)
				}
				if content.Len()+2 <= maxLen {
					if !reflect.DeepEqual(got.IDs, full.IDs) || len(got.Overflowing) != 0 {
						t.Fatalf("%q fits in %d tokens but was changed: %v", s, maxLen, got.IDs)
					}
					continue
				}
				for i, w := range append([]*Encoding{got}, got.Overflowing...) {
					n := w.Len()
					if n > maxLen || n < 3 || w.IDs[0] != full.IDs[0] || w.IDs[n-1] != full.IDs[full.Len()-1] {
						t.Fatalf("%q window %d: %v does not fit or lacks the special tokens", s, i, w.IDs)
					}
					run := w.IDs[1 : n-1]
					if indexRun(run, content.IDs, 0) < 0 {
						t.Fatalf("%q window %d: %v is not a run of the text's tokens", s, i, run)
					}
					if i == 0 {
						// The first window starts (Right) or ends (Left) the text,
						// offsets included.
						at := 0
						if dir == Left {
							at = content.Len() - len(run)
						}
						if !isRun(run, content.IDs, at) || !reflect.DeepEqual(w.Offsets[1:n-1], content.Offsets[at:at+len(run)]) {
							t.Fatalf("%q: the first window is not at the %v end of the text", s, dir)
						}
					}
					if i > 0 && len(run) > stride {
						// Consecutive windows share stride tokens.
						p := append([]*Encoding{got}, got.Overflowing...)[i-1]
						prevRun := p.IDs[1 : p.Len()-1]
						shared := run[:stride]
						if dir == Right && !reflect.DeepEqual(prevRun[len(prevRun)-stride:], shared) {
							t.Fatalf("%q windows %d and %d do not overlap by %d", s, i-1, i, stride)
						}
						if dir == Left && !reflect.DeepEqual(prevRun[:stride], run[len(run)-stride:]) {
							t.Fatalf("%q windows %d and %d do not overlap by %d", s, i-1, i, stride)
						}
					}
				}
			}
		})
	}
}

func TestTruncationPairs(t *testing.T) {
	base := loadTestTokenizer(t, "bert-base-uncased") // [CLS] $A [SEP] $B [SEP]
	pairs := readRecords(t, readMaybeGz(t, filepath.Join(tokDir, "expected", "bert-base-uncased.pairs.jsonl")))
	const maxLen = 12
	room := maxLen - 3
	for _, strat := range []TruncationStrategy{LongestFirst, OnlyFirst, OnlySecond} {
		t.Run(strat.String(), func(t *testing.T) {
			tr := mustWithTruncation(t, base, &Truncation{MaxLength: maxLen, Strategy: strat})
			for _, r := range pairs {
				a, _ := base.Encode(r.Text, false)
				b, _ := base.Encode(r.TextPair, false)
				n1, n2 := a.Len(), b.Len()
				got, err := tr.EncodePair(r.Text, r.TextPair, true)
				if err != nil {
					// Only the strategies that cut one side can run out of it.
					if !errors.Is(err, errTooShortTrunc) || strat == LongestFirst || n1+n2 <= room {
						t.Fatalf("%s: %v", r.ID, err)
					}
					continue
				}
				seq := got.SequenceIDs()
				var ga, gb []uint32
				for i, id := range got.IDs {
					switch seq[i] {
					case 0:
						ga = append(ga, id)
					case 1:
						gb = append(gb, id)
					}
				}
				if !isRun(ga, a.IDs, 0) || !isRun(gb, b.IDs, 0) {
					t.Fatalf("%s: kept parts are not prefixes", r.ID)
				}
				k1, k2 := len(ga), len(gb)
				switch {
				case n1+n2 <= room:
					if k1 != n1 || k2 != n2 {
						t.Errorf("%s: fits but was truncated to %d+%d", r.ID, k1, k2)
					}
				case strat == OnlyFirst:
					if k2 != n2 || k1+k2 != room {
						t.Errorf("%s: OnlyFirst kept %d+%d of %d+%d (room %d)", r.ID, k1, k2, n1, n2, room)
					}
				case strat == OnlySecond:
					if k1 != n1 || k1+k2 != room {
						t.Errorf("%s: OnlySecond kept %d+%d of %d+%d (room %d)", r.ID, k1, k2, n1, n2, room)
					}
				default:
					// Longest first: the shorter side is kept whole when it
					// fits in half, otherwise both get half the room.
					if k1+k2 != room || !(k1 == n1 || k2 == n2 || k1-k2 <= 1 && k2-k1 <= 1) {
						t.Errorf("%s: LongestFirst kept %d+%d of %d+%d (room %d)", r.ID, k1, k2, n1, n2, room)
					}
				}
			}
		})
	}
	tr := mustWithTruncation(t, base, &Truncation{MaxLength: maxLen, Strategy: OnlySecond})
	if _, err := tr.Encode(strings.Repeat("hello ", 50), true); !errors.Is(err, errNoPair) {
		t.Errorf("OnlySecond without a pair: %v", err)
	}
	tr = mustWithTruncation(t, base, &Truncation{MaxLength: 1})
	if _, err := tr.Encode("hello", true); err == nil {
		t.Errorf("max length below the number of special tokens: no error")
	}
}

func TestPadding(t *testing.T) {
	base := loadTestTokenizer(t, "bert-base-uncased")
	texts := corpusTexts(t)
	padID, _ := base.TokenToID("[PAD]")
	for _, c := range []struct {
		pad  Padding
		name string
	}{
		{Padding{Length: 32, PadID: padID, PadTypeID: 1, PadToken: "[PAD]"}, "fixed-right"},
		{Padding{Length: 32, Direction: Left, PadID: padID, PadToken: "[PAD]"}, "fixed-left"},
		{Padding{PadToMultipleOf: 8, PadID: padID, PadToken: "[PAD]"}, "multiple-of-8"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := mustWithPadding(t, base, &c.pad)
			for _, s := range texts {
				plain, _ := base.Encode(s, true)
				got, err := p.Encode(s, true)
				if err != nil {
					t.Fatal(err)
				}
				checkPadded(t, s, plain, got, &c.pad, max(c.pad.Length, plain.Len()))
			}
		})
	}
	t.Run("batch-longest", func(t *testing.T) {
		pd := Padding{PadToMultipleOf: 4, PadID: padID, PadToken: "[PAD]"}
		p := mustWithPadding(t, base, &pd)
		inputs := make([]Input, len(texts))
		longest := 0
		var plain []*Encoding
		for i, s := range texts {
			inputs[i] = Single(s)
			e, _ := base.Encode(s, true)
			plain = append(plain, e)
			longest = max(longest, e.Len())
		}
		got, err := p.EncodeBatch(context.Background(), inputs, true)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			checkPadded(t, texts[i], plain[i], got[i], &pd, longest)
		}
	})
}

// checkPadded verifies got is plain padded to at least minLen tokens, rounded
// up to PadToMultipleOf.
func checkPadded(t *testing.T, s string, plain, got *Encoding, pd *Padding, minLen int) {
	t.Helper()
	want := minLen
	if m := pd.PadToMultipleOf; m > 0 && want%m != 0 {
		want += m - want%m
	}
	if got.Len() != want {
		t.Fatalf("%q: padded to %d tokens, want %d", s, got.Len(), want)
	}
	n := want - plain.Len()
	start := 0
	if pd.Direction == Left {
		start = n
	}
	if !reflect.DeepEqual(got.IDs[start:start+plain.Len()], plain.IDs) ||
		!reflect.DeepEqual(got.Offsets[start:start+plain.Len()], plain.Offsets) {
		t.Fatalf("%q: content changed by padding", s)
	}
	for i := 0; i < got.Len(); i++ {
		isPad := i < start || i >= start+plain.Len()
		if isPad != (got.AttentionMask[i] == 0) {
			t.Fatalf("%q: attention mask %v", s, got.AttentionMask)
		}
		if isPad && (got.IDs[i] != pd.PadID || got.TypeIDs[i] != pd.PadTypeID || got.Tokens[i] != pd.PadToken ||
			got.SpecialTokensMask[i] != 1 || got.WordIDs[i] != -1 || got.SequenceIDs()[i] != -1) {
			t.Fatalf("%q: pad token %d is wrong: id %d type %d %q", s, i, got.IDs[i], got.TypeIDs[i], got.Tokens[i])
		}
	}
	ps, gs := plain.SequenceIDs(), got.SequenceIDs()
	if !reflect.DeepEqual(gs[start:start+plain.Len()], ps) {
		t.Fatalf("%q: sequence ids %v, want %v inside padding", s, gs, ps)
	}
}

func TestEncodeBatchMatchesEncode(t *testing.T) {
	texts := corpusTexts(t)
	for _, name := range []string{"gpt2", "unigram-synthetic"} {
		tok := loadTestTokenizer(t, name)
		var inputs []Input
		for i, s := range texts {
			if i%3 == 0 {
				inputs = append(inputs, PairOf(s, texts[(i*7)%len(texts)]))
			} else {
				inputs = append(inputs, Single(s))
			}
		}
		got, err := tok.EncodeBatch(context.Background(), inputs, true)
		if err != nil {
			t.Fatal(err)
		}
		var ids [][]uint32
		for i, in := range inputs {
			var want *Encoding
			if in.Pair != nil {
				want, err = tok.EncodePair(in.Text, *in.Pair, true)
			} else {
				want, err = tok.Encode(in.Text, true)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got[i], want) {
				t.Fatalf("%s: batch element %d differs from Encode", name, i)
			}
			ids = append(ids, want.IDs)
		}
		texts2, err := tok.DecodeBatch(context.Background(), ids, false)
		if err != nil {
			t.Fatal(err)
		}
		for i := range ids {
			if want, _ := tok.Decode(ids[i], false); texts2[i] != want {
				t.Fatalf("%s: DecodeBatch element %d = %q, Decode %q", name, i, texts2[i], want)
			}
		}
	}
}

func TestEncodeBatchErrors(t *testing.T) {
	tok := loadTestTokenizer(t, "gpt2")
	inputs := make([]Input, 100)
	for i := range inputs {
		inputs[i] = Single(fmt.Sprintf("text %d", i))
	}
	inputs[57] = Single("bad \xff utf-8")
	_, err := tok.EncodeBatch(context.Background(), inputs, false)
	var be *BatchError
	if !errors.As(err, &be) || be.Index != 57 || !errors.Is(err, ErrInvalidUTF8) {
		t.Errorf("error %v, want a BatchError for element 57 wrapping ErrInvalidUTF8", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tok.EncodeBatch(ctx, inputs[:10], false); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	if _, err := tok.DecodeBatch(ctx, [][]uint32{{1}}, false); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context (decode): %v", err)
	}
}
