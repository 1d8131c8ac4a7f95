package tokenizer

import (
	"math"
	"strings"
	"unicode/utf8"
)

// decoder turns token strings back into text pieces (Decoder::decode_chain);
// the pieces are concatenated at the end.
type decoder interface {
	decodeChain(tokens []string) []string
}

type byteLevelDecoder struct{}

func (byteLevelDecoder) decodeChain(tokens []string) []string {
	return []string{byteLevelDecode(tokens)}
}

type wordPieceDecoder struct {
	prefix  string
	cleanup bool
}

func (w wordPieceDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		if i != 0 {
			if strings.HasPrefix(t, w.prefix) {
				t = strings.Replace(t, w.prefix, "", 1)
			} else {
				t = " " + t
			}
		}
		if w.cleanup {
			t = cleanupTokenization(t)
		}
		out[i] = t
	}
	return out
}

// cleanupTokenization undoes the spaces BERT-style tokenization puts around
// punctuation and English contractions (tokenizers' decoders::wordpiece::cleanup).
func cleanupTokenization(s string) string {
	for _, r := range [][2]string{
		{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
		{" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"},
	} {
		s = strings.ReplaceAll(s, r[0], r[1])
	}
	return s
}

type metaspaceDecoder struct {
	replacement rune
	scheme      prependScheme
}

func (m metaspaceDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		var b strings.Builder
		for _, r := range t {
			if r == m.replacement {
				// Every replacement character of the first token is dropped
				// when a prefix was prepended (the reference's behaviour).
				if i == 0 && m.scheme != prependNever {
					continue
				}
				b.WriteByte(' ')
				continue
			}
			b.WriteRune(r)
		}
		out[i] = b.String()
	}
	return out
}

type byteFallbackDecoder struct{}

// byteToken parses "<0xAB>" the way the reference does (u8::from_str_radix
// on the two characters, which also accepts a leading '+').
func byteToken(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	h := t[3:5]
	if h[0] == '+' {
		h = h[1:]
	}
	v := 0
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= '0' && c <= '9':
			v = v*16 + int(c-'0')
		case c >= 'a' && c <= 'f':
			v = v*16 + int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v*16 + int(c-'A'+10)
		default:
			return 0, false
		}
	}
	return byte(v), len(h) > 0
}

func (byteFallbackDecoder) decodeChain(tokens []string) []string {
	var out []string
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\uFFFD")
			}
		}
		pending = pending[:0]
	}
	for _, t := range tokens {
		if b, ok := byteToken(t); ok {
			pending = append(pending, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

type fuseDecoder struct{}

func (fuseDecoder) decodeChain(tokens []string) []string {
	return []string{strings.Join(tokens, "")}
}

type stripDecoder struct {
	content     rune
	start, stop int
}

func (s stripDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		rs := []rune(t)
		startCut := 0
		for k := 0; k < s.start && k < len(rs); k++ {
			if rs[k] != s.content {
				break
			}
			startCut = k + 1
		}
		stopCut := len(rs)
		for k := 0; k < s.stop && k < len(rs); k++ {
			idx := len(rs) - k - 1
			if rs[idx] != s.content {
				break
			}
			stopCut = idx
		}
		if startCut >= stopCut {
			out[i] = ""
			continue
		}
		out[i] = string(rs[startCut:stopCut])
	}
	return out
}

type replaceDecoder struct {
	pattern pattern
	content string
}

func (r replaceDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		var b strings.Builder
		for _, m := range r.pattern.findMatches(t) {
			if m.isMatch {
				b.WriteString(r.content)
			} else {
				b.WriteString(t[m.start:m.end])
			}
		}
		out[i] = b.String()
	}
	return out
}

// bpeDecoder replaces the end-of-word suffix by a space (none after the
// last token).
type bpeDecoder struct{ suffix string }

func (d bpeDecoder) decodeChain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, t := range tokens {
		rep := " "
		if i == len(tokens)-1 {
			rep = ""
		}
		out[i] = strings.ReplaceAll(t, d.suffix, rep)
	}
	return out
}

type sequenceDecoder []decoder

func (s sequenceDecoder) decodeChain(tokens []string) []string {
	for _, d := range s {
		tokens = d.decodeChain(tokens)
	}
	return tokens
}

func parseDecoder(v jval) (decoder, error) {
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
		return byteLevelDecoder{}, nil
	case "WordPiece":
		d := wordPieceDecoder{}
		if d.prefix, err = o.str("prefix", "##"); err != nil {
			return nil, err
		}
		if d.cleanup, err = o.boolean("cleanup", true); err != nil {
			return nil, err
		}
		return d, nil
	case "Metaspace":
		d := metaspaceDecoder{}
		if d.replacement, err = parseReplacementChar(o); err != nil {
			return nil, err
		}
		if d.scheme, err = parsePrependScheme(o); err != nil {
			return nil, err
		}
		return d, nil
	case "ByteFallback":
		return byteFallbackDecoder{}, nil
	case "Fuse":
		return fuseDecoder{}, nil
	case "Strip":
		d := stripDecoder{}
		c, err := o.reqStr("content")
		if err != nil {
			return nil, err
		}
		if utf8.RuneCountInString(c) != 1 {
			return nil, errAt(childPath(o.path, "content"), "must be exactly one character, got %q", c)
		}
		d.content, _ = utf8.DecodeRuneInString(c)
		st, err := o.uint("start", 0, math.MaxInt32)
		if err != nil {
			return nil, err
		}
		sp, err := o.uint("stop", 0, math.MaxInt32)
		if err != nil {
			return nil, err
		}
		d.start, d.stop = int(st), int(sp)
		return d, nil
	case "Replace":
		p, err := parsePattern(o.get("pattern"))
		if err != nil {
			return nil, err
		}
		c, err := o.reqStr("content")
		return replaceDecoder{p, c}, err
	case "BPEDecoder":
		s, err := o.str("suffix", "</w>")
		return bpeDecoder{s}, err
	case "Sequence":
		items, err := o.get("decoders").array()
		if err != nil {
			return nil, err
		}
		var seq sequenceDecoder
		for _, it := range items {
			if it.null() {
				return nil, errAt(it.path, "expected a decoder object, got null")
			}
			d, err := parseDecoder(it)
			if err != nil {
				return nil, err
			}
			seq = append(seq, d)
		}
		return seq, nil
	case "CTC":
		return nil, errAt(childPath(o.path, "type"), "decoder %q: %w", typ, ErrUnsupported)
	}
	return nil, errAt(childPath(o.path, "type"), "unknown decoder type %q", typ)
}
