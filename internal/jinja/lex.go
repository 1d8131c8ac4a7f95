package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokType uint8

const (
	tEOF tokType = iota
	tData
	tVarBegin
	tVarEnd
	tBlockBegin
	tBlockEnd
	tName
	tString
	tInt
	tFloat
	tOp
)

type token struct {
	typ  tokType
	line int
	val  string // data, name, op, decoded string
	num  int64  // an int, or a float's bits
}

// value is a number token's value.
func (t token) value() Value {
	if t.typ == tFloat {
		return Value{k: KindFloat, n: t.num}
	}
	return Int(t.num)
}

func (t token) describe() string {
	switch t.typ {
	case tEOF:
		return "end of template"
	case tVarBegin:
		return "begin of print statement"
	case tVarEnd:
		return "end of print statement"
	case tBlockBegin:
		return "begin of statement block"
	case tBlockEnd:
		return "end of statement block"
	case tData:
		return "template data / text"
	case tString:
		return "string"
	case tInt:
		return "integer"
	case tFloat:
		return "float"
	}
	return t.val
}

type lexer struct {
	src  string
	opts ParseOptions
	toks []token
	line int
}

// normalizeNewlines is Jinja2's newline handling: \r\n and \r become \n, and (without
// KeepTrailingNewline) one trailing newline is dropped.
func normalizeNewlines(src string, keep bool) string {
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	if !keep && strings.HasSuffix(src, "\n") {
		src = src[:len(src)-1]
	}
	return src
}

func (lx *lexer) errf(line int, format string, a ...any) error {
	return &SyntaxError{Name: lx.opts.Name, Line: line, Msg: fmt.Sprintf(format, a...), Python: true}
}

// errOwn is a syntax error in this engine's words.
func (lx *lexer) errOwn(line int, format string, a ...any) error {
	return &SyntaxError{Name: lx.opts.Name, Line: line, Msg: fmt.Sprintf(format, a...)}
}

func (lx *lexer) emit(t tokType, val string, line int) {
	lx.toks = append(lx.toks, token{typ: t, val: val, line: line})
}

// pyRstrip is Python's str.rstrip() (Unicode whitespace).
func pyRstrip(s string) string { return strings.TrimRightFunc(s, pyIsSpace) }

// skipSpace returns the index after the Python \s* run starting at i.
func skipSpace(s string, i int) int {
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !pyIsSpace(r) {
			break
		}
		i += n
	}
	return i
}

// lex tokenizes the (newline-normalized) source.
func (lx *lexer) lex() error {
	src := lx.src
	lx.line = 1
	lx.toks = make([]token, 0, len(src)/16+16)
	pos := 0
	lineStarting := true
	for pos < len(src) {
		i := indexTagStart(src, pos)
		if i < 0 {
			lx.emit(tData, src[pos:], lx.line)
			break
		}
		kind := src[i+1]
		j := i + 2
		sign := byte(0)
		if j < len(src) && (src[j] == '-' || src[j] == '+') {
			sign = src[j]
			j++
		}
		// {% raw %}
		rawEnd := -1
		if kind == '%' {
			k := skipSpace(src, j)
			if strings.HasPrefix(src[k:], "raw") {
				k = skipSpace(src, k+3)
				if strings.HasPrefix(src[k:], "-%}") {
					rawEnd = skipSpace(src, k+3)
				} else if strings.HasPrefix(src[k:], "%}") {
					rawEnd = k + 2
				}
			}
		}
		text := src[pos:i]
		text = lx.stripText(text, sign, kind != '{', lineStarting)
		if text != "" {
			lx.emit(tData, text, lx.line)
		}
		lx.line += strings.Count(src[pos:i], "\n")
		if rawEnd >= 0 {
			lx.line += strings.Count(src[i:rawEnd], "\n")
			end, err := lx.lexRaw(rawEnd)
			if err != nil {
				return err
			}
			pos = end
			lineStarting = end > 0 && src[end-1] == '\n'
			continue
		}
		var err error
		switch kind {
		case '#':
			pos, err = lx.lexComment(j, i)
		case '{':
			lx.emit(tVarBegin, "", lx.line)
			pos, err = lx.lexInside(j, false)
		case '%':
			lx.emit(tBlockBegin, "", lx.line)
			pos, err = lx.lexInside(j, true)
		}
		if err != nil {
			return err
		}
		lineStarting = pos > 0 && src[pos-1] == '\n'
	}
	lx.emit(tEOF, "", lx.line)
	return nil
}

// indexTagStart finds the next {{, {% or {#.
func indexTagStart(s string, from int) int {
	for {
		k := strings.IndexByte(s[from:], '{')
		if k < 0 {
			return -1
		}
		i := from + k
		if i+1 < len(s) && (s[i+1] == '{' || s[i+1] == '%' || s[i+1] == '#') {
			return i
		}
		from = i + 1
	}
}

