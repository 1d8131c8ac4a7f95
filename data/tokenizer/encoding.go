package tokenizer

import "fmt"

// Offset is a half-open range [Start, End) of the input text: Offset[0] is
// the start, Offset[1] the end. It marshals to JSON as [start, end].
type Offset [2]int

// Encoding is the result of encoding a text or a pair of texts. All slices
// have one element per token.
type Encoding struct {
	IDs    []uint32
	Tokens []string
	// Offsets are in Unicode code points of the input string, [start, end),
	// as Hugging Face's encode (char offsets) reports them; special tokens
	// and padding have [0, 0]. For a pair, the tokens of the second text
	// have offsets into the second text.
	Offsets []Offset
	// ByteOffsets are the same ranges in UTF-8 bytes of the input.
	ByteOffsets []Offset
	// WordIDs is the index of the pre-tokenized word each token comes from,
	// -1 for special tokens and padding.
	WordIDs           []int
	TypeIDs           []uint32
	SpecialTokensMask []uint32
	AttentionMask     []uint32
	// Overflowing holds the pieces cut off by truncation, each a complete
	// encoding (post-processed and padded like the main one).
	Overflowing []*Encoding

	seqRanges []seqRange
}

type seqRange struct{ seq, start, end int }

// Len is the number of tokens.
func (e *Encoding) Len() int { return len(e.IDs) }

// SequenceIDs returns, per token, 0 for the first text, 1 for the second,
// and -1 for tokens that belong to neither (special tokens, padding), like
// Hugging Face's get_sequence_ids.
func (e *Encoding) SequenceIDs() []int {
	out := make([]int, len(e.IDs))
	if len(e.seqRanges) == 0 {
		return out // one sequence covering everything
	}
	for i := range out {
		out[i] = -1
	}
	for _, r := range e.seqRanges {
		for i := r.start; i < r.end && i < len(out); i++ {
			out[i] = r.seq
		}
	}
	return out
}

func (e *Encoding) setSequenceID(seq int) {
	for i := range e.seqRanges {
		if e.seqRanges[i].seq == seq {
			e.seqRanges[i] = seqRange{seq, 0, len(e.IDs)}
			return
		}
	}
	e.seqRanges = append(e.seqRanges, seqRange{seq, 0, len(e.IDs)})
}

func (e *Encoding) setTypeIDs(t uint32) {
	for i := range e.TypeIDs {
		e.TypeIDs[i] = t
	}
}

func (e *Encoding) clone() *Encoding {
	c := &Encoding{
		IDs:               append([]uint32(nil), e.IDs...),
		Tokens:            append([]string(nil), e.Tokens...),
		Offsets:           append([]Offset(nil), e.Offsets...),
		ByteOffsets:       append([]Offset(nil), e.ByteOffsets...),
		WordIDs:           append([]int(nil), e.WordIDs...),
		TypeIDs:           append([]uint32(nil), e.TypeIDs...),
		SpecialTokensMask: append([]uint32(nil), e.SpecialTokensMask...),
		AttentionMask:     append([]uint32(nil), e.AttentionMask...),
		seqRanges:         append([]seqRange(nil), e.seqRanges...),
	}
	for _, o := range e.Overflowing {
		c.Overflowing = append(c.Overflowing, o.clone())
	}
	return c
}

// mergeWith is Encoding::merge_with (growing_offsets false): pair is
// appended, and the overflowing pieces are combined the way the reference
// combines them: each of e's with pair (and with each of pair's), then e
// with each of pair's. pair is not modified.
func (e *Encoding) mergeWith(pair *Encoding) {
	var overflow []*Encoding
	for _, so := range e.Overflowing {
		n := so.clone()
		n.mergeWith(pair)
		overflow = append(overflow, n)
		for _, po := range pair.Overflowing {
			n := so.clone()
			n.mergeWith(po)
			overflow = append(overflow, n)
		}
	}
	for _, po := range pair.Overflowing {
		n := e.clone()
		n.mergeWith(po)
		overflow = append(overflow, n)
	}
	e.appendEncoding(pair)
	e.Overflowing = overflow
}

// mergeAll is Encoding::merge: the encodings concatenated in order.
func mergeAll(encs []*Encoding) *Encoding {
	out := &Encoding{}
	for _, e := range encs {
		out.mergeWith(e)
	}
	return out
}

// appendEncoding concatenates the token fields of o after e's.
func (e *Encoding) appendEncoding(o *Encoding) {
	n := len(e.IDs)
	for _, r := range o.seqRanges {
		e.seqRanges = append(e.seqRanges, seqRange{r.seq, n + r.start, n + r.end})
	}
	e.IDs = append(e.IDs, o.IDs...)
	e.Tokens = append(e.Tokens, o.Tokens...)
	e.Offsets = append(e.Offsets, o.Offsets...)
	e.ByteOffsets = append(e.ByteOffsets, o.ByteOffsets...)
	e.WordIDs = append(e.WordIDs, o.WordIDs...)
	e.TypeIDs = append(e.TypeIDs, o.TypeIDs...)
	e.SpecialTokensMask = append(e.SpecialTokensMask, o.SpecialTokensMask...)
	e.AttentionMask = append(e.AttentionMask, o.AttentionMask...)
}

