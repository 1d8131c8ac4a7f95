package tokenizer

import (
	"math"
	"strings"
	"unicode/utf8"
)

// AddedToken is an entry of tokenizer.json's "added_tokens".
type AddedToken struct {
	ID         uint32
	Content    string
	SingleWord bool // only match when not inside a word
	LStrip     bool // the match absorbs whitespace on its left
	RStrip     bool // the match absorbs whitespace on its right
	Normalized bool // matched on normalized text (else on the input)
	Special    bool // skipped by Decode(skipSpecialTokens=true)
}

// addedVocab is Hugging Face's AddedVocabulary: tokens extracted before the
// model sees the text.
type addedVocab struct {
	byContent map[string]uint32
	byID      map[uint32]*AddedToken
	// decoded is the string Decode and IDToToken give an added token: its
	// content, normalized when the token is matched on normalized text (the
	// reference keeps the normalized form in its id → token map; ids and
	// the special-token set keep the original content).
	decoded map[uint32]string
	special map[string]bool
	raw     *tokenMatcher // tokens with normalized=false, on the input
	norm    *tokenMatcher // tokens with normalized=true, on normalized text
}

func parseAddedTokens(v jval, m model, norm normalizer) (*addedVocab, error) {
	av := &addedVocab{byContent: map[string]uint32{}, byID: map[uint32]*AddedToken{}, decoded: map[uint32]string{}, special: map[string]bool{}}
	var toks []AddedToken
	if !v.null() {
		items, err := v.array()
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			o, err := it.object()
			if err != nil {
				return nil, err
			}
			var t AddedToken
			id, err := o.uint("id", 0, math.MaxUint32)
			if err != nil {
				return nil, err
			}
			if !o.has("id") {
				return nil, errAt(childPath(o.path, "id"), "missing")
			}
			t.ID = uint32(id)
			if t.Content, err = o.reqStr("content"); err != nil {
				return nil, err
			}
			for _, f := range []struct {
				key string
				dst *bool
				def bool
			}{{"single_word", &t.SingleWord, false}, {"lstrip", &t.LStrip, false}, {"rstrip", &t.RStrip, false},
				{"normalized", &t.Normalized, true}, {"special", &t.Special, false}} {
				if *f.dst, err = o.boolean(f.key, f.def); err != nil {
					return nil, err
				}
			}
			toks = append(toks, t)
		}
	}
	av.add(toks, m, norm)
	return av, nil
}

// add follows AddedVocabulary::add_tokens: special tokens are registered
// first; a token already in the model's vocabulary keeps the model's id,
// others get the next id after the largest added id (or the model size).
// The id written in the file is therefore not authoritative, exactly as in
// the reference.
func (av *addedVocab) add(toks []AddedToken, m model, norm normalizer) {
	var order []string // special tokens first, then the others
	for _, t := range toks {
		if t.Special && t.Content != "" && !av.special[t.Content] {
			av.special[t.Content] = true
			order = append(order, t.Content)
		}
	}
	var others []string
	maxID, haveMax := uint32(0), false
	vs := uint32(m.vocabSize())
	for i := range toks {
		t := toks[i]
		if t.Content == "" {
			continue
		}
		if old, ok := av.byID[av.byContent[t.Content]]; ok && *old == withID(t, old.ID) {
			continue // already added with the same options
		}
		var id uint32
		if x, ok := av.byContent[t.Content]; ok {
			id = x
		} else if x, ok := m.tokenToID(t.Content); ok {
			id = x
		} else {
			id = vs
			if haveMax && (maxID >= vs || vs == 0) {
				id = maxID + 1
			}
		}
		if !haveMax || id > maxID {
			maxID, haveMax = id, true
		}
		t.ID = id
		av.byContent[t.Content] = id
		av.byID[id] = &t
		if !av.special[t.Content] {
			others = append(others, t.Content)
		}
	}
	var rawPats, normPats []string
	var rawIDs, normIDs []uint32
	for _, c := range append(order, others...) {
		id := av.byContent[c]
		t := av.byID[id]
		if t == nil {
			continue
		}
		if t.Normalized {
			n := newNormalized(c, 0)
			if norm != nil {
				norm.normalize(n)
			}
			normPats, normIDs = append(normPats, n.text), append(normIDs, id)
			av.decoded[id] = n.text
		} else {
			rawPats, rawIDs = append(rawPats, c), append(rawIDs, id)
			av.decoded[id] = c
		}
	}
	av.raw = newTokenMatcher(rawPats, rawIDs)
	av.norm = newTokenMatcher(normPats, normIDs)
}

func withID(t AddedToken, id uint32) AddedToken { t.ID = id; return t }

