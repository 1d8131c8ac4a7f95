package regex

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// steps runs FindAll's iteration and returns the matches and the work it did, counted by the
// engine (instructions visited and threads stepped), so that complexity is asserted on a
// deterministic count rather than on time.
func steps(t *testing.T, re *Regexp, s string) ([][2]int, int64) {
	t.Helper()
	var out [][2]int
	n, err := re.findAll(context.Background(), s, func(a, b int) { out = append(out, [2]int{a, b}) })
	if err != nil {
		t.Fatal(err)
	}
	return out, n
}

// TestLookaheadLinear is issue #16's pattern: a lookahead whose body must scan to the end of the
// text (`(a*)*b` on a…ab) at every position. Deciding it by a scan per position was quadratic
// (2k chars 0.12 s, 16k 7.3 s, 200k not done after 600 s); the work must grow linearly.
func TestLookaheadLinear(t *testing.T) {
	cases := []struct {
		pattern string
		text    func(n int) string
		matches func(n int) int
	}{
		// An empty match before every character: the body holds everywhere.
		{`(?=(a*)*b)`, func(n int) string { return strings.Repeat("a", n-1) + "b" }, func(n int) int { return n }},
		// The body never holds (no b), so nothing matches, after scanning to the end each time.
		{`(?=(a*)*b)`, func(n int) string { return strings.Repeat("a", n) }, func(int) int { return 0 }},
		// Negative lookahead, a body with alternation and a nested lookahead, after a consuming atom.
		{`a(?!(?:a|ab)*c(?=a*$))`, func(n int) string { return strings.Repeat("a", n-1) + "c" }, func(n int) int { return 0 }},
		{`a(?=(?:a|ab)*c)`, func(n int) string { return strings.Repeat("a", n-1) + "c" }, func(n int) int { return n - 1 }},
	}
	for _, c := range cases {
		re := MustCompile(c.pattern)
		var prev int64
		for i, n := range []int{2_000, 16_000, 200_000} {
			got, work := steps(t, re, c.text(n))
			if len(got) != c.matches(n) {
				t.Fatalf("%q on %d bytes: %d matches, want %d", c.pattern, n, len(got), c.matches(n))
			}
			t.Logf("%q on %d bytes: %d steps", c.pattern, n, work)
			if i > 0 {
				// Linear work grows 8x from 2k to 16k and 12.5x from 16k to 200k; quadratic work
				// would grow 64x and 156x. The bounds leave room for constant overheads only.
				limit := []float64{0, 10, 15}[i]
				if ratio := float64(work) / float64(prev); ratio > limit {
					t.Fatalf("%q: work grew %.1fx for %.1fx the text (more than %.0fx: not linear)",
						c.pattern, ratio, float64(n)/float64([]int{2_000, 16_000, 200_000}[i-1]), limit)
				}
			}
			prev = work
		}
	}
}

// Lookaround patterns whose lookahead bodies are not fixed strings (decided by the oracle), with
// nested lookarounds, assertions inside bodies, case folding and multi-byte characters.
var lookPatterns = []string{
	`(?=(a*)*b)`, `a(?=b|c)`, `(?!a+b)`, `a(?=(?:a|ab)*c)`, `(?=a(?!b))a`, `x(?=\p{L}+\b)`,
	`(?=.*\n)`, `(?=^a)`, `(?<=a)(?=b+$)`, `(?=(?=a)a*b)`, `(?!(?:ab|a)*$)`, `(?=a{2,3}(?!a))`,
	`(?i:(?=K+s))`, `\b(?=\w*é)`, `(?=é|🙂)`, `\s+(?!\S)|\s+`, `(?=(?:a|b)*?b)\p{L}+`, `(?!)|a`,
	`(?=)`, `(?=(?!a)(?:b|$))`, `(?<!a)(?=a+$)`, `a*(?=b*\z)`, `(?=\s*[\r\n]+)\s`,
}

