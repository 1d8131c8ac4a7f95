package jinja

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Python's str semantics over Go's UTF-8 strings: whitespace is str.isspace's set, lengths and
// indices count code points, case mappings include the multi-character ones.

// pyIsSpace is Python's str.isspace for one code point.
func pyIsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', 0x1c, 0x1d, 0x1e, 0x1f, ' ', 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// pyStrip is str.strip/lstrip/rstrip: whitespace when chars is nil, else the code points of *chars.
func pyStrip(s string, chars *string, left, right bool) string {
	f := pyIsSpace
	if chars != nil {
		set := *chars
		f = func(r rune) bool { return strings.ContainsRune(set, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, f)
	}
	if right {
		s = strings.TrimRightFunc(s, f)
	}
	return s
}

// Case mappings write into a bounded builder, which charges the bytes before it grows: an
// upper-cased string can be three times as long as its source (ΐ is three code points), and a
// template can map a string as long as MaxBytes.

func upperRune(b *bounded, r rune) {
	if m, ok := upperSpecial[r]; ok {
		b.WriteString(m)
	} else {
		b.WriteRune(unicode.ToUpper(r))
	}
}

func lowerRune(b *bounded, r rune) {
	if m, ok := lowerSpecial[r]; ok {
		b.WriteString(m)
	} else {
		b.WriteRune(unicode.ToLower(r))
	}
}

func titleRune(b *bounded, r rune) {
	if m, ok := titleSpecial[r]; ok {
		b.WriteString(m)
	} else {
		b.WriteRune(unicode.ToTitle(r))
	}
}

// pyUpper is str.upper.
func pyUpper(b *bounded, s string) {
	for _, r := range s {
		if b.err != nil {
			return
		}
		upperRune(b, r)
	}
}

// pyLower is str.lower (and casefold, which differs only for a few code points: ß, ...).
func pyLower(b *bounded, s string) {
	for _, r := range s {
		if b.err != nil {
			return
		}
		lowerRune(b, r)
	}
}

func isCased(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
}

// pyTitle is str.title: a cased code point after an uncased one is title-cased, others lowered.
func pyTitle(b *bounded, s string) {
	prevCased := false
	for _, r := range s {
		if b.err != nil {
			return
		}
		if prevCased {
			lowerRune(b, r)
		} else {
			titleRune(b, r)
		}
		prevCased = isCased(r)
	}
}

// pyCapitalize is str.capitalize: the first code point title-cased, the rest lowered.
func pyCapitalize(b *bounded, s string) {
	if s == "" {
		return
	}
	r, n := utf8.DecodeRuneInString(s)
	titleRune(b, r)
	pyLower(b, s[n:])
}

// pySwapcase is str.swapcase.
func pySwapcase(b *bounded, s string) {
	for _, r := range s {
		if b.err != nil {
			return
		}
		switch {
		case unicode.IsUpper(r):
			lowerRune(b, r)
		case unicode.IsLower(r):
			upperRune(b, r)
		default:
			b.WriteRune(r)
		}
	}
}

// jinjaTitle is Jinja2's title filter: each word's first code point upper-cased, the rest lowered.
func jinjaTitle(b *bounded, s string) {
	start := true
	for _, c := range s {
		if b.err != nil {
			return
		}
		if pyIsSpace(c) || strings.ContainsRune("-({[<", c) {
			b.WriteRune(c)
			start = true
			continue
		}
		if start {
			upperRune(b, c)
		} else {
			lowerRune(b, c)
		}
		start = false
	}
}

// caseMapped is the case mapping f of s built under the budget. An ASCII string keeps its
// length under upper and lower (ascii, the standard library's, which is faster): its length is
// charged and ascii maps it; any other string is built by f into a bounded builder.
func (r *renderer) caseMapped(s string, f func(*bounded, string), ascii func(string) string) (Value, error) {
	if ascii != nil && isASCII(s) {
		if err := r.bud.alloc(int64(len(s))); err != nil {
			return Value{}, err
		}
		return String(ascii(s)), nil
	}
	b := &bounded{bud: &r.bud}
	f(b, s)
	out, err := b.result()
	return String(out), err
}

// pyIsDigit is str.isdigit for one code point: decimal digits and the other digits (superscripts,
// subscripts, circled digits ...).
func pyIsDigit(r rune) bool {
	if unicode.IsDigit(r) {
		return true
	}
	switch {
	case r == 0xb2 || r == 0xb3 || r == 0xb9 || r == 0x2070 || r == 0x19da || r == 0x24ea || r == 0x24ff:
		return true
	case r >= 0x2074 && r <= 0x2079, r >= 0x2080 && r <= 0x2089, r >= 0x2460 && r <= 0x2468,
		r >= 0x2474 && r <= 0x247c, r >= 0x2488 && r <= 0x2490, r >= 0x24f5 && r <= 0x24fd,
		r >= 0x2776 && r <= 0x277e, r >= 0x2780 && r <= 0x2788, r >= 0x278a && r <= 0x2792, r >= 0x1369 && r <= 0x1371:
		return true
	}
	return false
}

// pyIsTitle is str.istitle: upper and title case only after uncased code points, lower case only
// after cased ones, and at least one cased.
func pyIsTitle(s string) bool {
	cased, prevCased := false, false
	for _, r := range s {
		switch {
		case unicode.IsUpper(r) || unicode.IsTitle(r):
			if prevCased {
				return false
			}
			prevCased, cased = true, true
		case unicode.IsLower(r):
			if !prevCased {
				return false
			}
			prevCased, cased = true, true
		default:
			prevCased = false
		}
	}
	return cased
}

// pyIsLower / pyIsUpper are str.islower / str.isupper: some cased code point, none of the other case.
func pyIsLower(s string) bool {
	cased := false
	for _, r := range s {
		if unicode.IsUpper(r) || unicode.IsTitle(r) {
			return false
		}
		if unicode.IsLower(r) {
			cased = true
		}
	}
	return cased
}

func pyIsUpper(s string) bool {
	cased := false
	for _, r := range s {
		if unicode.IsLower(r) || unicode.IsTitle(r) {
			return false
		}
		if unicode.IsUpper(r) {
			cased = true
		}
	}
	return cased
}

func allRunes(s string, f func(rune) bool) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !f(r) {
			return false
		}
	}
	return true
}

