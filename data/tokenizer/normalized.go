package tokenizer

import (
	"strings"
	"unicode/utf8"

	"github.com/gotpu/gotpu/data/tokenizer/internal/unorm"
)

// span is a byte range [start, end) of the input text.
type span struct{ start, end int }

// span32 is a span stored per normalized byte; int32 halves the memory the
// alignments take (inputs are limited to maxInputBytes).
type span32 struct{ start, end int32 }

const maxInputBytes = 1<<31 - 1

func (s span) to32() span32 { return span32{int32(s.start), int32(s.end)} }

// normalized is a piece of the input after normalization, with, for every
// byte of the normalized text, the range of input bytes it comes from. It
// mirrors Hugging Face's NormalizedString, with one difference of
// representation: alignments are absolute offsets into the whole input
// (Hugging Face stores them relative to the piece and keeps a shift), which
// lets slices share their parent's alignment array.
type normalized struct {
	text  string
	align []span32 // len(align) == len(text)
	// orig is the input range this piece covers (NormalizedString's
	// original_shift and original length).
	orig span
}

// newNormalized wraps input bytes [base, base+len(s)) of the input: every
// byte of a character maps to the whole character.
func newNormalized(s string, base int) *normalized {
	align := make([]span32, len(s))
	for i := 0; i < len(s); {
		size := 1
		if s[i] >= utf8.RuneSelf {
			_, size = utf8.DecodeRuneInString(s[i:])
		}
		a := span32{int32(base + i), int32(base + i + size)}
		for k := 0; k < size; k++ {
			align[i+k] = a
		}
		i += size
	}
	return &normalized{text: s, align: align, orig: span{base, base + len(s)}}
}

// slice returns the piece for normalized bytes [a, b). Its original range is
// the first byte's start to the last byte's end, as Hugging Face's
// expand_alignments computes it.
func (n *normalized) slice(a, b int) *normalized {
	v := n.sliceValue(a, b)
	return &v
}

func (n *normalized) sliceValue(a, b int) normalized {
	if a >= b {
		return normalized{orig: span{n.orig.start, n.orig.start}}
	}
	return normalized{
		text:  n.text[a:b],
		align: n.align[a:b:b],
		orig:  span{int(n.align[a].start), int(n.align[b-1].end)},
	}
}

// toOriginal converts a normalized byte range to an input byte range, as
// NormalizedString::convert_offsets does, including its treatment of empty
// ranges (returned as they are, in normalized coordinates, shifted by the
// piece's start).
func (n *normalized) toOriginal(a, b int) span {
	switch {
	case a == b:
		return span{n.orig.start + a, n.orig.start + b}
	case a > b || b > len(n.align):
		// convert_offsets fails and the reference keeps the token's own
		// offsets unchanged.
		return span{a, b}
	}
	return span{int(n.align[a].start), int(n.align[b-1].end)}
}

// transformRange replaces the normalized bytes [start, end) according to
// changes, exactly as NormalizedString::transform_range: a change of 0
// replaces the next character of the range (keeping its alignment), a
// positive change inserts a character aligned like the byte before it, and a
// negative change -k also removes the k characters that follow. The first
// skip characters of the range are removed before anything else.
func (n *normalized) transformRange(start, end int, changes []unorm.Change, skip int) {
	old := n.text[start:end]
	pos := 0 // position in old
	next := func() {
		if pos < len(old) {
			_, size := utf8.DecodeRuneInString(old[pos:])
			pos += size
		}
	}
	for i := 0; i < skip; i++ {
		next()
	}
	var b strings.Builder
	b.Grow(len(old) + 8)
	align := make([]span32, 0, len(old)+8)
	for _, c := range changes {
		idx := start + pos
		var a span32
		if c.Delta > 0 {
			if idx < 1 {
				a = span{n.orig.start, n.orig.start}.to32()
			} else {
				a = n.align[idx-1]
			}
		} else {
			switch {
			case idx < len(n.align):
				a = n.align[idx]
			case len(n.align) > 0:
				a = n.align[len(n.align)-1]
			default:
				a = span{n.orig.start, n.orig.start}.to32()
			}
			next()
			for k := 0; k < -c.Delta; k++ {
				next()
			}
		}
		r := c.R
		if !utf8.ValidRune(r) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
		for k := utf8.RuneLen(r); k > 0; k-- {
			align = append(align, a)
		}
	}
	if start == 0 && end == len(n.text) {
		n.text, n.align = b.String(), align
		return
	}
	newAlign := make([]span32, 0, len(n.align)-(end-start)+len(align))
	newAlign = append(newAlign, n.align[:start]...)
	newAlign = append(newAlign, align...)
	newAlign = append(newAlign, n.align[end:]...)
	n.text = n.text[:start] + b.String() + n.text[end:]
	n.align = newAlign
}

func (n *normalized) transform(changes []unorm.Change, skip int) {
	n.transformRange(0, len(n.text), changes, skip)
}

// mapRunes replaces every character by f(character), keeping alignments.
func (n *normalized) mapRunes(f func(rune) rune) {
	changes := make([]unorm.Change, 0, len(n.text))
	for _, r := range n.text {
		changes = append(changes, unorm.Change{R: f(r)})
	}
	n.transform(changes, 0)
}

