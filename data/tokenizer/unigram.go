package tokenizer

import (
	"fmt"
	"math"
	"sort"
	"unicode/utf8"
)

// unigram is the SentencePiece Unigram model: the segmentation with the best
// total score (Viterbi), unknown characters scored min_score - 10 and fused.
type unigram struct {
	pieces       []string
	scores       []float64
	ids          map[string]uint32 // last duplicate wins, as in the reference
	unkID        int               // -1: none
	byteFallback bool
	byteIDs      [256]int64
	minScore     float64
	trie         pieceTrie
	cache        *wordCache
}

// unkPenalty is sentencepiece's kUnkPenalty.
const unkPenalty = 10.0

func parseUnigram(o jobj, opts loadOptions) (model, error) {
	items, err := o.get("vocab").array()
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, errAt(childPath(o.path, "vocab"), "is empty")
	}
	u := &unigram{ids: make(map[string]uint32, len(items)), unkID: -1, minScore: math.Inf(1)}
	for i, it := range items {
		pair, err := it.array()
		if err != nil {
			return nil, err
		}
		if len(pair) != 2 {
			return nil, errAt(it.path, "expected [piece, score], got %d elements", len(pair))
		}
		p, err := pair[0].str()
		if err != nil {
			return nil, err
		}
		s, err := pair[1].float()
		if err != nil {
			return nil, err
		}
		u.pieces = append(u.pieces, p)
		u.scores = append(u.scores, s)
		u.ids[p] = uint32(i)
		u.minScore = math.Min(u.minScore, s)
	}
	if o.has("unk_id") {
		n, err := o.uint("unk_id", 0, math.MaxUint32)
		if err != nil {
			return nil, err
		}
		if n >= uint64(len(u.pieces)) {
			return nil, errAt(childPath(o.path, "unk_id"), "%d is out of range: the vocabulary has %d pieces", n, len(u.pieces))
		}
		u.unkID = int(n)
	}
	if u.byteFallback, err = o.boolean("byte_fallback", false); err != nil {
		return nil, err
	}
	for b := range u.byteIDs {
		u.byteIDs[b] = -1
		if id, ok := u.ids[fmt.Sprintf("<0x%02X>", b)]; ok {
			u.byteIDs[b] = int64(id)
		}
	}
	u.trie = buildPieceTrie(u.pieces, u.ids)
	u.cache = newWordCache(opts.cacheCapacity)
	return u, nil
}

func (u *unigram) tokenToID(s string) (uint32, bool) { id, ok := u.ids[s]; return id, ok }
func (u *unigram) idToToken(id uint32) (string, bool) {
	if int64(id) < int64(len(u.pieces)) {
		return u.pieces[id], true
	}
	return "", false
}
func (u *unigram) vocabSize() int      { return len(u.pieces) }
func (u *unigram) distinctTokens() int { return len(u.ids) }

func (u *unigram) tokenize(s string, dst []token) ([]token, error) {
	if s == "" {
		return dst, nil
	}
	ends, ok := u.cache.get(s)
	if !ok {
		var err error
		if ends, err = u.segment(s); err != nil {
			return nil, err
		}
		u.cache.set(s, ends)
	}
	out := dst
	start := 0
	for _, e32 := range ends {
		end := int(e32)
		str := s[start:end]
		if id, ok := u.ids[str]; ok {
			out = append(out, token{id: id, value: u.pieces[id], start: start, end: end})
			start = end
			continue
		}
		if u.byteFallback {
			all := true
			for k := 0; k < len(str); k++ {
				if u.byteIDs[str[k]] < 0 {
					all = false
					break
				}
			}
			if all {
				for k := 0; k < len(str); k++ {
					id := uint32(u.byteIDs[str[k]])
					out = append(out, token{id: id, value: u.pieces[id], start: start, end: end})
				}
				start = end
				continue
			}
		}
		if u.unkID < 0 {
			return nil, fmt.Errorf("unigram: %w", errMissingUnk)
		}
		// The unknown token keeps the text it stands for as its string.
		out = append(out, token{id: uint32(u.unkID), value: str, start: start, end: end})
		start = end
	}
	return out, nil
}

