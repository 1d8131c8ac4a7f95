package regex

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

type nodeKind uint8

const (
	nEmpty  nodeKind = iota
	nClass           // one rune from cls
	nConcat          // subs in sequence
	nAlt             // subs by priority
	nRepeat          // subs[0] repeated min..max (max < 0: unbounded)
	nAssert          // zero-width assertion at
	nLook            // lookaround over subs[0]
)

type assertKind uint8

const (
	aBeginLine assertKind = iota // ^
	aEndLine                     // $
	aBeginText                   // \A
	aEndText                     // \z
	aEndTextNL                   // \Z
	aWordB                       // \b
	aNotWordB                    // \B
)

type node struct {
	kind     nodeKind
	cls      *charClass
	subs     []*node
	min, max int
	greedy   bool
	at       assertKind
	behind   bool // lookbehind instead of lookahead
	negate   bool // negative lookaround
}

type flags struct {
	icase  bool // (?i)
	dotNL  bool // (?m) in Ruby syntax: '.' also matches '\n'
	extend bool // (?x)
}

// Error is a pattern error with the rune offset where it was found.
type Error struct {
	Pattern string
	Pos     int
	Msg     string
}

func (e *Error) Error() string {
	return fmt.Sprintf("regex %q at offset %d: %s", e.Pattern, e.Pos, e.Msg)
}

type parser struct {
	src   []rune
	pos   int
	flags flags
	depth int
}

// maxDepth bounds group nesting so that hostile patterns cannot exhaust the
// stack of the recursive-descent parser.
const maxDepth = 500

func parse(pattern string) (*node, error) {
	if !utf8.ValidString(pattern) {
		return nil, &Error{Pattern: pattern, Msg: "pattern is not valid UTF-8"}
	}
	p := &parser{src: []rune(pattern)}
	n, err := p.parseAlt()
	if err != nil {
		return nil, err
	}
	if p.pos < len(p.src) {
		return nil, p.errf("unmatched ')'")
	}
	return n, nil
}

func (p *parser) errf(format string, a ...any) error {
	return &Error{Pattern: string(p.src), Pos: p.pos, Msg: fmt.Sprintf(format, a...)}
}

func (p *parser) more() bool { return p.pos < len(p.src) }
func (p *parser) peek() rune { return p.src[p.pos] }
func (p *parser) lookingAt(s string) bool {
	rs := []rune(s)
	if p.pos+len(rs) > len(p.src) {
		return false
	}
	for i, r := range rs {
		if p.src[p.pos+i] != r {
			return false
		}
	}
	return true
}

// parseAlt parses alternatives up to ')' or the end of the pattern.
func (p *parser) parseAlt() (*node, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return nil, p.errf("groups nested too deeply")
	}
	var alts []*node
	for {
		c, err := p.parseConcat()
		if err != nil {
			return nil, err
		}
		alts = append(alts, c)
		if p.more() && p.peek() == '|' {
			p.pos++
			continue
		}
		break
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return &node{kind: nAlt, subs: alts}, nil
}

func (p *parser) parseConcat() (*node, error) {
	var items []*node
	for p.more() {
		c := p.peek()
		if c == '|' || c == ')' {
			break
		}
		if p.flags.extend && p.skipExtended() {
			continue
		}
		// An inline flag group "(?i)" applies to the rest of the enclosing
		// group, alternatives included (Oniguruma: "a(?i)b|c" is "a(?i:b|c)").
		if f, ok, err := p.inlineFlags(); err != nil {
			return nil, err
		} else if ok {
			saved := p.flags
			p.flags = f
			rest, err := p.parseAlt()
			p.flags = saved
			if err != nil {
				return nil, err
			}
			items = append(items, rest)
			break
		}
		atom, err := p.parseAtom()
		if err != nil {
			return nil, err
		}
		atom, err = p.parseQuantifiers(atom)
		if err != nil {
			return nil, err
		}
		items = append(items, atom)
	}
	switch len(items) {
	case 0:
		return &node{kind: nEmpty}, nil
	case 1:
		return items[0], nil
	}
	return &node{kind: nConcat, subs: items}, nil
}

