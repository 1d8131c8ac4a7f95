package tokenizer

import (
	"errors"
	"fmt"
	"math"
)

// TruncationStrategy says which sequence of a pair loses tokens.
type TruncationStrategy uint8

// Truncation strategies, as in Hugging Face tokenizers.
const (
	// LongestFirst removes tokens from the longer sequence first.
	LongestFirst TruncationStrategy = iota
	// OnlyFirst truncates only the first sequence.
	OnlyFirst
	// OnlySecond truncates only the second sequence.
	OnlySecond
)

func (s TruncationStrategy) String() string {
	switch s {
	case OnlyFirst:
		return "OnlyFirst"
	case OnlySecond:
		return "OnlySecond"
	}
	return "LongestFirst"
}

// Truncation limits encodings to MaxLength tokens, special tokens
// included. The tokens cut off go to Encoding.Overflowing in windows that
// overlap by Stride tokens.
type Truncation struct {
	MaxLength int
	Strategy  TruncationStrategy
	Stride    int
	Direction Direction
}

// Padding pads encodings to Length tokens, or to the longest encoding of
// the batch when Length is 0, rounded up to a multiple of PadToMultipleOf
// when that is positive.
type Padding struct {
	Length          int
	Direction       Direction
	PadToMultipleOf int
	PadID           uint32
	PadTypeID       uint32
	PadToken        string
}

var (
	errNoPair        = errors.New("truncation strategy OnlySecond needs a pair of sequences")
	errTooShortTrunc = errors.New("the sequence to truncate is too short for the requested max length")
)

// truncateEncodings is tokenizers' truncate_encodings.
func truncateEncodings(a, b *Encoding, t *Truncation) error {
	if t.MaxLength == 0 {
		if err := a.truncate(0, t.Stride, t.Direction); err != nil {
			return err
		}
		if b != nil {
			return b.truncate(0, t.Stride, t.Direction)
		}
		return nil
	}
	total := a.Len()
	if b != nil {
		total += b.Len()
	}
	if total <= t.MaxLength {
		return nil
	}
	toRemove := total - t.MaxLength
	switch t.Strategy {
	case LongestFirst:
		if b == nil {
			return a.truncate(total-toRemove, t.Stride, t.Direction)
		}
		n1, n2 := a.Len(), b.Len()
		swap := n1 > n2
		if swap {
			n1, n2 = n2, n1
		}
		if n1 > t.MaxLength {
			n2 = n1
		} else {
			n2 = max(n1, t.MaxLength-n1)
		}
		if n1+n2 > t.MaxLength {
			n1 = t.MaxLength / 2
			n2 = n1 + t.MaxLength%2
		}
		if swap {
			n1, n2 = n2, n1
		}
		if err := a.truncate(n1, t.Stride, t.Direction); err != nil {
			return err
		}
		return b.truncate(n2, t.Stride, t.Direction)
	case OnlyFirst, OnlySecond:
		target := a
		if t.Strategy == OnlySecond {
			if b == nil {
				return errNoPair
			}
			target = b
		}
		if target.Len() <= toRemove {
			return errTooShortTrunc
		}
		return target.truncate(target.Len()-toRemove, t.Stride, t.Direction)
	}
	return fmt.Errorf("unknown truncation strategy %d", t.Strategy)
}

// padEncodings is tokenizers' pad_encodings.
func padEncodings(encs []*Encoding, p *Padding) {
	if len(encs) == 0 {
		return
	}
	n := p.Length
	if n == 0 {
		for _, e := range encs {
			n = max(n, e.Len())
		}
	}
	if m := p.PadToMultipleOf; m > 0 && n%m > 0 {
		n += m - n%m
	}
	for _, e := range encs {
		e.pad(n, p.PadID, p.PadTypeID, p.PadToken, p.Direction)
	}
}

func parseDirection(o jobj, key string) (Direction, error) {
	s, err := o.str(key, "Right")
	if err != nil {
		return 0, err
	}
	switch s {
	case "Right":
		return Right, nil
	case "Left":
		return Left, nil
	}
	return 0, errAt(childPath(o.path, key), "unknown direction %q", s)
}

func parseTruncation(v jval) (*Truncation, error) {
	if v.null() {
		return nil, nil
	}
	o, err := v.object()
	if err != nil {
		return nil, err
	}
	t := &Truncation{}
	ml, err := o.uint("max_length", 0, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	if !o.has("max_length") {
		return nil, errAt(childPath(o.path, "max_length"), "missing")
	}
	st, err := o.uint("stride", 0, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	t.MaxLength, t.Stride = int(ml), int(st)
	s, err := o.str("strategy", "LongestFirst")
	if err != nil {
		return nil, err
	}
	switch s {
	case "LongestFirst":
	case "OnlyFirst":
		t.Strategy = OnlyFirst
	case "OnlySecond":
		t.Strategy = OnlySecond
	default:
		return nil, errAt(childPath(o.path, "strategy"), "unknown truncation strategy %q", s)
	}
	if t.Direction, err = parseDirection(o, "direction"); err != nil {
		return nil, err
	}
	return t, nil
}

func parsePadding(v jval) (*Padding, error) {
	if v.null() {
		return nil, nil
	}
	o, err := v.object()
	if err != nil {
		return nil, err
	}
	p := &Padding{}
	if o.has("strategy") {
		sv := o.get("strategy")
		if s, err := sv.str(); err == nil {
			if s != "BatchLongest" {
				return nil, errAt(sv.path, "unknown padding strategy %q", s)
			}
		} else {
			so, err := sv.object()
			if err != nil {
				return nil, errAt(sv.path, `expected "BatchLongest" or {"Fixed": n}`)
			}
			n, err := so.uint("Fixed", 0, math.MaxInt32)
			if err != nil {
				return nil, err
			}
			if !so.has("Fixed") || n == 0 {
				return nil, errAt(childPath(sv.path, "Fixed"), "must be a positive length")
			}
			p.Length = int(n)
		}
	}
	if p.Direction, err = parseDirection(o, "direction"); err != nil {
		return nil, err
	}
	m, err := o.uint("pad_to_multiple_of", 0, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	p.PadToMultipleOf = int(m)
	id, err := o.uint("pad_id", 0, math.MaxUint32)
	if err != nil {
		return nil, err
	}
	tid, err := o.uint("pad_type_id", 0, math.MaxUint32)
	if err != nil {
		return nil, err
	}
	p.PadID, p.PadTypeID = uint32(id), uint32(tid)
	if p.PadToken, err = o.str("pad_token", "[PAD]"); err != nil {
		return nil, err
	}
	return p, nil
}
