package tokenizer

import (
	"errors"
	"fmt"
	"math"
)

// model turns one pre-tokenized word into tokens.
type model interface {
	// tokenize appends the tokens of word to dst.
	tokenize(word string, dst []token) ([]token, error)
	tokenToID(tok string) (uint32, bool)
	idToToken(id uint32) (string, bool)
	// vocabSize is the model's own vocabulary size (get_vocab_size).
	vocabSize() int
	// distinctTokens counts distinct token strings (get_vocab().len()).
	distinctTokens() int
}

var errMissingUnk = errors.New("the input has characters the vocabulary cannot represent and the model has no usable unknown token")

// idTable maps ids to token strings; dense ids use a slice.
type idTable struct {
	dense   []string
	present []bool
	sparse  map[uint32]string
}

func newIDTable(vocab map[string]uint32) idTable {
	maxID := uint32(0)
	for _, id := range vocab {
		maxID = max(maxID, id)
	}
	var t idTable
	if uint64(maxID) < 2*uint64(len(vocab))+1024 {
		t.dense = make([]string, maxID+1)
		t.present = make([]bool, maxID+1)
		for s, id := range vocab {
			t.dense[id], t.present[id] = s, true
		}
		return t
	}
	t.sparse = make(map[uint32]string, len(vocab))
	for s, id := range vocab {
		t.sparse[id] = s
	}
	return t
}

func (t *idTable) get(id uint32) (string, bool) {
	if t.sparse != nil {
		s, ok := t.sparse[id]
		return s, ok
	}
	if int64(id) < int64(len(t.dense)) && t.present[id] {
		return t.dense[id], true
	}
	return "", false
}

// parseVocabMap reads a {"token": id} object, rejecting ids that are not
// u32 and ids used by two tokens (Hugging Face would silently keep one of
// them for id→token lookups; that ambiguity is treated as a corrupt file).
func parseVocabMap(v jval) (map[string]uint32, error) {
	nums, err := decodeNumberMap(v)
	if err != nil {
		return nil, err
	}
	vocab := make(map[string]uint32, len(nums))
	byID := make(map[uint32]string, len(nums))
	for tok, n := range nums {
		id, err := parseUint(childPath(v.path, tok), n.String(), math.MaxUint32)
		if err != nil {
			return nil, err
		}
		if other, dup := byID[uint32(id)]; dup {
			a, b := other, tok
			if b < a {
				a, b = b, a
			}
			return nil, errAt(v.path, "id %d is used by both %q and %q", id, a, b)
		}
		byID[uint32(id)] = tok
		vocab[tok] = uint32(id)
	}
	return vocab, nil
}

// parseModel reads the "model" object, with or without its "type" tag
// (files written by tokenizers before 0.9 have none).
func parseModel(v jval, opts loadOptions) (model, error) {
	if v.raw == nil {
		return nil, errAt(v.path, "missing; a model is required")
	}
	if v.null() {
		return nil, errAt(v.path, "is null; a model is required")
	}
	o, err := v.object()
	if err != nil {
		return nil, err
	}
	typ := ""
	if _, ok := o.m["type"]; ok {
		if typ, err = o.typeName(); err != nil {
			return nil, err
		}
	} else {
		typ = guessModelType(o)
	}
	switch typ {
	case "BPE":
		return parseBPE(o, opts)
	case "WordPiece":
		return parseWordPiece(o)
	case "WordLevel":
		return parseWordLevel(o)
	case "Unigram":
		return parseUnigram(o, opts)
	case "":
		return nil, errAt(o.path, "cannot tell the model type: no \"type\" field and the fields match no known model")
	}
	return nil, errAt(childPath(o.path, "type"), "unknown model type %q", typ)
}

// guessModelType recognises legacy untyped models by their fields, in the
// order Hugging Face tries them (BPE, WordPiece, WordLevel, Unigram).
func guessModelType(o jobj) string {
	raw := o.m["vocab"]
	isArray := false
	for _, c := range raw {
		if c == ' ' || c == '\n' || c == '\t' || c == '\r' {
			continue
		}
		isArray = c == '['
		break
	}
	switch {
	case o.has("merges"):
		return "BPE"
	case isArray:
		return "Unigram"
	case o.has("continuing_subword_prefix") || o.has("max_input_chars_per_word"):
		return "WordPiece"
	case o.has("vocab"):
		return "WordLevel"
	}
	return ""
}

// wordLevel maps whole words to ids.
type wordLevel struct {
	vocab map[string]uint32
	ids   idTable
	unk   string
}

func parseWordLevel(o jobj) (model, error) {
	vocab, err := parseVocabMap(o.get("vocab"))
	if err != nil {
		return nil, err
	}
	unk, err := o.str("unk_token", "<unk>")
	if err != nil {
		return nil, err
	}
	return &wordLevel{vocab: vocab, ids: newIDTable(vocab), unk: unk}, nil
}

func (w *wordLevel) tokenize(s string, dst []token) ([]token, error) {
	if id, ok := w.vocab[s]; ok {
		v, _ := w.ids.get(id)
		return append(dst, token{id: id, value: v, start: 0, end: len(s)}), nil
	}
	if id, ok := w.vocab[w.unk]; ok {
		return append(dst, token{id: id, value: w.unk, start: 0, end: len(s)}), nil
	}
	return nil, fmt.Errorf("WordLevel: %w", errMissingUnk)
}

func (w *wordLevel) tokenToID(s string) (uint32, bool)  { id, ok := w.vocab[s]; return id, ok }
func (w *wordLevel) idToToken(id uint32) (string, bool) { return w.ids.get(id) }
func (w *wordLevel) vocabSize() int                     { return len(w.vocab) }
func (w *wordLevel) distinctTokens() int                { return len(w.vocab) }
