package regex

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
)

func findAll(re *Regexp, s string) [][2]int {
	var out [][2]int
	re.FindAll(s, func(a, b int) { out = append(out, [2]int{a, b}) })
	return out
}

func goFindAll(re *regexp.Regexp, s string) [][2]int {
	var out [][2]int
	for _, m := range re.FindAllStringIndex(s, -1) {
		out = append(out, [2]int{m[0], m[1]})
	}
	return out
}

// Patterns whose meaning is the same in Go's RE2 syntax and Oniguruma's
// (no \s \d \w, whose Go meaning is ASCII-only; no ^ $). Go's regexp uses
// the same leftmost-first semantics, so every match must be identical.
var sharedPatterns = []string{
	`a`, `a*`, `a+`, `a?`, `a*?`, `a+?`, `a??`, `(?:ab)+`, `(?:a|ab)(?:c|bcd)`,
	`a{2}`, `a{2,}`, `a{1,3}`, `a{1,3}?`, `(?:a+)+b`, `(?:a*)*`, `(?:a|b)*?b`,
	`\p{L}+`, `\p{N}`, `[^\p{L}\p{N}]+`, ` ?\p{L}+| ?\p{N}+| ?[^\p{L}\p{N} ]+`,
	`[a-c]+`, `[^a-c]`, `.`, `.+`, `(?i:ab)`, `(?i)ab|c`, `x*`, `[\x{e9}-\x{ff}]+`,
	`\x41`, `[\]]`, `(?:)`, `a|`, `|a`, `\p{Lu}\p{Ll}*`, `[\p{Han}]+`, `\.`, `\\`,
}

var texts = []string{
	"", "a", "aaa", "ab", "abab abcd", "aab", "bbb", "Hello world", "é", "hé llo 123",
	"ABab", "x\ny", "日本語 text", "a\u0300b", "  \t\n", "🙂x", "aaaaab", "ab c 12 ;;",
	"ÀÉÎõü ß", "AbC dEf",
}

func TestMatchesGoRegexp(t *testing.T) {
	for _, p := range sharedPatterns {
		re, err := Compile(p)
		if err != nil {
			t.Fatalf("Compile(%q): %v", p, err)
		}
		gre := regexp.MustCompile(p)
		for _, s := range texts {
			got, want := findAll(re, s), goFindAll(gre, s)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("pattern %q on %q: got %v, Go regexp %v", p, s, got, want)
			}
		}
	}
}