// skipExtended skips whitespace and #-comments in (?x) mode.
func (p *parser) skipExtended() bool {
	c := p.peek()
	if unicode.IsSpace(c) {
		p.pos++
		return true
	}
	if c == '#' {
		for p.more() && p.peek() != '\n' {
			p.pos++
		}
		return true
	}
	return false
}

// inlineFlags recognises "(?imx-imx)" (without a ':') at the current position.
func (p *parser) inlineFlags() (flags, bool, error) {
	if !p.lookingAt("(?") {
		return p.flags, false, nil
	}
	i := p.pos + 2
	f := p.flags
	on := true
	seen := false
	for i < len(p.src) {
		switch p.src[i] {
		case 'i':
			f.icase = on
		case 'm':
			f.dotNL = on
		case 'x':
			f.extend = on
		case '-':
			if !on {
				return f, false, nil
			}
			on = false
		case ')':
			if !seen {
				return f, false, nil
			}
			p.pos = i + 1
			return f, true, nil
		default:
			return f, false, nil
		}
		seen = true
		i++
	}
	return f, false, nil
}

func (p *parser) parseAtom() (*node, error) {
	c := p.peek()
	switch c {
	case '(':
		return p.parseGroup()
	case '[':
		s, err := p.parseClass()
		if err != nil {
			return nil, err
		}
		return p.classNode(s, false), nil
	case '.':
		p.pos++
		if p.flags.dotNL {
			return p.classNode(set(nil).add(0, unicode.MaxRune), false), nil
		}
		return p.classNode(set(nil).add('\n', '\n').negate(), false), nil
	case '^':
		p.pos++
		return &node{kind: nAssert, at: aBeginLine}, nil
	case '$':
		p.pos++
		return &node{kind: nAssert, at: aEndLine}, nil
	case '\\':
		return p.parseEscapeAtom()
	case '*', '+', '?':
		return nil, p.errf("quantifier %q without operand", c)
	case '{':
		if _, _, _, ok := p.scanInterval(); ok {
			return nil, p.errf("quantifier without operand")
		}
	}
	p.pos++
	return p.literal(c), nil
}

func (p *parser) literal(r rune) *node {
	return p.classNode(set(nil).add(r, r), true)
}

// classNode wraps a set, applying case folding when (?i) is on.
func (p *parser) classNode(s set, fold bool) *node {
	if p.flags.icase && fold {
		s = s.foldCase()
	}
	return &node{kind: nClass, cls: s.finish()}
}

func (p *parser) parseGroup() (*node, error) {
	start := p.pos
	p.pos++ // '('
	var n *node
	saved := p.flags
	defer func() { p.flags = saved }()
	if p.more() && p.peek() == '?' {
		p.pos++
		if !p.more() {
			return nil, p.errf("unterminated group")
		}
		switch c := p.peek(); {
		case c == ':':
			p.pos++
		case c == '=' || c == '!':
			p.pos++
			n = &node{kind: nLook, negate: c == '!'}
		case c == '<' && p.pos+1 < len(p.src) && (p.src[p.pos+1] == '=' || p.src[p.pos+1] == '!'):
			n = &node{kind: nLook, behind: true, negate: p.src[p.pos+1] == '!'}
			p.pos += 2
		case c == '<' || c == '\'' || c == 'P':
			// Named group: a plain group for our purposes (only whole-match
			// bounds are reported).
			if c == 'P' {
				p.pos++
				if !p.more() || p.peek() != '<' {
					return nil, p.errf("unsupported group syntax")
				}
			}
			end := '>'
			if p.peek() == '\'' {
				end = '\''
			}
			p.pos++
			for p.more() && p.peek() != end {
				p.pos++
			}
			if !p.more() {
				return nil, p.errf("unterminated group name")
			}
			p.pos++
		case c == '#':
			for p.more() && p.peek() != ')' {
				p.pos++
			}
			if !p.more() {
				return nil, p.errf("unterminated comment")
			}
			p.pos++
			return &node{kind: nEmpty}, nil
		case c == '>':
			return nil, p.errf("atomic groups (?>...) are not supported")
		case c == '~':
			return nil, p.errf("absent operator (?~...) is not supported")
		case c == '(':
			return nil, p.errf("conditional groups are not supported")
		default:
			// Scoped flags "(?i-m:...)".
			f := p.flags
			on := true
			for {
				if !p.more() {
					return nil, p.errf("unterminated group")
				}
				ch := p.peek()
				p.pos++
				switch ch {
				case 'i':
					f.icase = on
				case 'm':
					f.dotNL = on
				case 'x':
					f.extend = on
				case '-':
					on = false
				case ':':
					p.flags = f
					goto body
				default:
					return nil, p.errf("unsupported group flag %q", ch)
				}
			}
		}
	}
body:
	sub, err := p.parseAlt()
	if err != nil {
		return nil, err
	}
	if !p.more() || p.peek() != ')' {
		p.pos = start
		return nil, p.errf("missing ')'")
	}
	p.pos++
	if n != nil {
		n.subs = []*node{sub}
		return n, nil
	}
	return sub, nil
}

