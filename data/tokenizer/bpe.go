package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// bpe is Hugging Face's BPE model: characters (or byte-fallback tokens) of a
// word are merged pairwise, lowest merge rank first, leftmost first.
type bpe struct {
	vocab        map[string]uint32
	ids          idTable
	merges       map[uint64]mergeVal
	unk          string
	hasUnk       bool
	prefix       string // continuing_subword_prefix
	suffix       string // end_of_word_suffix
	fuseUnk      bool
	byteFallback bool
	ignoreMerges bool
	byteIDs      [256]int64 // id of "<0xXX>", -1 when absent
	cache        *wordCache
}

type mergeVal struct{ rank, id uint32 }

func pairKey(a, b uint32) uint64 { return uint64(a)<<32 | uint64(b) }

func parseBPE(o jobj, opts loadOptions) (model, error) {
	m := &bpe{}
	if !o.has("vocab") {
		return nil, errAt(childPath(o.path, "vocab"), "missing")
	}
	vocab, err := parseVocabMap(o.get("vocab"))
	if err != nil {
		return nil, err
	}
	m.vocab, m.ids = vocab, newIDTable(vocab)
	if o.has("dropout") {
		p, err := o.get("dropout").float()
		if err != nil {
			return nil, err
		}
		if p != 0 {
			return nil, errAt(childPath(o.path, "dropout"), "BPE dropout %v: %w (only null or 0)", p, ErrUnsupported)
		}
	}
	if u, err := o.optStr("unk_token"); err != nil {
		return nil, err
	} else if u != nil {
		m.unk, m.hasUnk = *u, true
	}
	if m.prefix, err = o.str("continuing_subword_prefix", ""); err != nil {
		return nil, err
	}
	if m.suffix, err = o.str("end_of_word_suffix", ""); err != nil {
		return nil, err
	}
	if m.fuseUnk, err = o.boolean("fuse_unk", false); err != nil {
		return nil, err
	}
	if m.byteFallback, err = o.boolean("byte_fallback", false); err != nil {
		return nil, err
	}
	if m.ignoreMerges, err = o.boolean("ignore_merges", false); err != nil {
		return nil, err
	}
	for b := range m.byteIDs {
		m.byteIDs[b] = -1
		if id, ok := vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			m.byteIDs[b] = int64(id)
		}
	}
	if !o.has("merges") {
		return nil, errAt(childPath(o.path, "merges"), "missing")
	}
	if err := m.parseMerges(o.get("merges")); err != nil {
		return nil, err
	}
	m.cache = newWordCache(opts.cacheCapacity)
	return m, nil
}

// parseMerges accepts both layouts: "a b" strings (legacy, where lines
// starting with "#version" are skipped) and ["a", "b"] pairs.
func (m *bpe) parseMerges(v jval) error {
	items, err := v.array()
	if err != nil {
		return err
	}
	m.merges = make(map[uint64]mergeVal, len(items))
	rank := uint32(0)
	for _, it := range items {
		var a, b string
		if len(it.raw) > 0 && it.raw[0] == '"' {
			s, err := it.str()
			if err != nil {
				return err
			}
			if strings.HasPrefix(s, "#version") {
				continue
			}
			parts := strings.Split(s, " ")
			if len(parts) != 2 {
				return errAt(it.path, "merge %q must be two tokens separated by one space", s)
			}
			a, b = parts[0], parts[1]
		} else {
			pair, err := it.array()
			if err != nil {
				return errAt(it.path, "expected a \"a b\" string or a [\"a\", \"b\"] pair, got %s", kind(it.raw))
			}
			if len(pair) != 2 {
				return errAt(it.path, "a merge pair must have 2 tokens, got %d", len(pair))
			}
			if a, err = pair[0].str(); err != nil {
				return err
			}
			if b, err = pair[1].str(); err != nil {
				return err
			}
		}
		ida, ok := m.vocab[a]
		if !ok {
			return errAt(it.path, "token %q is not in model.vocab", a)
		}
		idb, ok := m.vocab[b]
		if !ok {
			return errAt(it.path, "token %q is not in model.vocab", b)
		}
		if len(b) < len(m.prefix) {
			return errAt(it.path, "token %q is shorter than continuing_subword_prefix %q", b, m.prefix)
		}
		merged := a + b[len(m.prefix):]
		idm, ok := m.vocab[merged]
		if !ok {
			return errAt(it.path, "merged token %q is not in model.vocab", merged)
		}
		// A repeated pair keeps its last rank, as Hugging Face's map does.
		m.merges[pairKey(ida, idb)] = mergeVal{rank: rank, id: idm}
		rank++
	}
	return nil
}

func (m *bpe) tokenToID(s string) (uint32, bool)  { id, ok := m.vocab[s]; return id, ok }
func (m *bpe) idToToken(id uint32) (string, bool) { return m.ids.get(id) }
func (m *bpe) vocabSize() int                     { return len(m.vocab) }
func (m *bpe) distinctTokens() int                { return len(m.vocab) }

// symbol is one unit of a word being merged; len 0 marks a merged-away one.
type symbol struct {
	id         uint32
	prev, next int32
	len        int32
}

