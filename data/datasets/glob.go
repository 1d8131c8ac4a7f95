package datasets

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// maxPatternLen bounds a data_files pattern. Patterns come from a README that anyone may write;
// a compiled pattern is linear in its length, and no real pattern comes near this.
const maxPatternLen = 4096

// globPattern is one data_files pattern compiled the way datasets resolves it: fsspec's glob
// (fsspec >= 2023.12, whose translation is CPython 3.13's glob.translate with recursive=True and
// include_hidden=True) plus datasets' own filters for hidden and "__special__" names and for its
// metadata files (resolve_pattern).
type globPattern struct {
	src   string         // the pattern as written (after a leading "./" is dropped)
	re    *regexp.Regexp // nil when the pattern has no magic (it names one file) or is not compiled yet
	expr  string         // the RE2 translation of a magic pattern, compiled by compile
	magic bool
	// need is the longest run of literal characters every match contains: a strings.Contains
	// test that skips the regexp for most files of a large listing.
	need string
	// hiddenParts and specialParents are the pattern's own counts of hidden components and of
	// "__" parent components: a matched path with more of either was not asked for.
	hiddenParts    int
	specialParents int
	base           string // the pattern's last component: a metadata file named here is kept
}

// hasMagic is glob.has_magic: "*", "?" and "[" make a pattern a glob.
func hasMagic(p string) bool { return strings.ContainsAny(p, "*?[") }

// compileGlob checks p, translates it and compiles the translation. Patterns are relative to the
// dataset's root (or the config's data_dir): absolute paths, URLs and ".." are refused, since the
// loader reads only the repository's or the directory's own files.
func compileGlob(p string) (*globPattern, error) {
	g, err := parseGlob(p)
	if err != nil {
		return nil, err
	}
	if err := g.compile(); err != nil {
		return nil, err
	}
	return g, nil
}

// parseGlob is compileGlob without compiling the regexp: every check and the translation, so
// that a pattern that cannot be valid is refused, and what resolving it costs (candidates) is
// known, before any regexp is built.
func parseGlob(p string) (*globPattern, error) {
	if len(p) > maxPatternLen {
		return nil, fmt.Errorf("pattern of %d bytes exceeds %d", len(p), maxPatternLen)
	}
	for strings.HasPrefix(p, "./") {
		p = p[2:]
	}
	switch {
	case p == "":
		return nil, fmt.Errorf("empty pattern")
	case strings.Contains(p, "://") || strings.Contains(p, "::"):
		return nil, fmt.Errorf("pattern %q: URLs and chained paths are not supported, only paths in the dataset", p)
	case strings.HasPrefix(p, "/"):
		return nil, fmt.Errorf("pattern %q: absolute paths are not supported, only paths relative to the dataset", p)
	}
	for _, part := range strings.Split(p, "/") {
		if part == ".." {
			return nil, fmt.Errorf("pattern %q: \"..\" leaves the dataset", p)
		}
	}
	g := &globPattern{
		src:            p,
		magic:          hasMagic(p),
		hiddenParts:    countHidden(p),
		specialParents: countSpecialParents(p),
		base:           path.Base(p),
	}
	if g.magic {
		expr, need, err := translateGlob(p)
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %w", p, err)
		}
		g.expr, g.need = expr, need
	}
	return g, nil
}

// compile builds the regexp of a magic pattern parsed by parseGlob (once).
func (g *globPattern) compile() error {
	if !g.magic || g.re != nil {
		return nil
	}
	re, err := regexp.Compile(g.expr)
	if err != nil {
		return fmt.Errorf("pattern %q: %w", g.src, err)
	}
	g.re = re
	return nil
}

// candidates returns the range [lo, hi) of sorted (a sorted file list) that can match the
// pattern: the one file a pattern without magic names, else the files that start with the
// pattern's literal prefix (the text before its first "*", "?" or "["), since the anchored
// translation matches those characters literally. It costs two binary searches, so that
// resolving a pattern can be charged what matching it will cost before any matching is done.
func (g *globPattern) candidates(sorted []string) (lo, hi int) {
	if !g.magic {
		name := path.Clean(g.src)
		i, found := slices.BinarySearch(sorted, name)
		if !found {
			return i, i
		}
		return i, i + 1
	}
	prefix := g.src[:strings.IndexAny(g.src, "*?[")]
	lo, _ = slices.BinarySearch(sorted, prefix)
	hi = lo + sort.Search(len(sorted)-lo, func(i int) bool { return !strings.HasPrefix(sorted[lo+i], prefix) })
	return lo, hi
}

// match reports whether the relative file path rel is resolved by the pattern: it matches, it is
// not a hidden or "__" path the pattern did not name, and it is not one of datasets' metadata
// files (README.md, dataset_infos.json, ...) unless the pattern names that file.
func (g *globPattern) match(rel string) bool {
	if g.magic {
		if !strings.Contains(rel, g.need) || !g.re.MatchString(rel) {
			return false
		}
	} else if rel != path.Clean(g.src) {
		return false
	}
	if name := path.Base(rel); ignoredFiles[name] && name != g.base {
		return false
	}
	return countSpecialParents(rel) == g.specialParents && countHidden(rel) == g.hiddenParts
}

// ignoredFiles are datasets' FILES_TO_IGNORE: repository metadata that is never data.
var ignoredFiles = map[string]bool{
	"README.md":          true,
	"config.json":        true,
	"dataset_info.json":  true,
	"dataset_infos.json": true,
	"dummy_data.zip":     true,
	"dataset_dict.json":  true,
}

// parts splits p like PurePath(p).parts for a relative POSIX path: empty and "." components go.
func parts(p string) []string {
	var out []string
	for _, s := range strings.Split(p, "/") {
		if s != "" && s != "." {
			out = append(out, s)
		}
	}
	return out
}