func (e *Encoding) slice(a, b int) *Encoding {
	return &Encoding{
		IDs:               append([]uint32(nil), e.IDs[a:b]...),
		Tokens:            append([]string(nil), e.Tokens[a:b]...),
		Offsets:           append([]Offset(nil), e.Offsets[a:b]...),
		ByteOffsets:       append([]Offset(nil), e.ByteOffsets[a:b]...),
		WordIDs:           append([]int(nil), e.WordIDs[a:b]...),
		TypeIDs:           append([]uint32(nil), e.TypeIDs[a:b]...),
		SpecialTokensMask: append([]uint32(nil), e.SpecialTokensMask[a:b]...),
		AttentionMask:     append([]uint32(nil), e.AttentionMask[a:b]...),
	}
}

// Direction is the side truncation or padding applies to.
type Direction uint8

// Directions.
const (
	Right Direction = iota
	Left
)

func (d Direction) String() string {
	if d == Left {
		return "Left"
	}
	return "Right"
}

// truncate keeps maxLen tokens and moves the rest into overflowing windows
// that overlap by stride tokens (Encoding::truncate).
func (e *Encoding) truncate(maxLen, stride int, dir Direction) error {
	n := len(e.IDs)
	if maxLen >= n {
		return nil
	}
	if maxLen == 0 {
		whole := *e
		*e = Encoding{Overflowing: []*Encoding{&whole}}
		return nil
	}
	if stride >= maxLen {
		return fmt.Errorf("truncation stride %d must be smaller than the room for the text, %d tokens", stride, maxLen)
	}
	step := maxLen - stride
	var parts [][2]int
	if dir == Right {
		for start := 0; start < n; start += step {
			stop := min(start+maxLen, n)
			parts = append(parts, [2]int{start, stop})
			if stop == n {
				break
			}
		}
	} else {
		for stop := n; stop > 0; stop -= step {
			start := max(stop-maxLen, 0)
			parts = append(parts, [2]int{start, stop})
			if start == 0 {
				break
			}
		}
	}
	first := e.slice(parts[0][0], parts[0][1])
	for _, p := range parts[1:] {
		first.Overflowing = append(first.Overflowing, e.slice(p[0], p[1]))
	}
	*e = *first
	return nil
}

// pad extends the encoding to target tokens (Encoding::pad), overflowing
// pieces included.
func (e *Encoding) pad(target int, id, typeID uint32, tok string, dir Direction) {
	for _, o := range e.Overflowing {
		o.pad(target, id, typeID, tok, dir)
	}
	n := target - len(e.IDs)
	if n <= 0 {
		return
	}
	rep := func(k int) ([]uint32, []string, []Offset, []int, []uint32, []uint32, []uint32) {
		ids, toks, offs, words, types, special, att := make([]uint32, k), make([]string, k), make([]Offset, k), make([]int, k), make([]uint32, k), make([]uint32, k), make([]uint32, k)
		for i := 0; i < k; i++ {
			ids[i], toks[i], words[i], types[i], special[i] = id, tok, -1, typeID, 1
		}
		return ids, toks, offs, words, types, special, att
	}
	ids, toks, offs, words, types, special, att := rep(n)
	boffs := make([]Offset, n)
	if dir == Left {
		e.IDs = append(ids, e.IDs...)
		e.Tokens = append(toks, e.Tokens...)
		e.Offsets = append(offs, e.Offsets...)
		e.ByteOffsets = append(boffs, e.ByteOffsets...)
		e.WordIDs = append(words, e.WordIDs...)
		e.TypeIDs = append(types, e.TypeIDs...)
		e.SpecialTokensMask = append(special, e.SpecialTokensMask...)
		e.AttentionMask = append(att, e.AttentionMask...)
		for i := range e.seqRanges {
			e.seqRanges[i].start += n
			e.seqRanges[i].end += n
		}
		return
	}
	e.IDs = append(e.IDs, ids...)
	e.Tokens = append(e.Tokens, toks...)
	e.Offsets = append(e.Offsets, offs...)
	e.ByteOffsets = append(e.ByteOffsets, boffs...)
	e.WordIDs = append(e.WordIDs, words...)
	e.TypeIDs = append(e.TypeIDs, types...)
	e.SpecialTokensMask = append(e.SpecialTokensMask, special...)
	e.AttentionMask = append(e.AttentionMask, att...)
}