var lookTexts = []string{
	"", "a", "b", "ab", "aab", "aaab", "abc", "aac", "xhello world", "é", "aé", "a\nb\n", "ba\nab",
	"kKs \u212as", "🙂x", "ab ab  a", "   \n  x", "aaaa", "bbaab", "abab\nab", "a\xffb", "\xe2\x82a",
}

// findAllMode is FindAll on a machine of its own; direct makes lookaheads run at each position as
// the engine did before the oracles (the reference).
func findAllMode(re *Regexp, s string, direct bool) [][2]int {
	m := newMachine(re)
	m.direct = direct
	m.reset(context.Background(), s)
	var out [][2]int
	re.iterate(context.Background(), m, s, func(a, b int) { out = append(out, [2]int{a, b}) })
	return out
}

// compareLook checks the oracle against the direct check: every match of FindAll, and the search
// from every byte offset (character boundaries or not), asked in decreasing order on one machine
// so that the right-to-left passes are resumed rather than restarted.
func compareLook(re *Regexp, s string) error {
	if got, want := findAllMode(re, s, false), findAllMode(re, s, true); fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("pattern %q on %q: FindAll %v, direct %v", re.expr, s, got, want)
	}
	m, d := newMachine(re), newMachine(re)
	d.direct = true
	m.reset(context.Background(), s)
	d.reset(context.Background(), s)
	for from := len(s); from >= 0; from-- {
		a1, b1, ok1 := m.run(re.prog, &m.main, from, false, false)
		a2, b2, ok2 := d.run(re.prog, &d.main, from, false, false)
		if a1 != a2 || b1 != b2 || ok1 != ok2 {
			return fmt.Errorf("pattern %q on %q from %d: (%d,%d,%v), direct (%d,%d,%v)", re.expr, s, from, a1, b1, ok1, a2, b2, ok2)
		}
	}
	return nil
}

func TestLookaroundMatchesDirect(t *testing.T) {
	for _, p := range lookPatterns {
		re, err := Compile(p)
		if err != nil {
			t.Fatalf("Compile(%q): %v", p, err)
		}
		for _, s := range lookTexts {
			if err := compareLook(re, s); err != nil {
				t.Error(err)
			}
		}
	}
}

// TestLookaroundSemantics pins a few results by hand, independently of both ways of deciding.
func TestLookaroundSemantics(t *testing.T) {
	cases := []struct {
		pattern, text string
		want          [][2]int
	}{
		{`(?=(a*)*b)`, "aab", [][2]int{{0, 0}, {1, 1}, {2, 2}}},
		{`(?=(a*)*b)`, "aa", nil},
		// At offset 1 the body sees "baca": no (a|ab)* reaches a c.
		{`a(?=(?:a|ab)*c)`, "aabaca", [][2]int{{0, 1}, {3, 4}}},
		{`a(?!(?:a|ab)*c)`, "aabaca", [][2]int{{1, 2}, {5, 6}}},
		{`(?=a(?!b))a`, "abaac", [][2]int{{2, 3}, {3, 4}}},
		{`x(?=\p{L}+\b)`, "xab xa1 x", [][2]int{{0, 1}}},
		{`(?<!a)(?=a+$)`, "baa", [][2]int{{1, 1}}},
	}
	for _, c := range cases {
		got := findAll(MustCompile(c.pattern), c.text)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("pattern %q on %q: got %v, want %v", c.pattern, c.text, got, c.want)
		}
	}
}

// FuzzLookaround generates patterns with lookaheads, lookbehinds and assertions, nested, and
// checks that the oracles decide exactly what running each body at each position decides, on
// any bytes (invalid UTF-8 and offsets inside characters included).
func FuzzLookaround(f *testing.F) {
	f.Add([]byte{0, 5, 1, 7, 2, 9}, "aab ab\n")
	f.Add([]byte{1, 1, 0, 3, 4, 2, 200, 7}, "xhello a\xffb")
	f.Add([]byte{22, 11, 0, 0, 13, 1, 6, 5}, "  é🙂 ab\nba")
	f.Fuzz(func(t *testing.T, prog []byte, text string) {
		if len(prog) > 64 || len(text) > 64 {
			return
		}
		g := &lookGen{gen: gen{b: prog}}
		p := g.alt(0)
		re, err := Compile(p)
		var perr *Error
		if errors.As(err, &perr) && perr.Msg == "quantifier on a zero-width assertion" {
			return // the grammar quantified a group that is only an assertion, e.g. (?:\Z)?
		}
		if err != nil {
			t.Fatalf("Compile(%q): %v", p, err)
		}
		if err := compareLook(re, text); err != nil {
			t.Fatal(err)
		}
	})
}