// pyReplace is str.replace(old, new, count) (count < 0: all); an empty old inserts new between
// code points.
func (r *renderer) pyReplace(s, old, new string, count int) (string, error) {
	var n int
	if old == "" {
		n = utf8.RuneCountInString(s) + 1
	} else {
		n = strings.Count(s, old)
	}
	if count >= 0 && count < n {
		n = count
	}
	if err := r.bud.scan(len(s)); err != nil {
		return "", err
	}
	size := int64(len(s)) + int64(n)*(int64(len(new))-int64(len(old)))
	if err := r.bud.alloc(size); err != nil {
		return "", err
	}
	if old != "" {
		return strings.Replace(s, old, new, n), nil
	}
	var b strings.Builder
	b.Grow(int(size))
	k := 0
	for i := range s {
		if k < n {
			b.WriteString(new)
			k++
		}
		b.WriteString(s[i : i+runeSize(s, i)])
	}
	if k < n {
		b.WriteString(new)
	}
	return b.String(), nil
}

// runeLen is len(s) in Python.
func runeLen(s string) int { return utf8.RuneCountInString(s) }

// padSize is the length in bytes of pyPad(s, width, fill, how) (fill is one code point); -1
// (which budget.alloc refuses) when it does not fit in 62 bits.
func padSize(s string, width int64, fill string) int64 {
	n := int64(runeLen(s))
	if width <= n {
		return int64(len(s))
	}
	if width-n > (1<<62-int64(len(s)))/int64(len(fill)) {
		return -1
	}
	return int64(len(s)) + (width-n)*int64(len(fill))
}

// pyPad is str.center/ljust/rjust, made in one allocation (the caller charges padSize).
func pyPad(s string, width int, fill string, how byte) string {
	n := runeLen(s)
	if width <= n {
		return s
	}
	marg := width - n
	var left int
	switch how {
	case 'l':
		left = 0
	case 'r':
		left = marg
	default:
		left = marg/2 + (marg & width & 1)
	}
	var b strings.Builder
	b.Grow(len(s) + marg*len(fill))
	for range left {
		b.WriteString(fill)
	}
	b.WriteString(s)
	for range marg - left {
		b.WriteString(fill)
	}
	return b.String()
}

// byteToRuneIndex converts a byte offset in s to a code point index.
func byteToRuneIndex(s string, b int) int {
	if b < 0 {
		return b
	}
	return utf8.RuneCountInString(s[:b])
}

// runeToByteIndex converts a code point index (clamped Python-style) to a byte offset.
func runeToByteIndex(s string, i int) int {
	if i <= 0 {
		return 0
	}
	k := 0
	for b := range s {
		if k == i {
			return b
		}
		k++
	}
	return len(s)
}
