package hub

import (
	"strings"
	"unicode/utf8"
)

// filterFiles keeps the files matching some include pattern (all files when include is empty)
// and no exclude pattern: huggingface_hub's filter_repo_objects.
func filterFiles(files, include, exclude []string) []string {
	include = dirPatterns(include)
	exclude = dirPatterns(exclude)
	var out []string
	for _, f := range files {
		if len(include) > 0 && !matchAny(include, f) {
			continue
		}
		if matchAny(exclude, f) {
			continue
		}
		out = append(out, f)
	}
	return out
}

// dirPatterns is _add_wildcard_to_directories: "dir/" means "dir/*".
func dirPatterns(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		if strings.HasSuffix(p, "/") {
			p += "*"
		}
		out[i] = p
	}
	return out
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if matchGlob(p, name) {
			return true
		}
	}
	return false
}

// matchGlob is Python's fnmatch.fnmatchcase: the whole name must match; "*" matches any run of
// characters, "/" included; "?" one character; "[seq]" one character of seq and "[!seq]" one
// not in it (ranges a-z; a "]" first is literal; a "[" with no closing "]" is literal).
// Backslash is not an escape. Characters are runes. It runs in O(len(pattern)·len(name)):
// only the last "*" is ever backtracked to.
func matchGlob(pattern, name string) bool {
	p, n := runes(pattern), runes(name)
	pi, ni := 0, 0
	starP, starN := -1, 0
	for ni < len(n) {
		if pi < len(p) {
			switch p[pi] {
			case '*':
				starP, starN = pi, ni
				pi++
				continue
			case '?':
				pi++
				ni++
				continue
			case '[':
				if ok, next, isClass := matchClass(p, pi, n[ni]); isClass {
					if ok {
						pi, ni = next, ni+1
						continue
					}
					break
				}
				if n[ni] == '[' {
					pi++
					ni++
					continue
				}
			default:
				if p[pi] == n[ni] {
					pi++
					ni++
					continue
				}
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last "*" swallow one more character and retry from there.
		starN++
		pi, ni = starP+1, starN
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// runes decodes s, mapping each byte of invalid UTF-8 to its own negative value, so that two
// different invalid bytes do not both become U+FFFD and match each other.
func runes(s string) []rune {
	out := make([]rune, 0, len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			r = -1 - rune(s[i])
		}
		out = append(out, r)
		i += size
	}
	return out
}

// matchClass matches c against the bracket expression starting at p[i] == '['. It returns
// isClass false when the bracket has no closing "]" (then "[" is a literal), else whether c
// matches and the index after the "]". Reversed ranges (z-a) match nothing, and drop their
// endpoints, as Python's translate does.
func matchClass(p []rune, i int, c rune) (ok bool, next int, isClass bool) {
	j := i + 1
	if j < len(p) && p[j] == '!' {
		j++
	}
	if j < len(p) && p[j] == ']' {
		j++
	}
	for j < len(p) && p[j] != ']' {
		j++
	}
	if j >= len(p) {
		return false, 0, false
	}
	body := p[i+1 : j]
	negate := len(body) > 0 && body[0] == '!'
	if negate {
		body = body[1:]
	}
	match := false
	for k := 0; k < len(body); k++ {
		lo := body[k]
		if k+2 < len(body) && body[k+1] == '-' {
			hi := body[k+2]
			if lo <= c && c <= hi {
				match = true
			}
			k += 2
			continue
		}
		if lo == c {
			match = true
		}
	}
	return match != negate, j + 1, true
}