// scanInterval recognises "{n}", "{n,}", "{n,m}" and "{,m}" at the current
// position without consuming it. Anything else is a literal '{' (Oniguruma).
func (p *parser) scanInterval() (lo, hi, end int, ok bool) {
	i := p.pos + 1
	readNum := func() (int, bool) {
		j := i
		for i < len(p.src) && p.src[i] >= '0' && p.src[i] <= '9' {
			i++
		}
		if j == i {
			return 0, false
		}
		v, err := strconv.Atoi(string(p.src[j:i]))
		if err != nil || v > 100000 {
			return -2, true
		}
		return v, true
	}
	lo, hasLo := readNum()
	if lo == -2 {
		return 0, 0, 0, false
	}
	if i < len(p.src) && p.src[i] == '}' {
		if !hasLo {
			return 0, 0, 0, false
		}
		return lo, lo, i + 1, true
	}
	if i >= len(p.src) || p.src[i] != ',' {
		return 0, 0, 0, false
	}
	i++
	hi, hasHi := readNum()
	if hi == -2 || i >= len(p.src) || p.src[i] != '}' {
		return 0, 0, 0, false
	}
	if !hasLo && !hasHi {
		return 0, 0, 0, false
	}
	if !hasHi {
		hi = -1
	}
	return lo, hi, i + 1, true
}

func (p *parser) parseQuantifiers(atom *node) (*node, error) {
	for p.more() {
		var lo, hi int
		switch p.peek() {
		case '*':
			lo, hi = 0, -1
			p.pos++
		case '+':
			lo, hi = 1, -1
			p.pos++
		case '?':
			lo, hi = 0, 1
			p.pos++
		case '{':
			l, h, end, ok := p.scanInterval()
			if !ok {
				return atom, nil
			}
			if h >= 0 && l > h {
				return nil, p.errf("invalid repeat range {%d,%d}", l, h)
			}
			lo, hi = l, h
			p.pos = end
		default:
			return atom, nil
		}
		if atom.kind == nAssert || atom.kind == nLook {
			return nil, p.errf("quantifier on a zero-width assertion")
		}
		greedy := true
		if p.more() {
			switch p.peek() {
			case '?':
				greedy = false
				p.pos++
			case '+':
				if p.src[p.pos-1] != '}' {
					return nil, p.errf("possessive quantifiers are not supported")
				}
			}
		}
		atom = &node{kind: nRepeat, subs: []*node{atom}, min: lo, max: hi, greedy: greedy}
	}
	return atom, nil
}