// stripText applies whitespace control to the text before a tag: '-' strips all whitespace,
// lstrip_blocks strips spaces and tabs between a line start and a block or comment tag.
func (lx *lexer) stripText(text string, sign byte, block, lineStarting bool) string {
	if sign == '-' {
		return pyRstrip(text)
	}
	if sign != '+' && lx.opts.LStripBlocks && block {
		l := strings.LastIndexByte(text, '\n') + 1
		if l > 0 || lineStarting {
			if strings.Trim(text[l:], " \t") == "" {
				return text[:l]
			}
		}
	}
	return text
}

func (lx *lexer) lexRaw(from int) (int, error) {
	src := lx.src
	for k := from; k < len(src); k++ {
		if src[k] != '{' || k+1 >= len(src) || src[k+1] != '%' {
			continue
		}
		j := k + 2
		sign := byte(0)
		if j < len(src) && (src[j] == '-' || src[j] == '+') {
			sign = src[j]
			j++
		}
		j = skipSpace(src, j)
		if !strings.HasPrefix(src[j:], "endraw") {
			continue
		}
		j = skipSpace(src, j+6)
		end := -1
		switch {
		case strings.HasPrefix(src[j:], "+%}"):
			end = j + 3
		case strings.HasPrefix(src[j:], "-%}"):
			end = skipSpace(src, j+3)
		case strings.HasPrefix(src[j:], "%}"):
			end = j + 2
			if lx.opts.TrimBlocks && end < len(src) && src[end] == '\n' {
				end++
			}
		}
		if end < 0 {
			continue
		}
		text := lx.stripText(src[from:k], sign, true, false)
		if text != "" {
			lx.emit(tData, text, lx.line)
		}
		lx.line += strings.Count(src[from:end], "\n")
		return end, nil
	}
	return 0, lx.errf(lx.line, "Missing end of raw directive")
}

func (lx *lexer) lexComment(from, start int) (int, error) {
	src := lx.src
	for k := from; k < len(src); k++ {
		var end int
		switch {
		case strings.HasPrefix(src[k:], "+#}"):
			end = k + 3
		case strings.HasPrefix(src[k:], "-#}"):
			end = skipSpace(src, k+3)
		case strings.HasPrefix(src[k:], "#}"):
			end = k + 2
			if lx.opts.TrimBlocks && end < len(src) && src[end] == '\n' {
				end++
			}
		default:
			continue
		}
		lx.line += strings.Count(src[start:end], "\n")
		return end, nil
	}
	return 0, lx.errf(lx.line, "Missing end of comment tag")
}

var operators = []string{"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"}