// filter keeps the characters for which keep is true. Like
// NormalizedString::filter, a removed character is accounted to the kept
// character before it (or skipped at the start).
func (n *normalized) filter(keep func(rune) bool) {
	changes := make([]unorm.Change, 0, len(n.text))
	removed, leading := 0, 0
	var last rune
	haveLast := false
	for _, r := range n.text {
		if keep(r) {
			if haveLast {
				changes = append(changes, unorm.Change{R: last, Delta: -removed})
			} else {
				leading = removed
			}
			last, haveLast, removed = r, true, 0
		} else {
			removed++
		}
	}
	if haveLast {
		changes = append(changes, unorm.Change{R: last, Delta: -removed})
	} else {
		leading = removed
	}
	n.transform(changes, leading)
}

// prepend inserts s before the first character, aligned with it. Empty
// pieces are left alone.
func (n *normalized) prepend(s string) {
	if n.text == "" {
		return
	}
	first, size := utf8.DecodeRuneInString(n.text)
	var changes []unorm.Change
	i := 0
	for _, r := range s {
		d := 0
		if i > 0 {
			d = 1
		}
		changes = append(changes, unorm.Change{R: r, Delta: d})
		i++
	}
	changes = append(changes, unorm.Change{R: first, Delta: 1})
	n.transformRange(0, size, changes, 0)
}

// replaceMatches replaces every matched range by content. Each inserted
// character is aligned with the last byte of the range it replaces, which is
// what transform_range with all-insertions and the matched characters
// skipped gives.
func (n *normalized) replaceMatches(matches []match, content string) {
	if len(matches) == 0 {
		return
	}
	var b strings.Builder
	b.Grow(len(n.text))
	align := make([]span32, 0, len(n.align))
	for _, m := range matches {
		if !m.isMatch {
			b.WriteString(n.text[m.start:m.end])
			align = append(align, n.align[m.start:m.end]...)
			continue
		}
		var a span32
		if m.end < 1 {
			a = span{n.orig.start, n.orig.start}.to32()
		} else {
			a = n.align[m.end-1]
		}
		b.WriteString(content)
		for k := 0; k < len(content); k++ {
			align = append(align, a)
		}
	}
	n.text, n.align = b.String(), align
}

// stripWhitespace removes leading and/or trailing whitespace (Rust's
// char::is_whitespace), as NormalizedString::lrstrip.
func (n *normalized) stripWhitespace(left, right bool) {
	lead, trail := 0, 0
	if left {
		lead = len(n.text) - len(strings.TrimLeftFunc(n.text, isWhitespace))
	}
	if right {
		trail = len(n.text) - len(strings.TrimRightFunc(n.text, isWhitespace))
	}
	if lead == 0 && trail == 0 {
		return
	}
	if lead+trail >= len(n.text) {
		n.text, n.align = "", nil
		return
	}
	n.text = n.text[lead : len(n.text)-trail]
	n.align = n.align[lead : len(n.align)-trail : len(n.align)-trail]
}

// unicodeNormalize applies an NFx form with Hugging Face's alignment rules.
func (n *normalized) unicodeNormalize(f unorm.Form) {
	if isASCII(n.text) {
		return // ASCII is invariant under all four forms
	}
	n.transform(unorm.Transform(f, n.text, nil), 0)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// split cuts the piece according to matches and a delimiter behavior
// (NormalizedString::split).
func (n *normalized) split(matches []match, b splitBehavior) []*normalized {
	type part struct {
		start, end int
		remove     bool
	}
	parts := make([]part, 0, len(matches))
	switch b {
	case splitIsolated:
		for _, m := range matches {
			parts = append(parts, part{m.start, m.end, false})
		}
	case splitRemoved:
		for _, m := range matches {
			parts = append(parts, part{m.start, m.end, m.isMatch})
		}
	case splitContiguous:
		prev := false
		for _, m := range matches {
			if m.isMatch == prev && len(parts) > 0 {
				parts[len(parts)-1].end = m.end
			} else {
				parts = append(parts, part{m.start, m.end, false})
			}
			prev = m.isMatch
		}
	case splitMergedWithPrevious:
		prev := false
		for _, m := range matches {
			if m.isMatch && !prev && len(parts) > 0 {
				parts[len(parts)-1].end = m.end
			} else {
				parts = append(parts, part{m.start, m.end, false})
			}
			prev = m.isMatch
		}
	case splitMergedWithNext:
		prev := false
		for i := len(matches) - 1; i >= 0; i-- {
			m := matches[i]
			if m.isMatch && !prev && len(parts) > 0 {
				parts[len(parts)-1].start = m.start
			} else {
				parts = append(parts, part{m.start, m.end, false})
			}
			prev = m.isMatch
		}
		for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
			parts[i], parts[j] = parts[j], parts[i]
		}
	}
	out := make([]*normalized, 0, len(parts))
	pieces := make([]normalized, len(parts)) // one allocation for all pieces
	for i, p := range parts {
		if !p.remove {
			pieces[i] = n.sliceValue(p.start, p.end)
			out = append(out, &pieces[i])
		}
	}
	return out
}