// parseEscapeAtom handles a backslash outside a character class.
func (p *parser) parseEscapeAtom() (*node, error) {
	if p.pos+1 >= len(p.src) {
		return nil, p.errf("trailing backslash")
	}
	c := p.src[p.pos+1]
	switch c {
	case 'A':
		p.pos += 2
		return &node{kind: nAssert, at: aBeginText}, nil
	case 'z':
		p.pos += 2
		return &node{kind: nAssert, at: aEndText}, nil
	case 'Z':
		p.pos += 2
		return &node{kind: nAssert, at: aEndTextNL}, nil
	case 'b':
		p.pos += 2
		return &node{kind: nAssert, at: aWordB}, nil
	case 'B':
		p.pos += 2
		return &node{kind: nAssert, at: aNotWordB}, nil
	case 'G', 'K', 'R', 'X', 'k', 'g', 'y', 'Y', 'O', 'N':
		return nil, p.errf("escape \\%c is not supported", c)
	}
	if c >= '1' && c <= '9' {
		return nil, p.errf("backreferences are not supported")
	}
	s, lit, err := p.parseEscape()
	if err != nil {
		return nil, err
	}
	return p.classNode(s, lit), nil
}

// parseEscape parses an escape usable both inside and outside classes. It
// returns the set and whether it was a single literal rune (which (?i) folds).
func (p *parser) parseEscape() (set, bool, error) {
	p.pos++ // backslash
	if !p.more() {
		return nil, false, p.errf("trailing backslash")
	}
	c := p.peek()
	p.pos++
	one := func(r rune) (set, bool, error) { return set(nil).add(r, r), true, nil }
	switch c {
	case 't':
		return one('\t')
	case 'n':
		return one('\n')
	case 'r':
		return one('\r')
	case 'f':
		return one('\f')
	case 'v':
		return one('\v')
	case 'a':
		return one('\a')
	case 'e':
		return one(0x1B)
	case 'd':
		return digitSet(), false, nil
	case 'D':
		return digitSet().negate(), false, nil
	case 's':
		return spaceSet(), false, nil
	case 'S':
		return spaceSet().negate(), false, nil
	case 'w':
		return wordSet(), false, nil
	case 'W':
		return wordSet().negate(), false, nil
	case 'h':
		return hexSet(), false, nil
	case 'H':
		return hexSet().negate(), false, nil
	case 'p', 'P':
		return p.parseProperty(c == 'P')
	case 'x':
		if p.more() && p.peek() == '{' {
			j := p.pos + 1
			for j < len(p.src) && p.src[j] != '}' {
				j++
			}
			if j >= len(p.src) {
				return nil, false, p.errf("unterminated \\x{...}")
			}
			hex := string(p.src[p.pos+1 : j])
			v, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 32)
			if err != nil || v > unicode.MaxRune || (v >= 0xD800 && v <= 0xDFFF) {
				return nil, false, p.errf("invalid code point \\x{%s}", hex)
			}
			p.pos = j + 1
			return one(rune(v))
		}
		return p.hexDigits(2, one)
	case 'u':
		return p.hexDigits(4, one)
	case '0':
		// \0, \0o, \0oo: octal.
		v := 0
		for i := 0; i < 2 && p.more() && p.peek() >= '0' && p.peek() <= '7'; i++ {
			v = v*8 + int(p.peek()-'0')
			p.pos++
		}
		return one(rune(v))
	}
	if c < utf8.RuneSelf && (unicode.IsLetter(c) || unicode.IsDigit(c)) {
		return nil, false, p.errf("unknown escape \\%c", c)
	}
	return one(c)
}

func (p *parser) hexDigits(n int, one func(rune) (set, bool, error)) (set, bool, error) {
	start := p.pos
	for i := 0; i < n && p.more() && isHex(p.peek()); i++ {
		p.pos++
	}
	if p.pos == start || (n == 4 && p.pos-start != 4) {
		return nil, false, p.errf("invalid hex escape")
	}
	v, _ := strconv.ParseUint(string(p.src[start:p.pos]), 16, 32)
	return one(rune(v))
}

func isHex(r rune) bool {
	return (r >= '0' && r <= '9') || (r >= 'a' && r <= 'f') || (r >= 'A' && r <= 'F')
}

