package tokenizer

import (
	"unicode/utf8"

	"github.com/gotpu/gotpu/data/tokenizer/internal/regex"
)

// preTokenizer cuts the untokenized pieces into words.
type preTokenizer interface {
	preTokenize(p *pretokenized)
}

type splitBehavior uint8

const (
	splitRemoved splitBehavior = iota
	splitIsolated
	splitMergedWithPrevious
	splitMergedWithNext
	splitContiguous
)

func parseBehavior(v jval, def splitBehavior) (splitBehavior, error) {
	if v.null() {
		return def, nil
	}
	s, err := v.str()
	if err != nil {
		return 0, err
	}
	switch s {
	case "Removed":
		return splitRemoved, nil
	case "Isolated":
		return splitIsolated, nil
	case "MergedWithPrevious":
		return splitMergedWithPrevious, nil
	case "MergedWithNext":
		return splitMergedWithNext, nil
	case "Contiguous":
		return splitContiguous, nil
	}
	return 0, errAt(v.path, "unknown split behavior %q", s)
}

// splitBy is the common "split every piece by a pattern" step.
func splitBy(p *pretokenized, pat pattern, b splitBehavior) {
	p.splitWith(func(n *normalized) []*normalized { return n.split(pat.findMatches(n.text), b) })
}

type byteLevelPre struct {
	addPrefixSpace bool
	re             *regex.Regexp // nil when use_regex is false
}

func (b byteLevelPre) preTokenize(p *pretokenized) {
	p.splitWith(func(n *normalized) []*normalized {
		if b.addPrefixSpace && (n.text == "" || n.text[0] != ' ') {
			n.prepend(" ")
		}
		if b.re == nil {
			return []*normalized{n}
		}
		return n.split(regexPattern{b.re}.findMatches(n.text), splitIsolated)
	})
	p.normalizeEach(byteLevelTransform)
}

type splitPre struct {
	pat    pattern
	b      splitBehavior
	invert bool
}

func (s splitPre) preTokenize(p *pretokenized) {
	var pat pattern = s.pat
	if s.invert {
		pat = invertPattern{s.pat}
	}
	splitBy(p, pat, s.b)
}

// whitespacePre is the Whitespace pre-tokenizer: words are runs matching the
// Rust regex `\w+|[^\w\s]+`; whitespace is dropped.
type whitespacePre struct{}

type wsClass uint8

const (
	wsSpace wsClass = iota
	wsWord
	wsOther
)

func classifyWS(r rune) wsClass {
	switch {
	case isWordChar(r):
		return wsWord
	case isWhitespace(r):
		return wsSpace
	}
	return wsOther
}

func (whitespacePre) preTokenize(p *pretokenized) {
	p.splitWith(func(n *normalized) []*normalized {
		var ms []match
		s := n.text
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			c := classifyWS(r)
			j := i + size
			for j < len(s) {
				r2, size2 := utf8.DecodeRuneInString(s[j:])
				if classifyWS(r2) != c {
					break
				}
				j += size2
			}
			ms = append(ms, match{i, j, c == wsSpace})
			i = j
		}
		if len(ms) == 0 {
			ms = []match{{0, 0, true}}
		}
		return n.split(ms, splitRemoved)
	})
}

type whitespaceSplitPre struct{}

func (whitespaceSplitPre) preTokenize(p *pretokenized) {
	splitBy(p, runePattern(isWhitespace), splitRemoved)
}

type bertPre struct{}

func (bertPre) preTokenize(p *pretokenized) {
	splitBy(p, runePattern(isWhitespace), splitRemoved)
	splitBy(p, runePattern(isBertPunctuation), splitIsolated)
}

type punctuationPre struct{ b splitBehavior }

func (x punctuationPre) preTokenize(p *pretokenized) {
	splitBy(p, runePattern(isBertPunctuation), x.b)
}

type digitsPre struct{ individual bool }

func (d digitsPre) preTokenize(p *pretokenized) {
	if d.individual {
		splitBy(p, runePattern(isNumeric), splitIsolated)
	} else {
		splitBy(p, runePattern(isNumeric), splitContiguous)
	}
}

type charDelimiterPre struct{ delim rune }

func (c charDelimiterPre) preTokenize(p *pretokenized) {
	splitBy(p, runePattern(func(r rune) bool { return r == c.delim }), splitRemoved)
}

type prependScheme uint8

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

type metaspacePre struct {
	replacement rune
	scheme      prependScheme
	split       bool
}

