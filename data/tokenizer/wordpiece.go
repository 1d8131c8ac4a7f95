package tokenizer

import (
	"fmt"
	"math"
	"unicode/utf8"
)

// wordPiece is BERT's greedy longest-match-first model.
type wordPiece struct {
	vocab    map[string]uint32
	ids      idTable
	unk      string
	prefix   string
	maxChars int
}

func parseWordPiece(o jobj) (model, error) {
	if !o.has("vocab") {
		return nil, errAt(childPath(o.path, "vocab"), "missing")
	}
	vocab, err := parseVocabMap(o.get("vocab"))
	if err != nil {
		return nil, err
	}
	w := &wordPiece{vocab: vocab, ids: newIDTable(vocab)}
	if w.unk, err = o.str("unk_token", "[UNK]"); err != nil {
		return nil, err
	}
	if w.prefix, err = o.str("continuing_subword_prefix", "##"); err != nil {
		return nil, err
	}
	n, err := o.uint("max_input_chars_per_word", 100, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	w.maxChars = int(n)
	return w, nil
}

func (w *wordPiece) unkToken(n int, dst []token) ([]token, error) {
	id, ok := w.vocab[w.unk]
	if !ok {
		return nil, fmt.Errorf("WordPiece: unk_token %q is not in the vocabulary: %w", w.unk, errMissingUnk)
	}
	return append(dst, token{id: id, value: w.unk, start: 0, end: n}), nil
}

func (w *wordPiece) tokenize(s string, dst []token) ([]token, error) {
	if utf8.RuneCountInString(s) > w.maxChars {
		return w.unkToken(len(s), dst)
	}
	base := len(dst)
	out := dst
	buf := make([]byte, 0, len(w.prefix)+len(s))
	for start := 0; start < len(s); {
		end := len(s)
		found := false
		for start < end {
			var id uint32
			var ok bool
			if start > 0 {
				buf = append(append(buf[:0], w.prefix...), s[start:end]...)
				id, ok = w.vocab[string(buf)] // no allocation for the lookup
			} else {
				id, ok = w.vocab[s[start:end]]
			}
			if ok {
				v, _ := w.ids.get(id)
				out = append(out, token{id: id, value: v, start: start, end: end})
				found = true
				break
			}
			_, size := utf8.DecodeLastRuneInString(s[start:end])
			end -= size
		}
		if !found {
			return w.unkToken(len(s), out[:base])
		}
		start = end
	}
	return out, nil
}

func (w *wordPiece) tokenToID(s string) (uint32, bool)  { id, ok := w.vocab[s]; return id, ok }
func (w *wordPiece) idToToken(id uint32) (string, bool) { return w.ids.get(id) }
func (w *wordPiece) vocabSize() int                     { return len(w.vocab) }
func (w *wordPiece) distinctTokens() int                { return len(w.vocab) }
