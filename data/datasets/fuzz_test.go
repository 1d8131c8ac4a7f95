package datasets

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// The glob oracle: a second, independent implementation of fsspec's glob_translate, written as
// a token list and a memoized backtracking matcher instead of a regular expression, with
// character classes built by CPython's fnmatch algorithm (split the class at "-" into chunks,
// drop reversed ranges by merging chunks) rather than by writeClass's left-to-right scan. The
// fuzz test checks that both agree.

type tokKind int

const (
	tLit     tokKind = iota // one rune
	tStar                   // [^/]*
	tQMark                  // [^/]
	tClass                  // a class (which may match "/")
	tWhole                  // [^/]+ (a component that is just "*")
	tAnySegs                // (?:.+/)? (a "**" component that is not last)
	tAnyLast                // .* (a last "**" component)
	tNever                  // an empty class
	tAnyRune                // a negated empty class
)

type tok struct {
	kind   tokKind
	r      rune
	negate bool
	lits   []rune
	ranges [][2]rune
}

func (t tok) class(r rune) bool {
	in := slices.Contains(t.lits, r)
	for _, rg := range t.ranges {
		in = in || (rg[0] <= r && r <= rg[1])
	}
	return in != t.negate
}

// oracleTokens translates a pattern; ok is false where fsspec raises.
func oracleTokens(p string) ([]tok, bool) {
	comps := strings.Split(p, "/")
	var out []tok
	for i, c := range comps {
		last := i == len(comps)-1
		switch {
		case c == "*":
			out = append(out, tok{kind: tWhole})
			if !last {
				out = append(out, tok{kind: tLit, r: '/'})
			}
			continue
		case c == "**":
			if last {
				out = append(out, tok{kind: tAnyLast})
			} else {
				out = append(out, tok{kind: tAnySegs})
			}
			continue
		case strings.Contains(c, "**"):
			return nil, false
		}
		out = append(out, fnmatchTokens([]rune(c))...)
		if !last {
			out = append(out, tok{kind: tLit, r: '/'})
		}
	}
	return out, true
}

// fnmatchTokens is CPython's fnmatch._translate, token by token.
func fnmatchTokens(pat []rune) []tok {
	var out []tok
	n := len(pat)
	for i := 0; i < n; {
		c := pat[i]
		i++
		switch c {
		case '*':
			if len(out) == 0 || out[len(out)-1].kind != tStar {
				out = append(out, tok{kind: tStar})
			}
		case '?':
			out = append(out, tok{kind: tQMark})
		case '[':
			j := i
			if j < n && pat[j] == '!' {
				j++
			}
			if j < n && pat[j] == ']' {
				j++
			}
			for j < n && pat[j] != ']' {
				j++
			}
			if j >= n {
				out = append(out, tok{kind: tLit, r: '['})
				continue
			}
			out = append(out, pyClass(pat, i, j))
			i = j + 1
		default:
			out = append(out, tok{kind: tLit, r: c})
		}
	}
	return out
}