func (m metaspacePre) preTokenize(p *pretokenized) {
	rep := string(m.replacement)
	p.splitWith(func(n *normalized) []*normalized {
		n.replaceMatches(literalPattern(" ").findMatches(n.text), rep)
		switch m.scheme {
		case prependAlways:
			if r, _ := utf8.DecodeRuneInString(n.text); r != m.replacement || n.text == "" {
				n.prepend(rep)
			}
		case prependFirst:
			if r, _ := utf8.DecodeRuneInString(n.text); (r != m.replacement || n.text == "") && n.orig.start == 0 {
				n.prepend(rep)
			}
		}
		if !m.split {
			return []*normalized{n}
		}
		return n.split(runePattern(func(r rune) bool { return r == m.replacement }).findMatches(n.text), splitMergedWithNext)
	})
}

type sequencePre []preTokenizer

func (s sequencePre) preTokenize(p *pretokenized) {
	for _, x := range s {
		x.preTokenize(p)
	}
}

func parsePrependScheme(o jobj) (prependScheme, error) {
	if o.has("prepend_scheme") {
		s, err := o.get("prepend_scheme").str()
		if err != nil {
			return 0, err
		}
		switch s {
		case "always":
			return prependAlways, nil
		case "first":
			return prependFirst, nil
		case "never":
			return prependNever, nil
		}
		return 0, errAt(childPath(o.path, "prepend_scheme"), "unknown prepend scheme %q", s)
	}
	// Files written before prepend_scheme existed use add_prefix_space.
	add, err := o.boolean("add_prefix_space", true)
	if err != nil {
		return 0, err
	}
	if add {
		return prependAlways, nil
	}
	return prependNever, nil
}

func parseReplacementChar(o jobj) (rune, error) {
	s, err := o.str("replacement", "▁")
	if err != nil {
		return 0, err
	}
	if utf8.RuneCountInString(s) != 1 {
		return 0, errAt(childPath(o.path, "replacement"), "must be exactly one character, got %q", s)
	}
	r, _ := utf8.DecodeRuneInString(s)
	return r, nil
}

func parsePreTokenizer(v jval) (preTokenizer, error) {
	if v.null() {
		return nil, nil
	}
	o, err := v.object()
	if err != nil {
		return nil, err
	}
	typ, err := o.typeName()
	if err != nil {
		return nil, err
	}
	switch typ {
	case "ByteLevel":
		b := byteLevelPre{}
		if b.addPrefixSpace, err = o.boolean("add_prefix_space", true); err != nil {
			return nil, err
		}
		if _, err = o.boolean("trim_offsets", true); err != nil {
			return nil, err
		}
		useRegex, err := o.boolean("use_regex", true)
		if err != nil {
			return nil, err
		}
		if useRegex {
			b.re = regex.MustCompile(gpt2Pattern)
		}
		return b, nil
	case "Split":
		pat, err := parsePattern(o.get("pattern"))
		if err != nil {
			return nil, err
		}
		s := splitPre{pat: pat}
		if !o.has("behavior") {
			return nil, errAt(childPath(o.path, "behavior"), "missing")
		}
		if s.b, err = parseBehavior(o.get("behavior"), splitRemoved); err != nil {
			return nil, err
		}
		if s.invert, err = o.boolean("invert", false); err != nil {
			return nil, err
		}
		return s, nil
	case "Whitespace":
		return whitespacePre{}, nil
	case "WhitespaceSplit":
		return whitespaceSplitPre{}, nil
	case "BertPreTokenizer":
		return bertPre{}, nil
	case "Punctuation":
		b, err := parseBehavior(o.get("behavior"), splitIsolated)
		return punctuationPre{b}, err
	case "Digits":
		ind, err := o.boolean("individual_digits", false)
		return digitsPre{ind}, err
	case "CharDelimiterSplit":
		s, err := o.reqStr("delimiter")
		if err != nil {
			return nil, err
		}
		if utf8.RuneCountInString(s) != 1 {
			return nil, errAt(childPath(o.path, "delimiter"), "must be exactly one character, got %q", s)
		}
		r, _ := utf8.DecodeRuneInString(s)
		return charDelimiterPre{r}, nil
	case "Metaspace":
		m := metaspacePre{}
		if m.replacement, err = parseReplacementChar(o); err != nil {
			return nil, err
		}
		if m.scheme, err = parsePrependScheme(o); err != nil {
			return nil, err
		}
		if m.split, err = o.boolean("split", true); err != nil {
			return nil, err
		}
		return m, nil
	case "Sequence":
		items, err := o.get("pretokenizers").array()
		if err != nil {
			return nil, err
		}
		var seq sequencePre
		for _, it := range items {
			if it.null() {
				return nil, errAt(it.path, "expected a pre-tokenizer object, got null")
			}
			x, err := parsePreTokenizer(it)
			if err != nil {
				return nil, err
			}
			seq = append(seq, x)
		}
		return seq, nil
	case "UnicodeScripts", "FixedLength":
		return nil, errAt(childPath(o.path, "type"), "pre-tokenizer %q: %w", typ, ErrUnsupported)
	}
	return nil, errAt(childPath(o.path, "type"), "unknown pre-tokenizer type %q", typ)
}