func TestOnigurumaSemantics(t *testing.T) {
	cases := []struct {
		pattern, text string
		want          [][2]int
	}{
		// The GPT-2 whitespace rule: keep the last space for the next word.
		{`\s+(?!\S)|\s+`, "a   b", [][2]int{{1, 3}, {3, 4}}},
		{`\s+(?!\S)|\s+`, "a  ", [][2]int{{1, 3}}},
		// \s, \d and \w are Unicode-aware.
		{`\s+`, "a\u00a0\u3000b", [][2]int{{1, 6}}},
		{`\d+`, "x١٢٣", [][2]int{{1, 7}}},
		{`\w+`, "é_1 x", [][2]int{{0, 4}, {5, 6}}},
		// ^ and $ are line anchors.
		{`^a`, "a\na", [][2]int{{0, 1}, {2, 3}}},
		{`a$`, "a\na", [][2]int{{0, 1}, {2, 3}}},
		{`\Aa`, "a\na", [][2]int{{0, 1}}},
		{`a\z`, "a\na", [][2]int{{2, 3}}},
		{`a\Z`, "a\n", [][2]int{{0, 1}}},
		// Lookahead with a multi-character body, and lookbehind.
		{`a(?=bc)`, "abcab", [][2]int{{0, 1}}},
		{`a(?!b|c)`, "abacad", [][2]int{{4, 5}}},
		{`(?<=x)a`, "axa", [][2]int{{2, 3}}},
		{`(?<!x)a`, "axa", [][2]int{{0, 1}}},
		{`\bab\b`, "ab abc ab", [][2]int{{0, 2}, {7, 9}}},
		// (?i) folds to all members of the case orbit (long s, Kelvin sign).
		{`(?i:'s)`, "'S 'ſ 's", [][2]int{{0, 2}, {3, 6}, {7, 9}}},
		{`(?i)k`, "kK\u212a", [][2]int{{0, 1}, {1, 2}, {2, 5}}},
		// Interval forms, and '{' as a literal.
		{`a{,2}`, "aaa", [][2]int{{0, 2}, {2, 3}}},
		{`a{x`, "a{x", [][2]int{{0, 3}}},
		// Nested classes and intersection.
		{`[a-z&&[^aeiou]]+`, "hello", [][2]int{{0, 1}, {2, 4}}},
		{`[[:alpha:]]+`, "ab1é", [][2]int{{0, 2}, {3, 5}}},
		{`[\p{L}[0-9]]+`, "a1-b", [][2]int{{0, 2}, {3, 4}}},
		// Empty matches after a match are skipped, as rust-onig's find_iter does.
		{`a*`, "baa", [][2]int{{0, 0}, {1, 3}}},
		{` {2,}`, "a  b   c", [][2]int{{1, 3}, {4, 7}}},
		{`\x{1F642}`, "x🙂", [][2]int{{1, 5}}},
	}
	for _, c := range cases {
		re, err := Compile(c.pattern)
		if err != nil {
			t.Errorf("Compile(%q): %v", c.pattern, err)
			continue
		}
		got := findAll(re, c.text)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("pattern %q on %q: got %v, want %v", c.pattern, c.text, got, c.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	bad := []string{
		`(a`, `a)`, `[a`, `*a`, `a**+`, `(?>a)`, `\1`, `a++`, `\p{NoSuchProperty}`, `(?<=a+)b`,
		`[z-a]`, `\`, `a{3,2}`, `\K`, "\xff", `(?~a)`, `\x{110000}`, strings.Repeat("(", 1000) + "a" + strings.Repeat(")", 1000),
		`(?:a{1000}){1000}`,
	}
	for _, p := range bad {
		if _, err := Compile(p); err == nil {
			t.Errorf("Compile(%q): no error", p)
		}
	}
}

// TestPathological checks that patterns that are exponential for a
// backtracking engine finish on a long input. The deadline is generous: it
// exists so that a regression fails instead of hanging, it is not a speed
// assertion.
func TestPathological(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	cases := []struct{ pattern, text string }{
		{`(a+)+$`, strings.Repeat("a", n) + "b"},
		{`(a|aa)+c`, strings.Repeat("a", n)},
		{`(?:a*)*b`, strings.Repeat("a", n)},
		{`\s+(?!\S)|\s+`, strings.Repeat(" ", n)},
		{`(?:x+x+)+y`, strings.Repeat("x", n)},
	}
	for _, c := range cases {
		re := MustCompile(c.pattern)
		done := make(chan int, 1)
		go func() {
			count := 0
			re.FindAll(c.text, func(int, int) { count++ })
			done <- count
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatalf("pattern %q on %d bytes did not finish", c.pattern, len(c.text))
		}
	}
}

// FuzzCompareGoRegexp generates patterns from a grammar both dialects agree
// on and checks that every match is the one Go's regexp reports.
func FuzzCompareGoRegexp(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5}, "abab a1 é")
	f.Add([]byte{9, 7, 200, 13, 40, 2, 99}, "aaab  b\n")
	f.Add([]byte{33, 8, 17, 250, 4, 4, 4}, "Hello, World 42!")
	f.Fuzz(func(t *testing.T, prog []byte, text string) {
		if len(prog) > 64 || len(text) > 256 {
			return
		}
		g := &gen{b: prog}
		p := g.alt(0)
		re, err := Compile(p)
		if err != nil {
			t.Fatalf("Compile(%q): %v", p, err)
		}
		gre, err := regexp.Compile(p)
		if err != nil {
			return // e.g. repeat count limits differ
		}
		if !strings.Contains(text, "\uFFFD") && strings.ToValidUTF8(text, "") == text {
			got, want := findAll(re, text), goFindAll(gre, text)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("pattern %q on %q: got %v, Go regexp %v", p, text, got, want)
			}
		}
	})
}

type gen struct {
	b []byte
	i int
}

func (g *gen) next() int {
	if g.i >= len(g.b) {
		return 0
	}
	g.i++
	return int(g.b[g.i-1])
}

var atoms = []string{`a`, `b`, ` `, `1`, `é`, `.`, `[ab]`, `[^a]`, `\p{L}`, `\p{N}`, `[^\p{L}\p{N}]`, `[a-c1]`, `(?i:A)`}
var quants = []string{``, ``, `*`, `+`, `?`, `*?`, `+?`, `??`, `{1,2}`, `{2}`, `{0,1}?`}

func (g *gen) alt(depth int) string {
	n := 1 + g.next()%3
	parts := make([]string, n)
	for i := range parts {
		parts[i] = g.concat(depth)
	}
	return strings.Join(parts, "|")
}

func (g *gen) concat(depth int) string {
	n := 1 + g.next()%3
	var b strings.Builder
	for i := 0; i < n; i++ {
		c := g.next()
		if c%7 == 0 && depth < 3 {
			b.WriteString("(?:" + g.alt(depth+1) + ")")
		} else {
			b.WriteString(atoms[c%len(atoms)])
		}
		b.WriteString(quants[g.next()%len(quants)])
	}
	return b.String()
}
