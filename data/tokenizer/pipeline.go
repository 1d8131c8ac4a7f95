package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Pipeline is the pure-Go tokenizer loaded from a tokenizer.json: added
// tokens, normalizer, pre-tokenizer, model, post-processor and decoder, as
// in Hugging Face's TokenizerImpl. It is immutable once loaded (its caches
// are internally synchronised) and safe for concurrent use.
type Pipeline struct {
	normalizer     normalizer
	pre            preTokenizer
	model          model
	post           postProcessor
	dec            decoder
	added          *addedVocab
	truncation     *Truncation
	padding        *Padding
	vocabWithAdded int
}

var _ Tokenizer = (*Pipeline)(nil)

// Truncation returns the truncation in effect (nil: none).
func (p *Pipeline) Truncation() *Truncation {
	if p.truncation == nil {
		return nil
	}
	t := *p.truncation
	return &t
}

// Padding returns the padding in effect (nil: none).
func (p *Pipeline) Padding() *Padding {
	if p.padding == nil {
		return nil
	}
	x := *p.padding
	return &x
}

// WithTruncation returns a tokenizer that shares p's tables and truncates
// as t says (nil: no truncation). p itself is unchanged.
func (p *Pipeline) WithTruncation(t *Truncation) (*Pipeline, error) {
	q := *p
	if t != nil {
		if t.MaxLength < 0 || t.Stride < 0 {
			return nil, fmt.Errorf("truncation: negative MaxLength or Stride")
		}
		c := *t
		q.truncation = &c
	} else {
		q.truncation = nil
	}
	return &q, nil
}

// WithPadding returns a tokenizer that shares p's tables and pads as pd
// says (nil: no padding). p itself is unchanged.
func (p *Pipeline) WithPadding(pd *Padding) (*Pipeline, error) {
	q := *p
	if pd != nil {
		if pd.Length < 0 || pd.PadToMultipleOf < 0 {
			return nil, fmt.Errorf("padding: negative Length or PadToMultipleOf")
		}
		c := *pd
		q.padding = &c
	} else {
		q.padding = nil
	}
	return &q, nil
}

// AddedTokens returns the added tokens with the ids they were given.
func (p *Pipeline) AddedTokens() []AddedToken {
	out := make([]AddedToken, 0, len(p.added.byID))
	for _, t := range p.added.byID {
		out = append(out, *t)
	}
	sortAdded(out)
	return out
}

func sortAdded(ts []AddedToken) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].ID < ts[j-1].ID; j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

// Encode implements Tokenizer.
func (p *Pipeline) Encode(text string, addSpecialTokens bool) (*Encoding, error) {
	return p.encode(text, nil, addSpecialTokens)
}

// EncodePair implements Tokenizer.
func (p *Pipeline) EncodePair(text, pair string, addSpecialTokens bool) (*Encoding, error) {
	return p.encode(text, &pair, addSpecialTokens)
}

func (p *Pipeline) encode(a string, b *string, add bool) (*Encoding, error) {
	ea, err := p.encodeSequence(a, 0)
	if err != nil {
		return nil, err
	}
	var eb *Encoding
	if b != nil {
		if eb, err = p.encodeSequence(*b, 1); err != nil {
			return nil, err
		}
	}
	return p.postProcess(ea, eb, add)
}

