package tokenizer

import (
	"unicode"

	"github.com/gotpu/gotpu/data/tokenizer/internal/regex"
	"github.com/gotpu/gotpu/data/tokenizer/internal/unorm"
)

// normalizer rewrites a piece of text in place, keeping alignments.
type normalizer interface {
	normalize(n *normalized)
}

type unicodeNormalizer struct{ form unorm.Form }

func (u unicodeNormalizer) normalize(n *normalized) { n.unicodeNormalize(u.form) }

type lowercaseNormalizer struct{}

func (lowercaseNormalizer) normalize(n *normalized) {
	if isASCII(n.text) {
		hasUpper := false
		for i := 0; i < len(n.text); i++ {
			if c := n.text[i]; c >= 'A' && c <= 'Z' {
				hasUpper = true
				break
			}
		}
		if !hasUpper {
			return
		}
	}
	changes := make([]unorm.Change, 0, len(n.text))
	var buf [2]rune
	for _, r := range n.text {
		for i, l := range lowerRunes(r, buf[:0]) {
			d := 0
			if i > 0 {
				d = 1
			}
			changes = append(changes, unorm.Change{R: l, Delta: d})
		}
	}
	n.transform(changes, 0)
}

// stripAccentsNormalizer removes every combining mark (general category
// M), as the StripAccents normalizer does with is_combining_mark.
type stripAccentsNormalizer struct{}

func (stripAccentsNormalizer) normalize(n *normalized) {
	n.filter(func(r rune) bool { return !unicode.Is(unicode.M, r) })
}

type bertNormalizer struct {
	cleanText, handleChinese, stripAccents, lowercase bool
}

func (b bertNormalizer) normalize(n *normalized) {
	if b.cleanText {
		n.filter(func(r rune) bool { return !(r == 0 || r == 0xFFFD || isBertControl(r)) })
		n.mapRunes(func(r rune) rune {
			if isBertWhitespace(r) {
				return ' '
			}
			return r
		})
	}
	if b.handleChinese {
		var changes []unorm.Change
		found := false
		for _, r := range n.text {
			if isChineseChar(r) {
				found = true
				changes = append(changes, unorm.Change{R: ' '}, unorm.Change{R: r, Delta: 1}, unorm.Change{R: ' ', Delta: 1})
			} else {
				changes = append(changes, unorm.Change{R: r})
			}
		}
		if found {
			n.transform(changes, 0)
		}
	}
	if b.stripAccents {
		// Unlike StripAccents, BertNormalizer only drops nonspacing marks.
		n.unicodeNormalize(unorm.NFD)
		n.filter(func(r rune) bool { return !unicode.Is(unicode.Mn, r) })
	}
	if b.lowercase {
		lowercaseNormalizer{}.normalize(n)
	}
}

type prependNormalizer struct{ prefix string }

func (p prependNormalizer) normalize(n *normalized) { n.prepend(p.prefix) }

type replaceNormalizer struct {
	pattern pattern
	content string
}

func (r replaceNormalizer) normalize(n *normalized) {
	ms := r.pattern.findMatches(n.text)
	for _, m := range ms {
		if m.isMatch {
			n.replaceMatches(ms, r.content)
			return
		}
	}
}

type stripNormalizer struct{ left, right bool }

func (s stripNormalizer) normalize(n *normalized) { n.stripWhitespace(s.left, s.right) }

type byteLevelNormalizer struct{}

func (byteLevelNormalizer) normalize(n *normalized) { byteLevelTransform(n) }

type sequenceNormalizer []normalizer

func (s sequenceNormalizer) normalize(n *normalized) {
	for _, x := range s {
		x.normalize(n)
	}
}

// parsePattern reads {"String": "..."} or {"Regex": "..."}.
func parsePattern(v jval) (pattern, error) {
	o, err := v.object()
	if err != nil {
		return nil, err
	}
	switch {
	case o.has("String"):
		s, err := o.get("String").str()
		if err != nil {
			return nil, err
		}
		return literalPattern(s), nil
	case o.has("Regex"):
		s, err := o.get("Regex").str()
		if err != nil {
			return nil, err
		}
		re, err := regex.Compile(s)
		if err != nil {
			return nil, wrapAt(childPath(v.path, "Regex"), err)
		}
		return regexPattern{re}, nil
	}
	return nil, errAt(v.path, `expected {"String": ...} or {"Regex": ...}`)
}

func parseNormalizer(v jval) (normalizer, error) {
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
	case "NFC":
		return unicodeNormalizer{unorm.NFC}, nil
	case "NFD":
		return unicodeNormalizer{unorm.NFD}, nil
	case "NFKC":
		return unicodeNormalizer{unorm.NFKC}, nil
	case "NFKD":
		return unicodeNormalizer{unorm.NFKD}, nil
	case "Lowercase":
		return lowercaseNormalizer{}, nil
	case "StripAccents":
		return stripAccentsNormalizer{}, nil
	case "ByteLevel":
		return byteLevelNormalizer{}, nil
	case "BertNormalizer":
		b := bertNormalizer{}
		if b.cleanText, err = o.boolean("clean_text", true); err != nil {
			return nil, err
		}
		if b.handleChinese, err = o.boolean("handle_chinese_chars", true); err != nil {
			return nil, err
		}
		if b.lowercase, err = o.boolean("lowercase", true); err != nil {
			return nil, err
		}
		// strip_accents: null means "follow lowercase".
		if b.stripAccents, err = o.boolean("strip_accents", b.lowercase); err != nil {
			return nil, err
		}
		return b, nil
	case "Prepend":
		s, err := o.reqStr("prepend")
		return prependNormalizer{s}, err
	case "Replace":
		p, err := parsePattern(o.get("pattern"))
		if err != nil {
			return nil, err
		}
		c, err := o.reqStr("content")
		return replaceNormalizer{p, c}, err
	case "Strip":
		s := stripNormalizer{}
		if s.left, err = o.boolean("strip_left", true); err != nil {
			return nil, err
		}
		if s.right, err = o.boolean("strip_right", true); err != nil {
			return nil, err
		}
		return s, nil
	case "Sequence":
		items, err := o.get("normalizers").array()
		if err != nil {
			return nil, err
		}
		var seq sequenceNormalizer
		for _, it := range items {
			if it.null() {
				return nil, errAt(it.path, "expected a normalizer object, got null")
			}
			x, err := parseNormalizer(it)
			if err != nil {
				return nil, err
			}
			seq = append(seq, x)
		}
		return seq, nil
	case "Precompiled", "Nmt":
		return nil, errAt(childPath(o.path, "type"), "normalizer %q: %w", typ, ErrUnsupported)
	}
	return nil, errAt(childPath(o.path, "type"), "unknown normalizer type %q", typ)
}