func (p *parser) parseProperty(neg bool) (set, bool, error) {
	if !p.more() || p.peek() != '{' {
		return nil, false, p.errf("expected '{' after \\p")
	}
	p.pos++
	start := p.pos
	for p.more() && p.peek() != '}' {
		p.pos++
	}
	if !p.more() {
		return nil, false, p.errf("unterminated \\p{...}")
	}
	name := string(p.src[start:p.pos])
	p.pos++
	if strings.HasPrefix(name, "^") {
		neg = !neg
		name = name[1:]
	}
	s, ok := lookupProperty(name)
	if !ok {
		return nil, false, p.errf("unknown Unicode property %q", name)
	}
	if neg {
		s = s.negate()
	}
	return s, false, nil
}

// parseClass parses "[...]" including nesting, "&&" intersection and POSIX
// brackets. Case folding is applied to the whole class before negation, as
// Oniguruma does.
func (p *parser) parseClass() (set, error) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxDepth {
		return nil, p.errf("classes nested too deeply")
	}
	start := p.pos
	p.pos++ // '['
	neg := false
	if p.more() && p.peek() == '^' {
		neg = true
		p.pos++
	}
	var acc set
	var inter []set // pending left operands of '&&'
	first := true
	for {
		if !p.more() {
			p.pos = start
			return nil, p.errf("unterminated character class")
		}
		c := p.peek()
		if c == ']' && !first {
			p.pos++
			break
		}
		first = false
		if p.lookingAt("&&") {
			p.pos += 2
			inter = append(inter, acc)
			acc = nil
			continue
		}
		if c == '[' {
			if p.lookingAt("[:") {
				if s, ok, err := p.posixBracket(); err != nil {
					return nil, err
				} else if ok {
					acc = acc.append(s)
					continue
				}
			}
			s, err := p.parseClass()
			if err != nil {
				return nil, err
			}
			acc = acc.append(s)
			continue
		}
		lo, single, s, err := p.classAtom()
		if err != nil {
			return nil, err
		}
		if !single {
			acc = acc.append(s)
			continue
		}
		// Range "a-z" (a '-' before ']' is literal).
		if p.more() && p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
			save := p.pos
			p.pos++
			hi, single2, _, err := p.classAtom()
			if err != nil {
				return nil, err
			}
			if !single2 {
				// "[a-\d]": Oniguruma rejects this too.
				p.pos = save
				return nil, p.errf("invalid range end in character class")
			}
			if hi < lo {
				return nil, p.errf("invalid range %q-%q in character class", lo, hi)
			}
			acc = acc.add(lo, hi)
			continue
		}
		acc = acc.add(lo, lo)
	}
	for i := len(inter) - 1; i >= 0; i-- {
		acc = inter[i].intersect(acc)
	}
	if p.flags.icase {
		acc = acc.foldCase()
	}
	if neg {
		acc = acc.negate()
	}
	return acc, nil
}

// classAtom reads one element of a class: a literal rune or an escape.
func (p *parser) classAtom() (rune, bool, set, error) {
	c := p.peek()
	if c != '\\' {
		p.pos++
		return c, true, nil, nil
	}
	if p.pos+1 < len(p.src) {
		switch p.src[p.pos+1] {
		case 'b':
			p.pos += 2
			return '\b', true, nil, nil
		}
	}
	s, lit, err := p.parseEscape()
	if err != nil {
		return 0, false, nil, err
	}
	if lit {
		return s[0].lo, true, nil, nil
	}
	return 0, false, s, nil
}

func (p *parser) posixBracket() (set, bool, error) {
	rest := string(p.src[p.pos:])
	end := strings.Index(rest, ":]")
	if end < 0 {
		return nil, false, nil
	}
	name := rest[2:end]
	neg := strings.HasPrefix(name, "^")
	if neg {
		name = name[1:]
	}
	for _, r := range name {
		if !unicode.IsLetter(r) {
			return nil, false, nil
		}
	}
	s, ok := lookupProperty(name)
	if !ok {
		return nil, false, p.errf("unknown POSIX bracket [:%s:]", name)
	}
	p.pos += len([]rune(rest[:end+2]))
	if neg {
		s = s.negate()
	}
	return s, true, nil
}