// extract runs AddedVocabulary::extract_and_normalize: non-normalized added
// tokens are cut out of the input, the rest is normalized piece by piece,
// and normalized added tokens are cut out of the normalized pieces.
func (av *addedVocab) extract(norm normalizer, text string) *pretokenized {
	p := &pretokenized{pieces: []piece{{n: newNormalized(text, 0)}}}
	// The split functions below cannot fail.
	_ = p.splitPieces(func(_ int, n *normalized) ([]piece, error) {
		return av.splitWith(n, av.raw), nil
	})
	_ = p.splitPieces(func(_ int, n *normalized) ([]piece, error) {
		if norm != nil {
			norm.normalize(n)
		}
		return av.splitWith(n, av.norm), nil
	})
	return p
}

func (av *addedVocab) splitWith(n *normalized, tm *tokenMatcher) []piece {
	ms := av.findMatches(n.text, tm)
	out := make([]piece, 0, len(ms))
	for _, m := range ms {
		s := n.slice(m.start, m.end)
		if m.id >= 0 {
			// The token's string is the matched text (lstrip/rstrip spaces
			// included), as in the reference.
			out = append(out, piece{n: s, done: true, tokens: []token{{id: uint32(m.id), value: s.text, start: 0, end: len(s.text)}}})
		} else {
			out = append(out, piece{n: s})
		}
	}
	return out
}

type addedMatch struct {
	id         int64 // -1: not an added token
	start, end int
}

func (av *addedVocab) findMatches(s string, tm *tokenMatcher) []addedMatch {
	if s == "" {
		return []addedMatch{{-1, 0, 0}}
	}
	if tm == nil {
		return []addedMatch{{-1, 0, len(s)}}
	}
	var out []addedMatch
	startOffset := 0
	tm.each(s, func(start, stop int, id uint32) {
		t := av.byID[id]
		if t.SingleWord {
			startSpace := start == 0 || !endsWithWord(s[:start])
			stopSpace := stop == len(s) || !startsWithWord(s[stop:])
			if !startSpace || !stopSpace {
				return
			}
		}
		if t.LStrip {
			ns := len(strings.TrimRightFunc(s[:start], isWhitespace))
			start = max(ns, startOffset)
		}
		if t.RStrip {
			stop += len(s[stop:]) - len(strings.TrimLeftFunc(s[stop:], isWhitespace))
		}
		if startOffset < start {
			out = append(out, addedMatch{-1, startOffset, start})
		}
		out = append(out, addedMatch{int64(id), start, stop})
		startOffset = stop
	})
	if startOffset != len(s) {
		out = append(out, addedMatch{-1, startOffset, len(s)})
	}
	return out
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordChar(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordChar(r)
}

func (av *addedVocab) isSpecial(tok string) bool { return av.special[tok] }

// tokenMatcher finds added tokens leftmost-longest, non-overlapping (the
// semantics of the Aho-Corasick automaton the reference builds), with a
// byte trie walked from each candidate start.
type tokenMatcher struct {
	firstByte [256]bool
	nodes     []tmNode
}

type tmNode struct {
	kids map[byte]int32
	id   int64 // -1: no token ends here
}

func newTokenMatcher(pats []string, ids []uint32) *tokenMatcher {
	tm := &tokenMatcher{nodes: []tmNode{{kids: map[byte]int32{}, id: -1}}}
	n := 0
	for i, p := range pats {
		if p == "" {
			continue
		}
		n++
		tm.firstByte[p[0]] = true
		cur := int32(0)
		for k := 0; k < len(p); k++ {
			nx, ok := tm.nodes[cur].kids[p[k]]
			if !ok {
				nx = int32(len(tm.nodes))
				tm.nodes = append(tm.nodes, tmNode{kids: map[byte]int32{}, id: -1})
				tm.nodes[cur].kids[p[k]] = nx
			}
			cur = nx
		}
		if tm.nodes[cur].id < 0 { // the first pattern wins among equal ones
			tm.nodes[cur].id = int64(ids[i])
		}
	}
	if n == 0 {
		return nil
	}
	return tm
}

func (tm *tokenMatcher) each(s string, fn func(start, end int, id uint32)) {
	for i := 0; i < len(s); {
		if !tm.firstByte[s[i]] {
			i++
			continue
		}
		cur := int32(0)
		bestEnd, bestID := -1, int64(-1)
		for k := i; k < len(s); k++ {
			nx, ok := tm.nodes[cur].kids[s[k]]
			if !ok {
				break
			}
			cur = nx
			if tm.nodes[cur].id >= 0 {
				bestEnd, bestID = k+1, tm.nodes[cur].id
			}
		}
		if bestEnd < 0 {
			i++
			continue
		}
		fn(i, bestEnd, uint32(bestID))
		i = bestEnd
	}
}