// encodeSequence runs everything up to the model on one text and builds
// its encoding (encode_single_sequence + PreTokenizedString::into_encoding).
func (p *Pipeline) encodeSequence(text string, typeID uint32) (*Encoding, error) {
	if !utf8.ValidString(text) {
		return nil, ErrInvalidUTF8
	}
	if len(text) > maxInputBytes {
		return nil, fmt.Errorf("input of %d bytes is larger than the %d bytes supported", len(text), maxInputBytes)
	}
	pt := p.added.extract(p.normalizer, text)
	if p.pre != nil {
		p.pre.preTokenize(pt)
	}
	first, last, perPiece, err := p.tokenizePieces(pt, typeID)
	if err != nil {
		return nil, err
	}
	est := len(text)/3 + 4
	e := &Encoding{
		IDs:         make([]uint32, 0, est),
		Tokens:      make([]string, 0, est),
		Offsets:     make([]Offset, 0, est),
		ByteOffsets: make([]Offset, 0, est),
		WordIDs:     make([]int, 0, est),
	}
	conv := newCharConverter(text)
	var scratch []token
	for w := first; w < last; w++ {
		pc := &pt.pieces[w]
		var toks []token
		switch {
		case pc.done:
			toks = pc.tokens
		case perPiece != nil:
			toks = perPiece[w]
		default:
			if scratch, err = p.model.tokenize(pc.n.text, scratch[:0]); err != nil {
				return nil, err
			}
			toks = scratch
		}
		for _, t := range toks {
			s := pc.n.toOriginal(t.start, t.end)
			e.IDs = append(e.IDs, t.id)
			e.Tokens = append(e.Tokens, t.value)
			e.ByteOffsets = append(e.ByteOffsets, Offset{s.start, s.end})
			e.Offsets = append(e.Offsets, conv.convert(s))
			e.WordIDs = append(e.WordIDs, w-first)
		}
	}
	n := len(e.IDs)
	e.TypeIDs, e.SpecialTokensMask, e.AttentionMask = make([]uint32, n), make([]uint32, n), make([]uint32, n)
	for i := 0; i < n; i++ {
		e.TypeIDs[i], e.AttentionMask[i] = typeID, 1
	}
	return e, nil
}

// tokenizePieces decides which pieces of a sequence are kept, [first,
// last). Without truncation that is all of them, tokenized later on the
// fly. With truncation, the reference stops early: pieces are taken whole,
// from the start (or the end, truncating on the left), until they hold at
// least max_length tokens, and only the sequence(s) the strategy may
// truncate are cut that way (both for LongestFirst, the first for
// OnlyFirst, the second for OnlySecond). Word ids then count from the
// first kept piece. perPiece holds the tokens of the pieces tokenized here.
func (p *Pipeline) tokenizePieces(pt *pretokenized, seq uint32) (first, last int, perPiece [][]token, err error) {
	t := p.truncation
	last = len(pt.pieces)
	if t == nil || (t.Strategy == OnlyFirst && seq != 0) || (t.Strategy == OnlySecond && seq != 1) {
		return 0, last, nil, nil
	}
	perPiece = make([][]token, len(pt.pieces))
	tok := func(i int) (int, error) {
		pc := &pt.pieces[i]
		if pc.done {
			return len(pc.tokens), nil
		}
		toks, err := p.model.tokenize(pc.n.text, nil)
		perPiece[i] = toks
		return len(toks), err
	}
	count := 0
	if t.Direction == Left {
		first = last
		for first > 0 && count < t.MaxLength {
			first--
			n, err := tok(first)
			if err != nil {
				return 0, 0, nil, err
			}
			count += n
		}
		return first, last, perPiece, nil
	}
	last = 0
	for last < len(pt.pieces) && count < t.MaxLength {
		n, err := tok(last)
		if err != nil {
			return 0, 0, nil, err
		}
		count += n
		last++
	}
	return 0, last, perPiece, nil
}

// charConverter is BytesToCharOffsetConverter: byte offsets to code point
// offsets, with its handling of ranges that reach the end of the text.
type charConverter struct {
	ascii bool
	n     int
	b2c   []int32 // code point index of each byte
}

func newCharConverter(s string) *charConverter {
	c := &charConverter{ascii: isASCII(s), n: len(s)}
	if !c.ascii {
		c.b2c = make([]int32, len(s))
		ci := int32(0)
		for i := 0; i < len(s); {
			_, size := utf8.DecodeRuneInString(s[i:])
			for k := 0; k < size; k++ {
				c.b2c[i+k] = ci
			}
			ci++
			i += size
		}
	}
	return c
}

