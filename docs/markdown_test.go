package docs_test

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// block is one fenced code block of a Markdown file.
type block struct {
	lang  string
	text  string // the content, de-indented, lines joined with "\n", no trailing newline
	line  int    // 1-based line of the opening fence
	check string // name from a <!-- doccheck: NAME ... --> comment right before the fence
	args  map[string]string
}

// doc is a Markdown file split into its prose (code blocks removed) and its code blocks.
type doc struct {
	path   string
	prose  []proseLine
	blocks []block
}

type proseLine struct {
	n    int
	text string
}

var (
	fenceRe    = regexp.MustCompile("^(\\s*)```(\\S*)\\s*$")
	doccheckRe = regexp.MustCompile(`^\s*<!--\s*doccheck:\s*(\S+)((?:\s+\S+=\S+)*)\s*-->\s*$`)
)

// readDoc reads path and splits it. An unterminated fence or a doccheck comment not followed by a
// fence is an error naming the line: both would silently drop a check.
func readDoc(t *testing.T, path string) *doc {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := &doc{path: path}
	lines := strings.Split(string(raw), "\n")
	pendingCheck, pendingArgs, pendingLine := "", map[string]string(nil), 0
	for i := 0; i < len(lines); i++ {
		if m := doccheckRe.FindStringSubmatch(lines[i]); m != nil {
			pendingCheck, pendingLine = m[1], i+1
			pendingArgs = map[string]string{}
			for _, kv := range strings.Fields(m[2]) {
				k, v, _ := strings.Cut(kv, "=")
				pendingArgs[k] = v
			}
			continue
		}
		m := fenceRe.FindStringSubmatch(lines[i])
		if m == nil {
			if pendingCheck != "" && strings.TrimSpace(lines[i]) != "" {
				t.Fatalf("%s:%d: doccheck %q is not followed by a code block", path, pendingLine, pendingCheck)
			}
			d.prose = append(d.prose, proseLine{i + 1, lines[i]})
			continue
		}
		indent, lang := m[1], m[2]
		b := block{lang: lang, line: i + 1, check: pendingCheck, args: pendingArgs}
		pendingCheck, pendingArgs = "", nil
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			if strings.TrimSpace(lines[i]) == "```" {
				closed = true
				break
			}
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if !closed {
			t.Fatalf("%s:%d: code block never closed", path, b.line)
		}
		b.text = strings.Join(body, "\n")
		d.blocks = append(d.blocks, b)
	}
	if pendingCheck != "" {
		t.Fatalf("%s:%d: doccheck %q is not followed by a code block", path, pendingLine, pendingCheck)
	}
	return d
}

// section returns the prose lines under the "## " heading that contains title, up to the next
// "## " heading.
func (d *doc) section(t *testing.T, title string) []proseLine {
	t.Helper()
	var out []proseLine
	in := false
	for _, l := range d.prose {
		if strings.HasPrefix(l.text, "## ") {
			if in {
				break
			}
			in = strings.Contains(l.text, title)
			continue
		}
		if in {
			out = append(out, l)
		}
	}
	if out == nil {
		t.Fatalf("%s: no section titled %q", d.path, title)
	}
	return out
}

var (
	codeSpanRe = regexp.MustCompile("`([^`]+)`")
	linkRe     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
)

// codeSpans returns the inline code spans of prose lines (Markdown tables included).
func codeSpans(lines []proseLine) []proseLine {
	var out []proseLine
	for _, l := range lines {
		for _, m := range codeSpanRe.FindAllStringSubmatch(l.text, -1) {
			out = append(out, proseLine{l.n, m[1]})
		}
	}
	return out
}

// headingSlug is GitHub's anchor for a heading: lower case, punctuation other than '-' and '_'
// dropped, spaces turned into '-'.
func headingSlug(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(h)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// shellCommands splits an sh block into simple commands (words after quote removal), the way a
// POSIX shell would for the subset the runbook uses: backslash-newline continuations, single and
// double quotes, '#' comments, and the operators && || ; | & > >> < that end or redirect a
// command. $NAME and ${NAME} expand to "X" (the values do not matter for flag parsing). Words
// after a redirection operator are dropped.
func shellCommands(text string) ([][]string, error) {
	text = strings.ReplaceAll(text, "\\\n", " ")
	var cmds [][]string
	var cur []string
	var word strings.Builder
	inWord, redirect := false, false
	endWord := func() {
		if inWord {
			if !redirect {
				cur = append(cur, word.String())
			}
			redirect = false
		}
		word.Reset()
		inWord = false
	}
	endCmd := func() {
		endWord()
		if len(cur) > 0 {
			cmds = append(cmds, cur)
		}
		cur, redirect = nil, false
	}
	rs := []rune(text)
	expand := func(i int) int { // rs[i] == '$'; returns the index of the last rune consumed
		j := i + 1
		if j < len(rs) && rs[j] == '{' {
			for j < len(rs) && rs[j] != '}' {
				j++
			}
			word.WriteString("X")
			return j
		}
		for j < len(rs) && (rs[j] == '_' || unicode.IsLetter(rs[j]) || unicode.IsDigit(rs[j])) {
			j++
		}
		if j == i+1 {
			word.WriteRune('$')
			return i
		}
		word.WriteString("X")
		return j - 1
	}
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case r == '\n':
			endCmd()
		case r == ' ' || r == '\t':
			endWord()
		case r == '#' && !inWord:
			for i < len(rs) && rs[i] != '\n' {
				i++
			}
			endCmd()
		case r == '\'':
			inWord = true
			for i++; i < len(rs) && rs[i] != '\''; i++ {
				word.WriteRune(rs[i])
			}
			if i >= len(rs) {
				return nil, fmt.Errorf("unterminated ' in %q", text)
			}
		case r == '"':
			inWord = true
			for i++; i < len(rs) && rs[i] != '"'; i++ {
				switch {
				case rs[i] == '\\' && i+1 < len(rs):
					i++
					word.WriteRune(rs[i])
				case rs[i] == '$':
					i = expand(i)
				default:
					word.WriteRune(rs[i])
				}
			}
			if i >= len(rs) {
				return nil, fmt.Errorf("unterminated \" in %q", text)
			}
		case r == '\\' && i+1 < len(rs):
			inWord = true
			i++
			word.WriteRune(rs[i])
		case r == '$':
			inWord = true
			i = expand(i)
		case r == '&' || r == '|' || r == ';':
			for i+1 < len(rs) && (rs[i+1] == '&' || rs[i+1] == '|') {
				i++
			}
			endCmd()
		case r == '>' || r == '<':
			endWord()
			for i+1 < len(rs) && (rs[i+1] == '>' || rs[i+1] == '&') {
				i++
			}
			redirect = true
		default:
			inWord = true
			word.WriteRune(r)
		}
	}
	endCmd()
	return cmds, nil
}

// normalizeSpace collapses every run of white space to one space and trims the ends, so that a
// message wrapped for reading compares equal to the one-line original.
func normalizeSpace(s string) string { return strings.Join(strings.Fields(s), " ") }