// pyClass builds the class pat[i:j] with fnmatch's chunk algorithm.
func pyClass(pat []rune, i, j int) tok {
	stuff := pat[i:j]
	var chunks [][]rune
	if !slices.Contains(stuff, '-') {
		chunks = [][]rune{slices.Clone(stuff)}
	} else {
		k := i + 1
		if pat[i] == '!' {
			k = i + 2
		}
		for {
			f := -1
			for q := k; q < j; q++ {
				if pat[q] == '-' {
					f = q
					break
				}
			}
			if f < 0 {
				break
			}
			chunks = append(chunks, slices.Clone(pat[i:f]))
			i = f + 1
			k = f + 3
		}
		if chunk := pat[i:j]; len(chunk) > 0 {
			chunks = append(chunks, slices.Clone(chunk))
		} else {
			chunks[len(chunks)-1] = append(chunks[len(chunks)-1], '-')
		}
		for k := len(chunks) - 1; k > 0; k-- {
			a, b := chunks[k-1], chunks[k]
			if a[len(a)-1] > b[0] {
				chunks[k-1] = append(slices.Clone(a[:len(a)-1]), b[1:]...)
				chunks = slices.Delete(chunks, k, k+1)
			}
		}
	}
	// The class text Python builds: the chunks joined by unescaped "-" (the ranges); every rune
	// of a chunk is literal text.
	type ctok struct {
		r    rune
		join bool
	}
	var text []ctok
	for ci, ch := range chunks {
		if ci > 0 {
			text = append(text, ctok{'-', true})
		}
		for _, r := range ch {
			text = append(text, ctok{r, false})
		}
	}
	switch {
	case len(text) == 0:
		return tok{kind: tNever}
	case len(text) == 1 && text[0].r == '!':
		return tok{kind: tAnyRune}
	}
	t := tok{kind: tClass}
	if text[0].r == '!' && !text[0].join {
		t.negate = true
		text = text[1:]
	}
	// Python's re then reads the class: an item followed by an unescaped "-" and another item is
	// a range; anything else is a literal.
	for q := 0; q < len(text); {
		lo := text[q].r
		q++
		if q+1 < len(text) && text[q].join {
			t.ranges = append(t.ranges, [2]rune{lo, text[q+1].r})
			q += 2
			continue
		}
		t.lits = append(t.lits, lo)
	}
	return t
}

// oracleMatch matches the whole of s against the tokens.
func oracleMatch(toks []tok, s []rune) bool {
	memo := map[[2]int]bool{}
	var m func(ti, si int) bool
	m = func(ti, si int) bool {
		key := [2]int{ti, si}
		if v, ok := memo[key]; ok {
			return v
		}
		var res bool
		if ti == len(toks) {
			res = si == len(s)
		} else {
			t := toks[ti]
			switch t.kind {
			case tLit:
				res = si < len(s) && s[si] == t.r && m(ti+1, si+1)
			case tQMark:
				res = si < len(s) && s[si] != '/' && m(ti+1, si+1)
			case tClass:
				res = si < len(s) && t.class(s[si]) && m(ti+1, si+1)
			case tAnyRune:
				res = si < len(s) && m(ti+1, si+1)
			case tNever:
				res = false
			case tStar, tWhole:
				min := 0
				if t.kind == tWhole {
					min = 1
				}
				for e := si; e <= len(s); e++ {
					if e > si && s[e-1] == '/' {
						break
					}
					if e-si >= min && m(ti+1, e) {
						res = true
						break
					}
				}
			case tAnySegs:
				res = m(ti+1, si)
				for e := si + 2; !res && e <= len(s); e++ {
					res = s[e-1] == '/' && m(ti+1, e)
				}
			case tAnyLast:
				res = m(ti+1, len(s))
			}
		}
		memo[key] = res
		return res
	}
	return m(0, 0)
}

// FuzzGlob checks that compiling and matching never panic and that the regular expression agrees
// with the oracle on every pattern and path.
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{
		{"**", "a/b/c.csv"},
		{"**/train[-._ 0-9]*", "x/train_1.csv"},
		{"data/*-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9]*.*", "data/train-00000-of-00001.parquet"},
		{"a[!x]b", "a/b"},
		{"[x-ab-c]", "b"},
		{"[!z-a]", "/"},
		{"[b-a-c]", "-"},
		{"[]-a]", "^"},
		{"a[b", "a[b"},
		{"*/**/x?", "a/b/c/xy"},
		{".*/.*", ".h/.f"},
		{"__*/*", "__p/x"},
		{"**.csv", "a.csv"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, p string) {
		if len(pattern) > 64 || len(p) > 64 || !utf8.ValidString(pattern) || !utf8.ValidString(p) {
			return // the oracle backtracks; bounded inputs keep it quick
		}
		g, err := compileGlob(pattern)
		if err != nil {
			return
		}
		got := g.match(p) // must not panic
		if !g.magic {
			return
		}
		toks, ok := oracleTokens(g.src)
		if !ok {
			t.Fatalf("pattern %q compiled, but fsspec refuses it", pattern)
		}
		if want := oracleMatch(toks, []rune(p)); g.re.MatchString(p) != want {
			t.Fatalf("pattern %q path %q: regexp %v says %v, oracle %v", pattern, p, g.re, !want, want)
		}
		if got && !g.re.MatchString(p) {
			t.Fatalf("match accepted %q for %q without the regexp", p, pattern)
		}
		if g.re.MatchString(p) && !strings.Contains(p, g.need) {
			t.Fatalf("pattern %q matches %q, which lacks the literal %q the prefilter requires", pattern, p, g.need)
		}
	})
}