func (c *charConverter) at(b int) int {
	if c.ascii {
		return b
	}
	return int(c.b2c[b])
}

func (c *charConverter) convert(s span) Offset {
	if s.start < 0 || s.start >= c.n {
		return Offset{s.start, s.end} // not convertible: kept as is
	}
	start := c.at(s.start)
	if s.end >= 0 && s.end < c.n {
		return Offset{start, c.at(s.end)}
	}
	last := start + 1
	if s.end-1 >= 0 && s.end-1 < c.n {
		last = c.at(s.end - 1)
	}
	return Offset{start, last + 1}
}

// postProcess is TokenizerImpl::post_process: truncation, special tokens,
// padding. Overflowing windows travel with their encoding through the
// post-processor and are combined as Encoding::merge_with combines them.
func (p *Pipeline) postProcess(a, b *Encoding, add bool) (*Encoding, error) {
	if t := p.truncation; t != nil {
		tt := *t
		if n := p.addedCount(b != nil); add && n > 0 {
			if tt.MaxLength < n {
				return nil, fmt.Errorf("truncation max length %d is smaller than the %d special tokens added", tt.MaxLength, n)
			}
			tt.MaxLength -= n
		}
		if err := truncateEncodings(a, b, &tt); err != nil {
			return nil, err
		}
	}
	main, err := p.process(a, b, add)
	if err != nil {
		return nil, err
	}
	if p.padding != nil {
		padEncodings([]*Encoding{main}, p.padding)
	}
	return main, nil
}

func (p *Pipeline) addedCount(pair bool) int {
	if p.post == nil {
		return 0
	}
	return p.post.addedTokens(pair)
}

// process applies the post-processor to one encoding or a pair and merges
// the result (PostProcessor::process, or default_process without one).
func (p *Pipeline) process(a, b *Encoding, add bool) (*Encoding, error) {
	encs := []*Encoding{a}
	if b != nil {
		encs = append(encs, b)
	}
	if p.post == nil {
		if b == nil {
			return a, nil
		}
		out := &Encoding{}
		for i, e := range encs {
			e.setSequenceID(i)
			out.mergeWith(e)
		}
		return out, nil
	}
	for i, e := range encs {
		e.setSequenceID(i)
		for _, o := range e.Overflowing {
			o.setSequenceID(i)
		}
		e.setTypeIDs(uint32(i)) // the overflowing pieces keep theirs, as in the reference
	}
	res, err := p.post.processEncodings(encs, add)
	if err != nil {
		return nil, err
	}
	return mergeAll(res), nil
}

// Decode implements Tokenizer.
func (p *Pipeline) Decode(ids []uint32, skipSpecialTokens bool) (string, error) {
	toks := make([]string, 0, len(ids))
	for _, id := range ids {
		var s string
		if d, ok := p.added.decoded[id]; ok {
			s = d
		} else if m, ok := p.model.idToToken(id); ok {
			s = m
		} else {
			continue
		}
		if skipSpecialTokens && p.added.isSpecial(s) {
			continue
		}
		toks = append(toks, s)
	}
	if p.dec == nil {
		return strings.Join(toks, " "), nil
	}
	return strings.Join(p.dec.decodeChain(toks), ""), nil
}

// TokenToID implements Tokenizer.
func (p *Pipeline) TokenToID(token string) (uint32, bool) {
	if id, ok := p.added.byContent[token]; ok {
		return id, true
	}
	return p.model.tokenToID(token)
}

// IDToToken implements Tokenizer.
func (p *Pipeline) IDToToken(id uint32) (string, bool) {
	if d, ok := p.added.decoded[id]; ok {
		return d, true
	}
	return p.model.idToToken(id)
}

// VocabSize implements Tokenizer.
func (p *Pipeline) VocabSize(withAddedTokens bool) int {
	if withAddedTokens {
		return p.vocabWithAdded
	}
	return p.model.vocabSize()
}

// Close implements Tokenizer; the pure-Go tokenizer holds no resources.
func (p *Pipeline) Close() error { return nil }