// segment runs the Viterbi search and returns the end offset of each piece,
// consecutive unknown characters fused into one piece.
func (u *unigram) segment(s string) ([]uint32, error) {
	type node struct {
		id    int
		score float64
		start int // -1: unreached
	}
	unkScore := u.minScore - unkPenalty
	best := make([]node, len(s)+1)
	for i := range best {
		best[i].start = -1
	}
	for start := 0; start < len(s); {
		here := best[start].score
		_, mblen := utf8.DecodeRuneInString(s[start:])
		single := false
		u.trie.prefixes(s, start, func(end int, id uint32) {
			t := &best[end]
			cand := u.scores[id] + here
			if t.start < 0 || cand > t.score {
				t.score, t.start, t.id = cand, start, int(id)
			}
			if end-start == mblen {
				single = true
			}
		})
		if !single {
			if u.unkID < 0 {
				return nil, fmt.Errorf("unigram: %w", errMissingUnk)
			}
			t := &best[start+mblen]
			cand := unkScore + here
			if t.start < 0 || cand > t.score {
				t.score, t.start, t.id = cand, start, u.unkID
			}
		}
		start += mblen
	}
	var rev []uint32
	pendingUnkEnd := -1
	for end := len(s); end > 0; {
		n := best[end]
		if u.unkID >= 0 && n.id == u.unkID {
			if pendingUnkEnd < 0 {
				pendingUnkEnd = end
			}
		} else {
			if pendingUnkEnd >= 0 {
				rev = append(rev, uint32(pendingUnkEnd))
				pendingUnkEnd = -1
			}
			rev = append(rev, uint32(end))
		}
		end = n.start
	}
	if pendingUnkEnd >= 0 {
		rev = append(rev, uint32(pendingUnkEnd))
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev, nil
}

// pieceTrie is a byte trie of the vocabulary in flat arrays: node i's edges
// are labels[first[i]:first[i+1]] (sorted) leading to to[...].
type pieceTrie struct {
	root   [256]int32 // child of the root per byte, -1 if none
	first  []int32
	labels []byte
	to     []int32
	id     []int64 // piece id ending at the node, -1 if none
}

func buildPieceTrie(pieces []string, ids map[string]uint32) pieceTrie {
	type tmp struct {
		kids map[byte]int32
		id   int64
	}
	nodes := []tmp{{kids: map[byte]int32{}, id: -1}}
	for _, p := range pieces {
		cur := int32(0)
		for i := 0; i < len(p); i++ {
			nx, ok := nodes[cur].kids[p[i]]
			if !ok {
				nx = int32(len(nodes))
				nodes = append(nodes, tmp{kids: map[byte]int32{}, id: -1})
				nodes[cur].kids[p[i]] = nx
			}
			cur = nx
		}
		if cur != 0 {
			nodes[cur].id = int64(ids[p])
		}
	}
	t := pieceTrie{first: make([]int32, len(nodes)+1), id: make([]int64, len(nodes))}
	for i := range t.root {
		t.root[i] = -1
	}
	for i, n := range nodes {
		t.first[i] = int32(len(t.labels))
		t.id[i] = n.id
		keys := make([]int, 0, len(n.kids))
		for b := range n.kids {
			keys = append(keys, int(b))
		}
		sort.Ints(keys)
		for _, b := range keys {
			t.labels = append(t.labels, byte(b))
			t.to = append(t.to, n.kids[byte(b)])
			if i == 0 {
				t.root[b] = n.kids[byte(b)]
			}
		}
	}
	t.first[len(nodes)] = int32(len(t.labels))
	return t
}

// prefixes calls fn(end, id) for every vocabulary piece that s[start:end]
// equals, shortest first.
func (t *pieceTrie) prefixes(s string, start int, fn func(end int, id uint32)) {
	if start >= len(s) {
		return
	}
	cur := t.root[s[start]]
	for i := start + 1; cur >= 0; i++ {
		if t.id[cur] >= 0 {
			fn(i, uint32(t.id[cur]))
		}
		if i >= len(s) {
			return
		}
		lo, hi := int(t.first[cur]), int(t.first[cur+1])
		b := s[i]
		cur = -1
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			switch {
			case t.labels[m] < b:
				lo = m + 1
			case t.labels[m] > b:
				hi = m
			default:
				cur = t.to[m]
				lo = hi
			}
		}
	}
}