// FuzzParseReadmeConfigs: any README is parsed or refused, never a panic, and what is accepted
// holds what the resolver relies on.
func FuzzParseReadmeConfigs(f *testing.F) {
	f.Add([]byte(pushToHubReadme))
	f.Add([]byte("---\nconfigs:\n- config_name: a\n  data_files: x.csv\n  default: yes\n---\n"))
	f.Add([]byte("---\nconfigs:\n- config_name: a\n  data_dir: d\n  data_files:\n  - split: train\n    path: [a, b]\n---\n"))
	f.Add([]byte("---\nx: &a [*a]\nconfigs: *a\n---\n"))
	f.Add([]byte("---\r\nconfigs: [{config_name: c, data_files: [{split: t, path: p}]}]\r\n---"))
	f.Add([]byte("---\n- a\n---\n"))
	f.Add([]byte("no metadata"))
	f.Fuzz(func(t *testing.T, readme []byte) {
		cfgs, err := ParseReadmeConfigs(readme)
		if err != nil {
			return
		}
		names := map[string]bool{}
		for _, c := range cfgs {
			if c.Name == "" || names[c.Name] {
				t.Fatalf("config name %q empty or repeated", c.Name)
			}
			names[c.Name] = true
			for _, sp := range c.DataFiles {
				if !validSplitName(sp.Split) {
					t.Fatalf("invalid split name %q accepted", sp.Split)
				}
			}
			if strings.HasPrefix(c.DataDir, "/") || slices.Contains(strings.Split(c.DataDir, "/"), "..") {
				t.Fatalf("data_dir %q escapes", c.DataDir)
			}
		}
	})
}

// FuzzResolveFiles: any listing and README resolve or fail cleanly, and a result only names files
// of the listing.
func FuzzResolveFiles(f *testing.F) {
	f.Add("README.md\ndata/train-00000-of-00001.parquet\ndata/test-00000-of-00001.parquet", []byte(""), "")
	f.Add(strings.Join(pushToHubFiles, "\n"), []byte(pushToHubReadme), "other")
	f.Add("train/a.csv\ntest/b.csv\nx.txt", []byte("---\nconfigs:\n- config_name: c\n  data_files: '**/*.csv'\n---\n"), "c")
	f.Add("a.csv.gz\nb.tsv", []byte(nil), "default")
	f.Fuzz(func(t *testing.T, listing string, readme []byte, config string) {
		if len(listing) > 4096 {
			return
		}
		files := strings.Split(listing, "\n")
		r, err := ResolveFiles(files, readme, config)
		if err != nil {
			return
		}
		if !slices.Contains(supportedFormats, r.Format) || len(r.Splits) == 0 {
			t.Fatalf("result %+v", r)
		}
		for s, fs := range r.Splits {
			if len(fs) == 0 || !validSplitName(s) {
				t.Fatalf("split %q: %v", s, fs)
			}
			for _, x := range fs {
				if !slices.Contains(files, x) {
					t.Fatalf("split %q names %q, which is not in the listing", s, x)
				}
			}
		}
	})
}
