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

// pySplitWS is str.split() without a separator: runs of whitespace, at most maxsplit splits
// (negative: no limit).
func pySplitWS(s string, maxsplit int) []string {
	var out []string
	i := 0
	for {
		for i < len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			if !pyIsSpace(r) {
				break
			}
			i += n
		}
		if i >= len(s) {
			return out
		}
		if maxsplit >= 0 && len(out) == maxsplit {
			return append(out, s[i:])
		}
		j := i
		for j < len(s) {
			r, n := utf8.DecodeRuneInString(s[j:])
			if pyIsSpace(r) {
				break
			}
			j += n
		}
		out = append(out, s[i:j])
		i = j
	}
}

// pyRSplitWS is str.rsplit() without a separator.
func pyRSplitWS(s string, maxsplit int) []string {
	var rev []string
	j := len(s)
	for {
		for j > 0 {
			r, n := utf8.DecodeLastRuneInString(s[:j])
			if !pyIsSpace(r) {
				break
			}
			j -= n
		}
		if j <= 0 {
			break
		}
		if maxsplit >= 0 && len(rev) == maxsplit {
			rev = append(rev, s[:j])
			break
		}
		i := j
		for i > 0 {
			r, n := utf8.DecodeLastRuneInString(s[:i])
			if pyIsSpace(r) {
				break
			}
			i -= n
		}
		rev = append(rev, s[i:j])
		j = i
	}
	for a, b := 0, len(rev)-1; a < b; a, b = a+1, b-1 {
		rev[a], rev[b] = rev[b], rev[a]
	}
	return rev
}

// pyRSplit is str.rsplit(sep, maxsplit).
func pyRSplit(s, sep string, maxsplit int) []string {
	if maxsplit < 0 {
		return strings.Split(s, sep)
	}
	var rev []string
	for len(rev) < maxsplit {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		rev = append(rev, s[i+len(sep):])
		s = s[:i]
	}
	rev = append(rev, s)
	for a, b := 0, len(rev)-1; a < b; a, b = a+1, b-1 {
		rev[a], rev[b] = rev[b], rev[a]
	}
	return rev
}

func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// pySplitLines is str.splitlines(keepends).
func pySplitLines(s string, keepends bool) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !isLineBreak(r) {
			i += n
			continue
		}
		end := i + n
		if r == '\r' && end < len(s) && s[end] == '\n' {
			end++
		}
		if keepends {
			out = append(out, s[start:end])
		} else {
			out = append(out, s[start:i])
		}
		start, i = end, end
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

func pyUpper(s string) string {
	if isASCII(s) {
		return strings.ToUpper(s)
	}
	var b strings.Builder
	for _, r := range s {
		if m, ok := upperSpecial[r]; ok {
			b.WriteString(m)
		} else {
			b.WriteRune(unicode.ToUpper(r))
		}
	}
	return b.String()
}

func pyLower(s string) string {
	if isASCII(s) {
		return strings.ToLower(s)
	}
	var b strings.Builder
	for _, r := range s {
		if m, ok := lowerSpecial[r]; ok {
			b.WriteString(m)
		} else {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

func titleRune(b *strings.Builder, r rune) {
	if m, ok := titleSpecial[r]; ok {
		b.WriteString(m)
	} else {
		b.WriteRune(unicode.ToTitle(r))
	}
}

func isCased(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
}

// pyTitle is str.title: a cased code point after an uncased one is title-cased, others lowered.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteString(pyLower(string(r)))
		} else {
			titleRune(&b, r)
		}
		prevCased = isCased(r)
	}
	return b.String()
}

// pyCapitalize is str.capitalize: the first code point title-cased, the rest lowered.
func pyCapitalize(s string) string {
	if s == "" {
		return s
	}
	r, n := utf8.DecodeRuneInString(s)
	var b strings.Builder
	titleRune(&b, r)
	b.WriteString(pyLower(s[n:]))
	return b.String()
}

func pySwapcase(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case unicode.IsUpper(r):
			b.WriteString(pyLower(string(r)))
		case unicode.IsLower(r):
			b.WriteString(pyUpper(string(r)))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
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

// pyPad is str.center/ljust/rjust.
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
	return strings.Repeat(fill, left) + s + strings.Repeat(fill, marg-left)
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
