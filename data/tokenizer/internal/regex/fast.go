package regex

import (
	"unicode"
	"unicode/utf8"
)

// Hand-written matchers for the pre-tokenization patterns that most
// tokenizer.json files ship. They return exactly what the Pike VM returns
// for the same pattern (FuzzFastMatchers checks this), several times faster.
// Every character starts a match of these patterns, so a search from any
// position matches at that position.

const (
	// GPT-2, RoBERTa, and the ByteLevel pre-tokenizer's built-in regex.
	patGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// Qwen2/Qwen3 (single digits).
	patQwen = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Llama 3 (digits in groups of up to three).
	patLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

func fastMatcher(expr string) func(s string, from int) (int, int, bool) {
	switch expr {
	case patGPT2:
		return matchGPT2
	case patQwen:
		return func(s string, from int) (int, int, bool) { return matchLlama3(s, from, 1) }
	case patLlama3:
		return func(s string, from int) (int, int, bool) { return matchLlama3(s, from, 3) }
	}
	return nil
}

type cls uint8

const (
	cOther  cls = iota // [^\s\p{L}\p{N}]
	cSpace             // \s (Oniguruma: 0x09-0x0D, 0x85, Zs, Zl, Zp)
	cLetter            // \p{L}
	cNumber            // \p{N}
)

var asciiClass = func() (t [128]cls) {
	for c := 0; c < 128; c++ {
		t[c] = classOf(rune(c))
	}
	return t
}()

func classOf(r rune) cls {
	switch {
	case r >= 0x09 && r <= 0x0D, r == 0x85:
		return cSpace
	case r < 0x80:
		switch {
		case r == ' ':
			return cSpace
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z':
			return cLetter
		case r >= '0' && r <= '9':
			return cNumber
		}
		return cOther
	case unicode.IsLetter(r):
		return cLetter
	case unicode.IsNumber(r):
		return cNumber
	case unicode.In(r, unicode.Z):
		return cSpace
	}
	return cOther
}

// at decodes the rune at i and classifies it.
func at(s string, i int) (rune, int, cls) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	return r, size, classOf(r)
}

// run returns the end of the run of characters of class k starting at i.
func run(s string, i int, k cls) int {
	for i < len(s) {
		_, size, c := at(s, i)
		if c != k {
			break
		}
		i += size
	}
	return i
}

// contraction matches 's 't 're 've 'm 'll 'd at i (s[i] == '\”),
// case-folded when fold is set, returning the end.
func contraction(s string, i int, fold bool) (int, bool) {
	j := i + 1
	next := func() (rune, bool) {
		if j >= len(s) {
			return 0, false
		}
		r, size := utf8.DecodeRuneInString(s[j:])
		j += size
		if fold {
			switch r {
			case 'S', 0x17F: // long s folds to s
				r = 's'
			case 'T', 'R', 'E', 'V', 'M', 'L', 'D':
				r += 'a' - 'A'
			}
		}
		return r, true
	}
	r, ok := next()
	if !ok {
		return 0, false
	}
	switch r {
	case 's', 't', 'm', 'd':
		return j, true
	case 'r', 'v', 'l':
		want := rune('e')
		if r == 'l' {
			want = 'l'
		}
		if r2, ok := next(); ok && r2 == want {
			return j, true
		}
	}
	return 0, false
}

// whitespace handles `\s+(?!\S)|\s+` at i (s[i] is whitespace): the run,
// minus its last character when a non-space follows and the run is longer
// than one.
func whitespace(s string, i int) (int, int, bool) {
	j := run(s, i, cSpace)
	if j == len(s) {
		return i, j, true
	}
	_, last := utf8.DecodeLastRuneInString(s[:j])
	if j-last > i {
		return i, j - last, true
	}
	return i, j, true
}

func matchGPT2(s string, i int) (int, int, bool) {
	if i >= len(s) {
		return 0, 0, false
	}
	r, size, c := at(s, i)
	if r == '\'' {
		if e, ok := contraction(s, i, false); ok {
			return i, e, true
		}
	}
	if r == ' ' && i+1 < len(s) {
		if _, _, c2 := at(s, i+1); c2 != cSpace {
			// " ?X+" with the space.
			return i, run(s, i+1, c2), true
		}
	}
	if c == cSpace {
		return whitespace(s, i)
	}
	return i, run(s, i+size, c), true
}

func matchLlama3(s string, i int, maxDigits int) (int, int, bool) {
	if i >= len(s) {
		return 0, 0, false
	}
	r, size, c := at(s, i)
	if r == '\'' {
		if e, ok := contraction(s, i, true); ok {
			return i, e, true
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == cLetter {
		return i, run(s, i, cLetter), true
	}
	if r != '\r' && r != '\n' && c != cNumber && i+size < len(s) {
		if _, _, c2 := at(s, i+size); c2 == cLetter {
			return i, run(s, i+size, cLetter), true
		}
	}
	// \p{N}{1,maxDigits}
	if c == cNumber {
		j := i + size
		for n := 1; n < maxDigits && j < len(s); n++ {
			_, sz, c2 := at(s, j)
			if c2 != cNumber {
				break
			}
			j += sz
		}
		return i, j, true
	}
	// " ?[^\s\p{L}\p{N}]+[\r\n]*"
	j := i
	if r == ' ' && i+1 < len(s) {
		if _, _, c2 := at(s, i+1); c2 == cOther {
			j = i + 1
		}
	}
	if _, _, c2 := at(s, j); c2 == cOther {
		j = run(s, j, cOther)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return i, j, true
	}
	// c is whitespace here. "\s*[\r\n]+": up to the last line break of the run.
	end := run(s, i, cSpace)
	for k := end - 1; k >= i; k-- {
		if s[k] == '\r' || s[k] == '\n' {
			return i, k + 1, true
		}
	}
	return whitespace(s, i)
}