// lexInside tokenizes a {{ }} or {% %} tag's contents up to its end.
func (lx *lexer) lexInside(i int, block bool) (int, error) {
	src := lx.src
	var stack []byte
	for i < len(src) {
		if len(stack) == 0 {
			if block {
				switch {
				case strings.HasPrefix(src[i:], "+%}"):
					lx.emit(tBlockEnd, "", lx.line)
					return i + 3, nil
				case strings.HasPrefix(src[i:], "-%}"):
					lx.emit(tBlockEnd, "", lx.line)
					end := skipSpace(src, i+3)
					lx.line += strings.Count(src[i:end], "\n")
					return end, nil
				case strings.HasPrefix(src[i:], "%}"):
					lx.emit(tBlockEnd, "", lx.line)
					end := i + 2
					if lx.opts.TrimBlocks && end < len(src) && src[end] == '\n' {
						end++
						lx.line++
					}
					return end, nil
				}
			} else {
				switch {
				case strings.HasPrefix(src[i:], "-}}"):
					lx.emit(tVarEnd, "", lx.line)
					end := skipSpace(src, i+3)
					lx.line += strings.Count(src[i:end], "\n")
					return end, nil
				case strings.HasPrefix(src[i:], "}}"):
					lx.emit(tVarEnd, "", lx.line)
					return i + 2, nil
				}
			}
		}
		c := src[i]
		r, size := utf8.DecodeRuneInString(src[i:])
		switch {
		case pyIsSpace(r):
			if c == '\n' {
				lx.line++
			}
			i += size
		case c >= '0' && c <= '9':
			n, tok, err := lx.lexNumber(i)
			if err != nil {
				return 0, err
			}
			lx.toks = append(lx.toks, tok)
			i = n
		case c == '_' || unicode.IsLetter(r):
			j := i + size
			for j < len(src) {
				r2, n2 := utf8.DecodeRuneInString(src[j:])
				if r2 != '_' && !unicode.IsLetter(r2) && !unicode.IsDigit(r2) && !unicode.Is(unicode.Mn, r2) {
					break
				}
				j += n2
			}
			lx.emit(tName, src[i:j], lx.line)
			i = j
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(src) && src[j] != c {
				if src[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(src) {
				return 0, lx.errf(lx.line, "unexpected char %s at %d", repr(String(string(c))), byteToRuneIndex(src, i))
			}
			s, err := decodeEscapes(src[i+1 : j])
			if err != nil {
				return 0, lx.errOwn(lx.line, "%v", err)
			}
			lx.emit(tString, s, lx.line)
			lx.line += strings.Count(src[i:j], "\n")
			i = j + 1
		default:
			op := ""
			for _, o := range operators {
				if strings.HasPrefix(src[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return 0, lx.errf(lx.line, "unexpected char %s at %d", repr(String(string(r))), byteToRuneIndex(src, i))
			}
			switch op {
			case "(":
				stack = append(stack, ')')
			case "[":
				stack = append(stack, ']')
			case "{":
				stack = append(stack, '}')
			case ")", "]", "}":
				if len(stack) == 0 {
					return 0, lx.errf(lx.line, "unexpected '%s'", op)
				}
				if want := stack[len(stack)-1]; want != op[0] {
					return 0, lx.errf(lx.line, "unexpected '%s', expected '%c'", op, want)
				}
				stack = stack[:len(stack)-1]
			}
			lx.emit(tOp, op, lx.line)
			i += len(op)
		}
	}
	return i, nil
}

// lexNumber reads an integer (decimal, 0b, 0o, 0x, underscores) or a float.
func (lx *lexer) lexNumber(i int) (int, token, error) {
	src := lx.src
	digits := func(j int, ok func(byte) bool) int {
		for j < len(src) && (ok(src[j]) || (src[j] == '_' && j+1 < len(src) && ok(src[j+1]))) {
			j++
		}
		return j
	}
	dec := func(b byte) bool { return b >= '0' && b <= '9' }
	if src[i] == '0' && i+1 < len(src) {
		base := 0
		var ok func(byte) bool
		switch src[i+1] | 0x20 {
		case 'b':
			base, ok = 2, func(b byte) bool { return b == '0' || b == '1' }
		case 'o':
			base, ok = 8, func(b byte) bool { return b >= '0' && b <= '7' }
		case 'x':
			base, ok = 16, func(b byte) bool { return dec(b) || (b|0x20 >= 'a' && b|0x20 <= 'f') }
		}
		if base != 0 {
			j := i + 2
			if j < len(src) && src[j] == '_' {
				j++
			}
			if j < len(src) && ok(src[j]) {
				j = digits(j, ok)
				n, err := strconv.ParseInt(strings.ReplaceAll(src[i+2:j], "_", ""), base, 64)
				if err != nil {
					return 0, token{}, lx.errOwn(lx.line, "integer literal %s does not fit 64 bits", src[i:j])
				}
				return j, token{typ: tInt, num: n, val: src[i:j], line: lx.line}, nil
			}
		}
	}
	j := digits(i, dec)
	isFloat := false
	if j+1 < len(src) && src[j] == '.' && dec(src[j+1]) {
		j = digits(j+1, dec)
		isFloat = true
	}
	if j < len(src) && src[j]|0x20 == 'e' {
		k := j + 1
		if k < len(src) && (src[k] == '+' || src[k] == '-') {
			k++
		}
		if k < len(src) && dec(src[k]) {
			j = digits(k, dec)
			isFloat = true
		}
	}
	lit := strings.ReplaceAll(src[i:j], "_", "")
	if isFloat {
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil && f == 0 {
			return 0, token{}, lx.errOwn(lx.line, "bad float literal %s", src[i:j])
		}
		return j, token{typ: tFloat, num: int64(math.Float64bits(f)), val: src[i:j], line: lx.line}, nil
	}
	n, err := strconv.ParseInt(lit, 10, 64)
	if err != nil {
		return 0, token{}, lx.errOwn(lx.line, "integer literal %s does not fit 64 bits", src[i:j])
	}
	return j, token{typ: tInt, num: n, val: src[i:j], line: lx.line}, nil
}

// decodeEscapes is Python's unicode-escape decoding of a string literal's body.
func decodeEscapes(s string) (string, error) {
	if strings.IndexByte(s, '\\') < 0 {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch c = s[i]; c {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(c)
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'f':
			b.WriteByte(12)
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte(11)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			n := 0
			j := i
			for ; j < len(s) && j < i+3 && s[j] >= '0' && s[j] <= '7'; j++ {
				n = n*8 + int(s[j]-'0')
			}
			b.WriteRune(rune(n))
			i = j - 1
		case 'x', 'u', 'U':
			w := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
			if i+1+w > len(s) {
				return "", fmt.Errorf("truncated \\%cXX escape", c)
			}
			n, err := strconv.ParseUint(s[i+1:i+1+w], 16, 32)
			if err != nil || n > unicode.MaxRune {
				return "", fmt.Errorf("truncated \\%cXX escape", c)
			}
			b.WriteRune(rune(n))
			i += w
		default:
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}