type lookGen struct{ gen }

var lookAtoms = []string{`a`, `b`, ` `, `é`, `.`, `[ab]`, `[^a]`, `\p{L}`, `\n`, `\s`, `\w`, `(?i:k)`}
var lookAsserts = []string{`^`, `$`, `\b`, `\B`, `\A`, `\z`, `\Z`}

func (g *lookGen) alt(depth int) string {
	parts := make([]string, 1+g.next()%3)
	for i := range parts {
		parts[i] = g.concat(depth)
	}
	return strings.Join(parts, "|")
}

func (g *lookGen) concat(depth int) string {
	var b strings.Builder
	for n := 1 + g.next()%3; n > 0; n-- {
		c := g.next()
		switch {
		case c%9 == 0 && depth < 3:
			b.WriteString("(?=" + g.alt(depth+1) + ")")
		case c%9 == 1 && depth < 3:
			b.WriteString("(?!" + g.alt(depth+1) + ")")
		case c%9 == 2 && depth < 3:
			b.WriteString("(?:" + g.alt(depth+1) + ")" + quants[g.next()%len(quants)])
		case c%9 == 3:
			op := []string{"(?<=", "(?<!"}[g.next()%2]
			b.WriteString(op + lookAtoms[g.next()%len(lookAtoms)] + lookAtoms[g.next()%len(lookAtoms)] + ")")
		case c%9 == 4:
			b.WriteString(lookAsserts[g.next()%len(lookAsserts)])
		default:
			b.WriteString(lookAtoms[c%len(lookAtoms)] + quants[g.next()%len(quants)])
		}
	}
	return b.String()
}

// TestFindAllContext: a cancelled context stops the search, from the Pike VM (between the
// matches and inside one long search) and from the fast matchers, with an error wrapping the
// context's; an uncancelled one changes nothing.
func TestFindAllContext(t *testing.T) {
	for _, c := range []struct{ p, long string }{
		{`(?=(a*)*b)`, strings.Repeat("a", 1_000_000) + "b"},
		{`a*c|a`, strings.Repeat("a", 1_000_000)},
		{patGPT2, strings.Repeat("ab ", 300_000)},
	} {
		p, long, re := c.p, c.long, MustCompile(c.p)
		ctx, cancel := context.WithCancel(context.Background())
		matches := 0
		err := re.FindAllContext(ctx, long, func(int, int) {
			matches++
			cancel() // from inside the iteration: the next poll must see it
		})
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), fmt.Sprintf("%q", p)) {
			t.Errorf("%q: err = %v, want context.Canceled naming the pattern", p, err)
		}
		if matches >= 2*pollEvery {
			t.Errorf("%q: %d matches after cancelling at the first", p, matches)
		}
		cancel()
		// `a*c|a` has one search that reads to the end of the text before its first match: a
		// context cancelled before the call stops it inside that search.
		work, err := re.findAll(ctx, long, func(int, int) { t.Fatalf("%q: a match after cancellation", p) })
		if !errors.Is(err, context.Canceled) || work > 4*pollEvery {
			t.Errorf("%q, cancelled before: err = %v after %d steps", p, err, work)
		}
		var want, got [][2]int
		re.FindAll("aab a  b", func(a, b int) { want = append(want, [2]int{a, b}) })
		if err := re.FindAllContext(context.Background(), "aab a  b", func(a, b int) { got = append(got, [2]int{a, b}) }); err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%q: FindAllContext %v, %v; FindAll %v", p, got, err, want)
		}
	}
}
