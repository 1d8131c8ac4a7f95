package tokenizer

import (
	"strings"
	"unicode/utf8"

	"github.com/gotpu/gotpu/data/tokenizer/internal/regex"
)

// match is a range of a text and whether it matched a pattern; a pattern's
// matches cover the text completely, in order (Hugging Face's
// Pattern::find_matches).
type match struct {
	start, end int
	isMatch    bool
}

type pattern interface {
	findMatches(s string) []match
}

// literalPattern matches a fixed string, non-overlapping, leftmost first.
type literalPattern string

func (p literalPattern) findMatches(s string) []match {
	if s == "" {
		return []match{{0, 0, false}}
	}
	if p == "" {
		return []match{{0, len(s), false}}
	}
	var out []match
	prev := 0
	for i := 0; i <= len(s); {
		j := strings.Index(s[i:], string(p))
		if j < 0 {
			break
		}
		st := i + j
		if st > prev {
			out = append(out, match{prev, st, false})
		}
		out = append(out, match{st, st + len(p), true})
		prev = st + len(p)
		i = prev
	}
	if prev < len(s) {
		out = append(out, match{prev, len(s), false})
	}
	return out
}

// regexPattern matches an Oniguruma-dialect regex, iterating as rust-onig.
type regexPattern struct{ re *regex.Regexp }

func (p regexPattern) findMatches(s string) []match {
	if s == "" {
		return []match{{0, 0, false}}
	}
	var out []match
	prev := 0
	p.re.FindAll(s, func(st, en int) {
		if st != prev {
			out = append(out, match{prev, st, false})
		}
		out = append(out, match{st, en, true})
		prev = en
	})
	if prev != len(s) {
		out = append(out, match{prev, len(s), false})
	}
	return out
}

// runePattern makes every character for which f is true a match of its own.
type runePattern func(rune) bool

func (f runePattern) findMatches(s string) []match {
	if s == "" {
		return []match{{0, 0, false}}
	}
	var out []match
	last := 0
	for i, r := range s {
		if f(r) {
			if last < i {
				out = append(out, match{last, i, false})
			}
			size := utf8.RuneLen(r)
			if r == utf8.RuneError {
				_, size = utf8.DecodeRuneInString(s[i:])
			}
			out = append(out, match{i, i + size, true})
			last = i + size
		}
	}
	if len(s) > last {
		out = append(out, match{last, len(s), false})
	}
	return out
}

// invertPattern swaps matches and gaps.
type invertPattern struct{ p pattern }

func (p invertPattern) findMatches(s string) []match {
	ms := p.p.findMatches(s)
	for i := range ms {
		ms[i].isMatch = !ms[i].isMatch
	}
	return ms
}