func (m *bpe) tokenize(word string, dst []token) ([]token, error) {
	if word == "" {
		return dst, nil
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[word]; ok {
			v, _ := m.ids.get(id)
			return append(dst, token{id: id, value: v, start: 0, end: len(word)}), nil
		}
	}
	packed, ok := m.cache.get(word)
	if !ok {
		syms, err := m.mergeWord(word)
		if err != nil {
			return nil, err
		}
		packed = make([]uint32, 0, 2*len(syms))
		for _, s := range syms {
			packed = append(packed, s.id, uint32(s.len))
		}
		m.cache.set(word, packed)
	}
	pos := 0
	for i := 0; i < len(packed); i += 2 {
		id, n := packed[i], int(packed[i+1])
		v, _ := m.ids.get(id)
		dst = append(dst, token{id: id, value: v, start: pos, end: pos + n})
		pos += n
	}
	return dst, nil
}

// mergeWord is BPE::merge_word followed by Word::merge_all.
func (m *bpe) mergeWord(w string) ([]symbol, error) {
	syms := make([]symbol, 0, len(w))
	add := func(id uint32, n int) {
		i := int32(len(syms))
		if i > 0 {
			syms[i-1].next = i
		}
		syms = append(syms, symbol{id: id, prev: i - 1, next: -1, len: int32(n)})
	}
	var unkID uint32
	unkLen, haveUnk := 0, false
	for i := 0; i < len(w); {
		size := 1
		if w[i] >= utf8.RuneSelf {
			_, size = utf8.DecodeRuneInString(w[i:])
		}
		s := w[i : i+size]
		if i > 0 && m.prefix != "" {
			s = m.prefix + s
		}
		if i+size >= len(w) && m.suffix != "" {
			s += m.suffix
		}
		i += size
		if id, ok := m.vocab[s]; ok {
			if haveUnk {
				add(unkID, unkLen)
				haveUnk = false
			}
			add(id, size)
			continue
		}
		if m.byteFallback {
			all := true
			for k := 0; k < len(s); k++ {
				if m.byteIDs[s[k]] < 0 {
					all = false
					break
				}
			}
			if all {
				// The pending unknown token is not flushed here, as in the
				// reference implementation.
				for k := 0; k < len(s); k++ {
					add(uint32(m.byteIDs[s[k]]), 1)
				}
				continue
			}
		}
		if !m.hasUnk {
			continue // no unk token: the character is dropped
		}
		switch {
		case haveUnk && m.fuseUnk:
			unkLen += size
		default:
			id, ok := m.vocab[m.unk]
			if !ok {
				return nil, fmt.Errorf("BPE: unk_token %q is not in the vocabulary: %w", m.unk, errMissingUnk)
			}
			if haveUnk {
				add(unkID, unkLen)
			}
			unkID, unkLen, haveUnk = id, size, true
		}
	}
	if haveUnk {
		add(unkID, unkLen)
	}
	if len(syms) < 2 {
		return syms, nil
	}
	m.mergeAll(syms)
	out := syms[:0]
	for _, s := range syms {
		if s.len != 0 {
			out = append(out, s)
		}
	}
	return out, nil
}

type mergeItem struct {
	rank, id uint32
	pos      int32
}

func (a mergeItem) less(b mergeItem) bool {
	if a.rank != b.rank {
		return a.rank < b.rank
	}
	return a.pos < b.pos
}

// mergeHeap is a binary min-heap of candidate merges (rank, then position).
type mergeHeap []mergeItem

func (h *mergeHeap) push(x mergeItem) {
	*h = append(*h, x)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *mergeHeap) pop() mergeItem {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, small := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].less(s[small]) {
			small = l
		}
		if r < len(s) && s[r].less(s[small]) {
			small = r
		}
		if small == i {
			break
		}
		s[i], s[small] = s[small], s[i]
		i = small
	}
	*h = s
	return top
}

// mergeAll applies merges in rank order, as Word::merge_all: entries made
// stale by earlier merges are detected and skipped when popped.
func (m *bpe) mergeAll(syms []symbol) {
	h := make(mergeHeap, 0, len(syms))
	for i := 0; i+1 < len(syms); i++ {
		if mv, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h.push(mergeItem{rank: mv.rank, id: mv.id, pos: int32(i)})
		}
	}
	for len(h) > 0 {
		top := h.pop()
		cur := &syms[top.pos]
		if cur.len == 0 || cur.next == -1 {
			continue
		}
		nextPos := cur.next
		right := syms[nextPos]
		if mv, ok := m.merges[pairKey(cur.id, right.id)]; !ok || mv.id != top.id {
			continue
		}
		cur.id = top.id
		cur.len += right.len
		cur.next = right.next
		syms[nextPos].len = 0
		if right.next >= 0 && int(right.next) < len(syms) {
			syms[right.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if mv, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				h.push(mergeItem{rank: mv.rank, id: mv.id, pos: cur.prev})
			}
		}
		if cur.next >= 0 && int(cur.next) < len(syms) {
			if mv, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				h.push(mergeItem{rank: mv.rank, id: mv.id, pos: top.pos})
			}
		}
	}
}
