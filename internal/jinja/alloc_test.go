package jinja

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// Issue 38, finding 3: what a filter or method makes is charged against MaxBytes before it is
// allocated. Each case below works on a string passed in (values passed in are free), under a
// MaxBytes far below what the operation would make; the render must stop with the MaxBytes
// *LimitError having allocated a small fraction of that. The old code built the pieces first
// (16 bytes of string header per piece or code point, plus the list) and charged after.

// bigInput is the size of the strings passed in.
const bigInput = 8 << 20

// allocLimit is the MaxBytes of these renders, and allocSlack what a render may allocate beyond
// it (the parse, the render's own structures; the test's own bookkeeping).
const (
	allocLimit = 1 << 20
	allocSlack = 2 << 20
)

// renderAlloc renders src with vars under lim and returns the bytes the process allocated
// meanwhile (MemStats.TotalAlloc: every allocation counts, freed or not) and the error.
func renderAlloc(t *testing.T, src string, vars map[string]Value, lim Limits) (uint64, error) {
	t.Helper()
	tm, err := Parse(src, transformersOptions)
	if err != nil {
		t.Fatalf("%s: %v", src, err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = tm.Render(context.Background(), vars, lim)
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, err
}

func bigVars() map[string]Value {
	return map[string]Value{
		"lines":  String(strings.Repeat("a\n", bigInput/2)),
		"commas": String(strings.Repeat("a,", bigInput/2)),
		"words":  String(strings.Repeat("a ", bigInput/2)),
		"plain":  String(strings.Repeat("a", bigInput)),
		"accent": String(strings.Repeat("é", bigInput/2)),
		"quotes": String(strings.Repeat("'", bigInput)),
		"tags":   String(strings.Repeat("<b>a &amp; b</b> ", bigInput/16)),
		"many":   List(repeatValues(String(strings.Repeat("A", 1<<20)), 64)...),
		"rows":   List(repeatValues(List(String(strings.Repeat("A", 1<<20))), 64)...),
	}
}

func repeatValues(v Value, n int) []Value {
	out := make([]Value, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestChargeBeforeAllocating: each operation on a big input stops at MaxBytes with bounded
// allocation.
func TestChargeBeforeAllocating(t *testing.T) {
	vars := bigVars()
	for _, c := range []struct{ name, src string }{
		{"splitlines", "{{ lines.splitlines()|length }}"},
		{"splitlines keepends", "{{ lines.splitlines(true)|length }}"},
		{"split sep", "{{ commas.split(',')|length }}"},
		{"rsplit sep", "{{ commas.rsplit(',')|length }}"},
		{"rsplit sep maxsplit", "{{ commas.rsplit(',', 10**9)|length }}"},
		{"split whitespace", "{{ words.split()|length }}"},
		{"rsplit whitespace", "{{ words.rsplit()|length }}"},
		{"reverse", "{{ plain|reverse|length }}"},
		{"reverse accents", "{{ accent|reverse|length }}"},
		{"slice accents step", "{{ accent[::-1]|length }}"},
		{"indent", "{{ lines|indent|length }}"},
		{"striptags", "{{ tags|striptags|length }}"},
		{"upper", "{{ plain|upper|length }}"},
		{"upper accents", "{{ accent.upper()|length }}"},
		{"lower method", "{{ plain.lower()|length }}"},
		{"title", "{{ words|title|length }}"},
		{"capitalize", "{{ accent|capitalize|length }}"},
		{"swapcase", "{{ accent.swapcase()|length }}"},
		{"escape", "{{ quotes|escape|length }}"},
		{"truncate", "{{ plain|truncate(8388598, true)|length }}"},
		{"replace", "{{ plain|replace('a', 'bb')|length }}"},
		{"join method", "{{ ''.join(many)|length }}"},
		{"join filter", "{{ many|join|length }}"},
		{"center", "{{ plain|center(8388610)|length }}"},
		{"ljust", "{{ plain.ljust(8388610)|length }}"},
		{"zfill", "{{ plain.zfill(8388610)|length }}"},
		{"percent format", "{{ ('%s' % plain)|length }}"},
		{"str.format", "{{ '{}'.format(plain)|length }}"},
		{"format filter", "{{ '%s'|format(plain)|length }}"},
		{"concat", "{{ (plain ~ plain)|length }}"},
		{"plus", "{{ (plain + plain)|length }}"},
		{"repeat", "{{ (plain * 2)|length }}"},
		{"sort lowered", "{{ many|sort|length }}"},
		{"unique lowered", "{{ many|unique|list|length }}"},
		{"max lowered", "{{ many|max|length }}"},
		{"groupby lowered", "{{ rows|groupby(0)|list|length }}"},
		{"string of list", "{{ [plain]|string|length }}"},
		{"tojson", "{{ plain|tojson|length }}"},
		{"list of string", "{{ plain|list|length }}"},
		{"for over string", "{% for c in plain %}{% endfor %}"},
		{"generation spans", "{% set r = range(3000) %}x{% for i in r %}{% for j in r %}{% generation %}{% endgeneration %}{% endfor %}{% endfor %}"},
	} {
		t.Run(c.name, func(t *testing.T) {
			alloc, err := renderAlloc(t, c.src, vars, Limits{MaxBytes: allocLimit})
			var le *LimitError
			if !errors.As(err, &le) || le.Limit != "MaxBytes" {
				t.Fatalf("got %v, want the MaxBytes limit", err)
			}
			t.Logf("%v, %.1f MiB allocated", err, float64(alloc)/(1<<20))
			if alloc > allocLimit+allocSlack {
				t.Fatalf("allocated %d bytes under a MaxBytes of %d", alloc, allocLimit)
			}
		})
	}
}

// TestSubstringsFree: a substring is free (Go shares the bytes), and finding where it starts
// in code points allocates nothing either (the old slice of a non-ASCII string made a string
// header per code point, 64 MiB here, without charging it).
func TestSubstringsFree(t *testing.T) {
	vars := bigVars()
	for _, src := range []string{"{{ accent[1:]|length }}", "{{ accent[-3:] }}", "{{ plain.split(',', 10**9)|length }}", "{{ accent.split('x')|length }}", "{{ accent.strip()|length }}"} {
		alloc, err := renderAlloc(t, src, vars, Limits{MaxBytes: allocLimit})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		t.Logf("%s: %.1f MiB allocated", src, float64(alloc)/(1<<20))
		if alloc > allocSlack {
			t.Errorf("%s: allocated %d bytes", src, alloc)
		}
	}
}

// TestTupleKeyAllocation: a dict key that is a tuple of big strings is hashed in place, not
// through a string as long as its items together (the old key was 64 MiB here).
func TestTupleKeyAllocation(t *testing.T) {
	vars := bigVars()
	src := "{% set k = (plain, plain, plain, plain, plain, plain, plain, plain) %}{% set d = {k: 1} %}{{ d[k] }}{{ d[(plain, plain, plain, plain, plain, plain, plain, plain)] }}{{ k in d }}"
	alloc, err := renderAlloc(t, src, vars, Limits{MaxBytes: allocLimit})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%.1f MiB allocated", float64(alloc)/(1<<20))
	if alloc > allocSlack {
		t.Fatalf("allocated %d bytes", alloc)
	}
}

// TestSmallInputsUnchanged: the operations above on small inputs still give Python's answers
// (checked with Jinja2 3.1.6).
func TestSmallInputsUnchanged(t *testing.T) {
	vars := map[string]Value{"s": String(" a\tb\r\nc\u2028d  é\x1ce "), "w": String("Hé wörld-x ǅ ŉ ß")}
	for src, want := range map[string]string{
		"{{ s.splitlines() }}":              `[' a\tb', 'c', 'd  é', 'e ']`,
		"{{ s.splitlines(true) }}":          `[' a\tb\r\n', 'c\u2028', 'd  é\x1c', 'e ']`,
		"{{ s.split() }}":                   `['a', 'b', 'c', 'd', 'é', 'e']`,
		"{{ s.split(None, 2) }}":            `['a', 'b', 'c\u2028d  é\x1ce ']`,
		"{{ s.rsplit(None, 2) }}":           `[' a\tb\r\nc\u2028d', 'é', 'e']`,
		"{{ 'a,b,,c'.split(',') }}":         `['a', 'b', '', 'c']`,
		"{{ 'a,b,,c'.split(',', 1) }}":      `['a', 'b,,c']`,
		"{{ 'a,b,,c'.rsplit(',', 1) }}":     `['a,b,', 'c']`,
		"{{ 'a,b,,c'.split(',', 0) }}":      `['a,b,,c']`,
		"{{ 'a,b,,c'.rsplit(',', 10**9) }}": `['a', 'b', '', 'c']`,
		"{{ 'aaa'.rsplit('aa') }}|{{ 'aaa'.split('aa') }}|{{ 'aaaaa'.rsplit('aa', 1) }}": "['a', '']|['', 'a']|['aaa', '']",
		"{{ ''.split(',') }}|{{ ''.split() }}":                                           `['']|[]`,
		"{{ w|reverse }}":                                                                "ß ŉ ǅ x-dlröw éH",
		"{{ w[::-2] }}|{{ w[1:6] }}|{{ w[-3:] }}":                                        "ßŉǅxdrwé|é wör|ŉ ß",
		"{{ w|upper }}|{{ w.lower() }}":                                                  "HÉ WÖRLD-X Ǆ ʼN SS|hé wörld-x ǆ ŉ ß",
		"{{ w|title }}|{{ w.title() }}":                                                  "Hé Wörld-X Ǆ ʼN SS|Hé Wörld-X ǅ ʼN Ss",
		"{{ w|capitalize }}|{{ w.swapcase() }}":                                          "Hé wörld-x ǆ ŉ ß|hÉ WÖRLD-X ǅ ʼN SS",
		"{{ \"<a href='x'>&</a>\"|e }}":                                                  "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;",
		"{{ 'a\\nb\\n\\nc'|indent(2, true) }}":                                           "  a\n  b\n\n  c",
		"{{ 'a\\nb\\n'|indent('> ', blank=true) }}":                                      "a\n> b\n> ",
		"{{ '<p>a  <b>b</b></p>&amp; c'|striptags }}":                                    "a b& c",
		"{{ 'hello world'|truncate(9) }}|{{ 'hello big world'|truncate(9) }}|{{ 'hello world'|truncate(5, true, '..', 0) }}": "hello world|hello...|hel..",
		"{{ '-42'.zfill(6) }}|{{ 'ab'.center(7, '*') }}|{{ 'ab'|center(5) }}|{{ 'é'.rjust(3, 'ü') }}":                        "-00042|***ab**|  ab |üüé",
		"{{ '%-5s|%5r|%05d' % ('é', 'a', -3) }}":                                                 "é    |  'a'|-0003",
		"{{ '{:^7}|{!r:>5}|{:*<4}'.format('é', 'a', 1) }}":                                       "   é   |  'a'|1***",
		"{{ ['B', 'a', 'C']|sort }}|{{ ['b', 'B', 'a']|unique|list }}|{{ ['b', 'C', 'a']|max }}": "['a', 'B', 'C']|['b', 'a']|C",
		"{{ 'é'|list }}|{{ 'ab' in 'cab' }}|{{ 'abcab'.count('ab') }}|{{ 'aé'|length }}":         "['é']|True|2|2",
		"{{ ', '.join(['a', 'b']) }}|{{ ['a', 1]|join('-') }}":                                   "a, b|a-1",
	} {
		res, err := renderBounded(t, context.Background(), src, vars, Limits{})
		if err != nil || res.Text != want {
			t.Errorf("%s: %q %v, want %q", src, res.Text, err, want)
		}
	}
}
