package tokenizer

import "unicode"

// Character predicates with the meaning the Rust implementation gives them,
// so that normalizers and pre-tokenizers cut where Hugging Face's do.

// isWhitespace is Rust's char::is_whitespace (the White_Space property),
// which is also what Go's unicode.IsSpace tests.
func isWhitespace(r rune) bool { return unicode.IsSpace(r) }

// isNumeric is Rust's char::is_numeric (general categories Nd, Nl, No).
func isNumeric(r rune) bool { return unicode.IsNumber(r) }

// isAlphabetic is the Unicode Alphabetic property.
func isAlphabetic(r rune) bool {
	return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r)
}

// isWordChar is `\w` of the Rust regex crate (used by the Whitespace
// pre-tokenizer and the single_word rule of added tokens).
func isWordChar(r rune) bool {
	return isAlphabetic(r) || unicode.In(r, unicode.M, unicode.Nd, unicode.Pc, unicode.Join_Control)
}

// isBertPunctuation is tokenizers' is_bert_punc / is_punc: ASCII
// punctuation or a Unicode punctuation category.
func isBertPunctuation(r rune) bool {
	if r < 0x80 {
		return (r >= '!' && r <= '/') || (r >= ':' && r <= '@') || (r >= '[' && r <= '`') || (r >= '{' && r <= '~')
	}
	return unicode.IsPunct(r)
}

// isBertControl is BertNormalizer's is_control: "other" categories except
// the three whitespace controls. The reference keeps unassigned code points
// (U+FFFF, U+10FFFF survive), so Cn is not included.
func isBertControl(r rune) bool {
	switch r {
	case '\t', '\n', '\r':
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs)
}

// isBertWhitespace is BertNormalizer's is_whitespace.
func isBertWhitespace(r rune) bool {
	switch r {
	case '\t', '\n', '\r':
		return true
	}
	return isWhitespace(r)
}

// isChineseChar is BertNormalizer's CJK ideograph test.
func isChineseChar(r rune) bool {
	switch {
	case r >= 0x4E00 && r <= 0x9FFF, r >= 0x3400 && r <= 0x4DBF, r >= 0x20000 && r <= 0x2A6DF,
		r >= 0x2A700 && r <= 0x2B73F, r >= 0x2B740 && r <= 0x2B81F, r >= 0x2B920 && r <= 0x2CEAF,
		r >= 0xF900 && r <= 0xFAFF, r >= 0x2F800 && r <= 0x2FA1F:
		return true
	}
	return false
}

// lowerRunes is Rust's char::to_lowercase: the simple lowercase mapping,
// except for U+0130 which lowercases to two characters.
func lowerRunes(r rune, buf []rune) []rune {
	if r == 0x130 {
		return append(buf, 'i', 0x307)
	}
	return append(buf, unicode.ToLower(r))
}