// countHidden counts the components that start with "." and are not all dots
// (_is_unrequested_hidden_file_or_is_inside_unrequested_hidden_dir): a path is kept only if the
// pattern that matched it has as many, i.e. the pattern asked for each hidden part.
func countHidden(p string) int {
	n := 0
	for _, s := range parts(p) {
		if strings.HasPrefix(s, ".") && strings.Trim(s, ".") != "" {
			n++
		}
	}
	return n
}

// countSpecialParents counts the directory components (not the last one) that start with "__"
// (_is_inside_unrequested_special_dir), such as __pycache__.
func countSpecialParents(p string) int {
	ps := parts(p)
	n := 0
	for _, s := range ps[:max(len(ps)-1, 0)] {
		if strings.HasPrefix(s, "__") {
			n++
		}
	}
	return n
}

// translateGlob turns a glob into an anchored RE2 expression with fsspec's meaning: components
// are split on "/"; a component that is exactly "**" matches zero or more directories (or, last,
// anything at all); one that is exactly "*" matches one or more characters other than "/";
// elsewhere "*" matches zero or more characters other than "/", "?" one such character, and
// "[...]" a character class in fnmatch's syntax ("!" negates; a negated class, as in Python, may
// match "/"). "**" inside a longer component is an error, as in fsspec. need is the longest run
// of literal characters within one component: every match contains it.
func translateGlob(p string) (expr, need string, err error) {
	const notSep = `[^/]`
	var b strings.Builder
	b.WriteString(`^(?s:`)
	comps := strings.Split(p, "/")
	last := len(comps) - 1
	for i, c := range comps {
		switch {
		case c == "*":
			if i < last {
				b.WriteString(notSep + `+/`)
			} else {
				b.WriteString(notSep + `+`)
			}
			continue
		case c == "**":
			if i < last {
				b.WriteString(`(?:.+/)?`)
			} else {
				b.WriteString(`.*`)
			}
			continue
		case strings.Contains(c, "**"):
			return "", "", fmt.Errorf("'**' can only be an entire path component")
		}
		for _, lit := range translateComponent(&b, c) {
			if len(lit) > len(need) {
				need = lit
			}
		}
		if i < last {
			b.WriteString(`/`)
		}
	}
	b.WriteString(`)$`)
	return b.String(), need, nil
}

// translateComponent is fnmatch's translation of one component (Python's fnmatch._translate with
// "*" as [^/]* and "?" as [^/]). Consecutive stars are one; an unclosed "[" is a literal. It
// returns the runs of literal characters.
func translateComponent(b *strings.Builder, c string) (lits []string) {
	rs := []rune(c)
	n := len(rs)
	lastStar := false
	var run []rune
	flush := func() {
		if len(run) > 0 {
			lits = append(lits, string(run))
			run = run[:0]
		}
	}
	for i := 0; i < n; {
		r := rs[i]
		i++
		if r != '*' {
			lastStar = false
		}
		if r == '*' || r == '?' || r == '[' {
			flush()
		}
		switch r {
		case '*':
			if !lastStar {
				b.WriteString(`[^/]*`)
			}
			lastStar = true
		case '?':
			b.WriteString(`[^/]`)
		case '[':
			// Find the closing bracket as fnmatch does: a "!" and then a "]" right after the
			// opening bracket belong to the class.
			j := i
			if j < n && rs[j] == '!' {
				j++
			}
			if j < n && rs[j] == ']' {
				j++
			}
			for j < n && rs[j] != ']' {
				j++
			}
			if j >= n {
				b.WriteString(`\[`)
				run = append(run, '[')
				continue
			}
			writeClass(b, rs[i:j])
			i = j + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
			run = append(run, r)
		}
	}
	flush()
	return lits
}

// writeClass writes the character class whose body (between the brackets) is body. Every member
// is written as an escaped code point, so no character of the body has a meaning in RE2's class
// syntax; fnmatch's meaning is kept: a leading "!" negates, "a-z" is a range, a range whose ends
// are reversed is empty and dropped, a "-" that cannot make a range is a literal. FuzzGlob checks
// this scan against a port of fnmatch's own chunk algorithm.
func writeClass(b *strings.Builder, body []rune) {
	negate := false
	if len(body) > 0 && body[0] == '!' {
		negate = true
		body = body[1:]
	}
	type span struct{ lo, hi rune }
	var spans []span
	dropped, first := false, true
	for k := 0; k < len(body); {
		if k+2 < len(body) && body[k+1] == '-' && body[k] > body[k+2] {
			dropped = true
			k += 3
			continue
		}
		// fnmatch drops a reversed range by cutting it out of the class text; when only dropped
		// ranges came before a "!", the text now starts with "!" and the class is negated.
		if first && dropped && !negate && body[k] == '!' {
			negate, first = true, false
			k++
			continue
		}
		first = false
		if k+2 < len(body) && body[k+1] == '-' {
			spans = append(spans, span{body[k], body[k+2]})
			k += 3
			continue
		}
		spans = append(spans, span{body[k], body[k]})
		k++
	}
	switch {
	case len(spans) == 0 && negate:
		b.WriteString(`.`) // "[!]" with nothing left: any character
		return
	case len(spans) == 0:
		b.WriteString(`[^\x00-\x{10FFFF}]`) // an empty class: never matches
		return
	}
	b.WriteString(`[`)
	if negate {
		b.WriteString(`^`)
	}
	for _, s := range spans {
		fmt.Fprintf(b, `\x{%X}`, s.lo)
		if s.hi != s.lo {
			fmt.Fprintf(b, `-\x{%X}`, s.hi)
		}
	}
	b.WriteString(`]`)
}
