package tokenizer

import (
	"unicode/utf8"
)

// gpt2Pattern is the pre-tokenization regex of GPT-2, used by the ByteLevel
// pre-tokenizer when use_regex is true.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// byteToRune is GPT-2's bytes_to_unicode: printable Latin-1 bytes map to
// themselves, the others to U+0100 onwards, so every byte is a visible
// character. Read-only after initialisation.
var byteToRune, runeToByte = func() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	r2b := make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
		r2b[b2r[b]] = byte(b)
	}
	return b2r, r2b
}()

// byteRuneUTF8 is the UTF-8 encoding of byteToRune[b] (one or two bytes).
var byteRuneUTF8 = func() (t [256][]byte) {
	for b := range t {
		t[b] = utf8.AppendRune(nil, byteToRune[b])
	}
	return t
}()

// byteLevelTransform replaces every byte of the piece by its byte-level
// character. It is NormalizedString::transform with the first byte of a
// character replacing it (change 0, aligned with the character's first
// byte) and the others inserted (change +1, aligned with the byte before
// the insertion point, i.e. the character's last byte), written out
// directly because it runs on every word of byte-level tokenizers.
func byteLevelTransform(n *normalized) {
	s := n.text
	size := 0
	for i := 0; i < len(s); i++ {
		size += len(byteRuneUTF8[s[i]])
	}
	buf := make([]byte, 0, size)
	align := make([]span32, 0, size)
	for i := 0; i < len(s); {
		csize := 1
		if s[i] >= utf8.RuneSelf {
			_, csize = utf8.DecodeRuneInString(s[i:])
		}
		for k := 0; k < csize; k++ {
			a := n.align[i+csize-1]
			if k == 0 {
				a = n.align[i]
			}
			enc := byteRuneUTF8[s[i+k]]
			buf = append(buf, enc...)
			for range enc {
				align = append(align, a)
			}
		}
		i += csize
	}
	n.text, n.align = string(buf), align
}

// byteLevelDecode maps byte-level characters back to bytes. A token with a
// character outside the byte-level alphabet contributes its own UTF-8 bytes,
// and the result is decoded like Rust's String::from_utf8_lossy.
func byteLevelDecode(tokens []string) string {
	var buf []byte
	for _, t := range tokens {
		start := len(buf)
		ok := true
		for _, r := range t {
			b, found := runeToByte[r]
			if !found {
				ok = false
				break
			}
			buf = append(buf, b)
		}
		if !ok {
			buf = append(buf[:start], t...)
		}
	}
	return fromUTF8Lossy(buf)
}

// fromUTF8Lossy decodes like Rust's String::from_utf8_lossy: each maximal
// prefix of an ill-formed sequence becomes one U+FFFD (Go's own conversion
// would use one per byte, or one per run).
func fromUTF8Lossy(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			out = append(out, b[i:i+size]...)
			i += size
			continue
		}
		// Invalid: consume the longest prefix of a well-formed sequence.
		i += invalidPrefixLen(b[i:])
		out = append(out, "\uFFFD"...)
	}
	return string(out)
}

// invalidPrefixLen returns how many bytes of an ill-formed sequence form
// its maximal well-formed prefix (at least 1), per Unicode's "substitution
// of maximal subparts".
func invalidPrefixLen(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		x := b[n]
		if k > 0 {
			lo, hi = 0x80, 0xBF
		}
		if x < lo || x > hi {
			break
		}
		n++
	}
	return n
}
