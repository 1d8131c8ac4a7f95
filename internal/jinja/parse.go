package jinja

import (
	"fmt"
	"strings"
)

// ParseOptions configure the lexer. Transformers' chat templates use TrimBlocks and
// LStripBlocks, without KeepTrailingNewline.
type ParseOptions struct {
	TrimBlocks          bool   // remove the first newline after a block or comment tag
	LStripBlocks        bool   // strip spaces and tabs from a line's start up to a block or comment tag
	KeepTrailingNewline bool   // keep the source's final newline (Jinja2 drops one by default)
	Name                string // where the source came from, for errors
}

// MaxParseDepth bounds the nesting of expressions and blocks, so that no source can exhaust
// the stack while parsing or rendering.
const MaxParseDepth = 256

// Template is a parsed template. It is immutable and safe for concurrent renders.
type Template struct {
	body []stmt
	tags map[string]bool
	name string
}

// HasTag reports whether the template uses the statement tag (e.g. "generation", "macro").
func (t *Template) HasTag(name string) bool { return t.tags[name] }

// Parse parses a template. A template that does not parse is a *SyntaxError. The source's size
// is the caller's to bound; parsing is linear in it and its nesting is limited (MaxParseDepth).
func Parse(src string, opts ParseOptions) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("jinja: internal error while parsing: %v", r)
		}
	}()
	lx := &lexer{src: normalizeNewlines(src, opts.KeepTrailingNewline), opts: opts}
	if err := lx.lex(); err != nil {
		return nil, err
	}
	p := &parser{toks: lx.toks, name: opts.Name, tags: map[string]bool{}}
	body, err := p.subparse(nil)
	if err == nil {
		err = p.checkUnknown()
	}
	if err != nil {
		return nil, err
	}
	return &Template{body: body, tags: p.tags, name: opts.Name}, nil
}

type parser struct {
	toks     []token
	i        int
	name     string
	depth    int
	tagStack []string
	endStack [][]string
	tags     map[string]bool
	loops    int      // enclosing for loops (in the current macro)
	names    []string // every name expression parsed, in order
	soft     int      // inside if statements: unknown filters and tests fail at runtime
	unknowns []unknownRef
}

func (p *parser) cur() token  { return p.toks[p.i] }
func (p *parser) look() token { return p.toks[min(p.i+1, len(p.toks)-1)] }
func (p *parser) next() token {
	t := p.toks[p.i]
	if p.i < len(p.toks)-1 {
		p.i++
	}
	return t
}

func (p *parser) fail(line int, format string, a ...any) error {
	return &SyntaxError{Name: p.name, Line: line, Msg: fmt.Sprintf(format, a...), Python: true}
}

// failOwn is a syntax error in this engine's words.
func (p *parser) failOwn(line int, format string, a ...any) error {
	return &SyntaxError{Name: p.name, Line: line, Msg: fmt.Sprintf(format, a...)}
}

func (p *parser) isOp(op string) bool { t := p.cur(); return t.typ == tOp && t.val == op }
func (p *parser) isName(n string) bool {
	t := p.cur()
	return t.typ == tName && t.val == n
}

func (p *parser) skipOp(op string) bool {
	if p.isOp(op) {
		p.next()
		return true
	}
	return false
}

func (p *parser) skipName(n string) bool {
	if p.isName(n) {
		p.next()
		return true
	}
	return false
}

func (p *parser) expectOp(op string) error {
	if !p.skipOp(op) {
		return p.fail(p.cur().line, "expected token %s, got %s", repr(String(op)), repr(String(p.cur().describe())))
	}
	return nil
}

func (p *parser) expectType(typ tokType, what string) (token, error) {
	t := p.cur()
	if t.typ != typ {
		if t.typ == tEOF {
			return t, p.fail(t.line, "unexpected end of template, expected %s.", repr(String(what)))
		}
		return t, p.fail(t.line, "expected token %s, got %s", repr(String(what)), repr(String(t.describe())))
	}
	p.next()
	return t, nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > MaxParseDepth {
		return p.failOwn(p.cur().line, "template nested too deeply (more than %d levels)", MaxParseDepth)
	}
	return nil
}

// subparse parses until one of endTags (a block tag's name) or the end of the template.
func (p *parser) subparse(endTags []string) ([]stmt, error) {
	var body []stmt
	for {
		t := p.cur()
		switch t.typ {
		case tEOF:
			if endTags != nil {
				return nil, p.failUnknownTag("", t.line)
			}
			return body, nil
		case tData:
			p.next()
			body = append(body, &textNode{s: t.val})
		case tVarBegin:
			p.next()
			e, err := p.parseTuple(false, true, nil, false)
			if err != nil {
				return nil, err
			}
			if _, err := p.expectType(tVarEnd, "end of print statement"); err != nil {
				return nil, err
			}
			body = append(body, &outputNode{pos{t.line}, e})
		case tBlockBegin:
			p.next()
			if c := p.cur(); c.typ == tName && contains(endTags, c.val) {
				return body, nil
			}
			s, err := p.parseStatement()
			if err != nil {
				return nil, err
			}
			if s != nil {
				body = append(body, s)
			}
			if _, err := p.expectType(tBlockEnd, "end of statement block"); err != nil {
				return nil, err
			}
		default:
			return nil, p.fail(t.line, "unexpected %s", repr(String(t.describe())))
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func (p *parser) failUnknownTag(name string, line int) error {
	var msg []string
	if name == "" {
		msg = append(msg, "Unexpected end of template.")
	} else {
		msg = append(msg, fmt.Sprintf("Encountered unknown tag %s.", repr(String(name))))
	}
	if len(p.endStack) > 0 {
		var q []string
		expected := false
		for _, l := range p.endStack {
			if contains(l, name) {
				expected = true
			}
		}
		for _, e := range p.endStack[len(p.endStack)-1] {
			q = append(q, repr(String(e)))
		}
		looking := strings.Join(q, " or ")
		if name != "" && expected {
			msg = append(msg, "You probably made a nesting mistake. Jinja is expecting this tag, but currently looking for "+looking+".")
		} else {
			msg = append(msg, "Jinja was looking for the following tags: "+looking+".")
		}
	}
	if len(p.tagStack) > 0 {
		msg = append(msg, fmt.Sprintf("The innermost block that needs to be closed is %s.", repr(String(p.tagStack[len(p.tagStack)-1]))))
	}
	return p.fail(line, "%s", strings.Join(msg, " "))
}

// parseStatements parses a statement's body up to one of endTags; with drop the end tag is
// consumed too.
func (p *parser) parseStatements(endTags []string, drop bool) ([]stmt, error) {
	p.skipOp(":")
	if _, err := p.expectType(tBlockEnd, "end of statement block"); err != nil {
		return nil, err
	}
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.endStack = append(p.endStack, endTags)
	body, err := p.subparse(endTags)
	p.endStack = p.endStack[:len(p.endStack)-1]
	p.depth--
	if err != nil {
		return nil, err
	}
	if drop {
		p.next()
	}
	return body, nil
}

func (p *parser) parseStatement() (stmt, error) {
	t := p.cur()
	if t.typ != tName {
		return nil, p.fail(t.line, "tag name expected")
	}
	p.tagStack = append(p.tagStack, t.val)
	popTag := true
	defer func() {
		if popTag {
			p.tagStack = p.tagStack[:len(p.tagStack)-1]
		}
	}()
	switch t.val {
	case "if", "for", "set", "macro", "call", "filter", "with", "generation", "break", "continue":
		p.tags[t.val] = true
	}
	switch t.val {
	case "if":
		return p.parseIf()
	case "for":
		return p.parseFor()
	case "set":
		return p.parseSet()
	case "macro":
		return p.parseMacro()
	case "call":
		return p.parseCallBlock()
	case "filter":
		p.next()
		fs, err := p.parseFilterChain(nil, true)
		if err != nil {
			return nil, err
		}
		body, err := p.parseStatements([]string{"endfilter"}, true)
		if err != nil {
			return nil, err
		}
		return &filterBlockNode{pos{t.line}, fs, body}, nil
	case "with":
		return p.parseWith()
	case "generation":
		p.next()
		body, err := p.parseStatements([]string{"endgeneration"}, true)
		if err != nil {
			return nil, err
		}
		return &generationNode{pos{t.line}, body}, nil
	case "break", "continue":
		p.next()
		if p.loops == 0 {
			return nil, p.failOwn(t.line, "%s outside of a loop", repr(String(t.val)))
		}
		return &loopCtlNode{pos{t.line}, t.val == "break"}, nil
	case "include", "extends", "import", "from", "block", "do", "autoescape", "trans":
		return nil, p.failOwn(t.line, "the %s tag is not supported by this engine", repr(String(t.val)))
	}
	popTag = false
	p.tagStack = p.tagStack[:len(p.tagStack)-1]
	return nil, p.failUnknownTag(t.val, t.line)
}

func (p *parser) parseIf() (stmt, error) {
	n := &ifNode{}
	p.next()
	p.soft++
	defer func() { p.soft-- }()
	for {
		cond, err := p.parseTuple(false, false, nil, false)
		if err != nil {
			return nil, err
		}
		body, err := p.parseStatements([]string{"elif", "else", "endif"}, false)
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, cond)
		n.bodies = append(n.bodies, body)
		tag := p.next()
		switch tag.val {
		case "elif":
			continue
		case "else":
			n.els, err = p.parseStatements([]string{"endif"}, true)
			if err != nil {
				return nil, err
			}
		}
		return n, nil
	}
}

func (p *parser) parseFor() (stmt, error) {
	line := p.next().line
	tgt, err := p.parseAssignTarget(true, false, []string{"in"}, false)
	if err != nil {
		return nil, err
	}
	if !p.skipName("in") {
		return nil, p.fail(p.cur().line, "expected token 'in', got %s", repr(String(p.cur().describe())))
	}
	iter, err := p.parseTuple(false, false, []string{"recursive"}, false)
	if err != nil {
		return nil, err
	}
	n := &forNode{pos: pos{line}, tgt: tgt, iter: iter}
	if p.skipName("if") {
		if n.cond, err = p.parseExpression(true); err != nil {
			return nil, err
		}
	}
	n.recursive = p.skipName("recursive")
	p.loops++
	n.body, err = p.parseStatements([]string{"endfor", "else"}, false)
	p.loops--
	if err != nil {
		return nil, err
	}
	if p.next().val == "else" {
		if n.els, err = p.parseStatements([]string{"endfor"}, true); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (p *parser) parseSet() (stmt, error) {
	line := p.next().line
	tgt, err := p.parseAssignTarget(true, false, nil, true)
	if err != nil {
		return nil, err
	}
	if p.skipOp("=") {
		e, err := p.parseTuple(false, true, nil, false)
		if err != nil {
			return nil, err
		}
		return &setNode{pos{line}, tgt, e}, nil
	}
	var fs []*filterExpr
	if p.isOp("|") {
		if fs, err = p.parseFilterChain(nil, false); err != nil {
			return nil, err
		}
	}
	body, err := p.parseStatements([]string{"endset"}, true)
	if err != nil {
		return nil, err
	}
	return &setBlockNode{pos{line}, tgt, fs, body}, nil
}

func (p *parser) parseWith() (stmt, error) {
	line := p.next().line
	n := &withNode{pos: pos{line}}
	for p.cur().typ != tBlockEnd {
		if len(n.tgts) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		tgt, err := p.parseAssignTarget(true, false, nil, false)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp("="); err != nil {
			return nil, err
		}
		v, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		n.tgts = append(n.tgts, tgt)
		n.vals = append(n.vals, v)
	}
	var err error
	n.body, err = p.parseStatements([]string{"endwith"}, true)
	return n, err
}

// parseBody parses a macro or caller body: loop controls do not reach through it.
func (p *parser) parseBody(end string) ([]stmt, error) {
	loops := p.loops
	p.loops = 0
	body, err := p.parseStatements([]string{end}, true)
	p.loops = loops
	return body, err
}

func (p *parser) parseMacro() (stmt, error) {
	line := p.next().line
	name, err := p.expectType(tName, "name")
	if err != nil {
		return nil, err
	}
	m := &macroDef{name: name.val, line: line}
	start := len(p.names)
	if m.params, err = p.parseSignature(); err != nil {
		return nil, err
	}
	if m.body, err = p.parseBody("endmacro"); err != nil {
		return nil, err
	}
	m.scanNames(p.names[start:])
	return &macroNode{pos{line}, m}, nil
}

func (p *parser) parseCallBlock() (stmt, error) {
	line := p.next().line
	m := &macroDef{name: "caller", line: line}
	start := len(p.names)
	var err error
	if p.isOp("(") {
		if m.params, err = p.parseSignature(); err != nil {
			return nil, err
		}
	}
	e, err := p.parseExpression(true)
	if err != nil {
		return nil, err
	}
	call, ok := e.(*callExpr)
	if !ok {
		return nil, p.fail(line, "expected call")
	}
	if m.body, err = p.parseBody("endcall"); err != nil {
		return nil, err
	}
	m.scanNames(p.names[start:])
	return &callBlockNode{pos{line}, m, call}, nil
}

func (p *parser) parseSignature() ([]param, error) {
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	var ps []param
	err := p.commaSeparated(")", false, func() error {
		t, err := p.expectType(tName, "name")
		if err != nil {
			return err
		}
		pr := param{name: t.val}
		if p.skipOp("=") {
			if pr.def, err = p.parseExpression(true); err != nil {
				return err
			}
		} else if len(ps) > 0 && ps[len(ps)-1].def != nil {
			return p.fail(t.line, "non-default argument follows default argument")
		}
		ps = append(ps, pr)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ps, nil
}

// parseAssignTarget parses a set/for/with target: names, tuples of names, or ns.attr.
func (p *parser) parseAssignTarget(withTuple, nameOnly bool, extraEnd []string, withNamespace bool) (target, error) {
	t := p.cur()
	if withNamespace && t.typ == tName && p.look().typ == tOp && p.look().val == "." {
		p.next()
		p.next()
		attr, err := p.expectType(tName, "name")
		if err != nil {
			return target{}, err
		}
		return target{name: t.val, attr: attr.val}, nil
	}
	if nameOnly || !withTuple {
		n, err := p.expectType(tName, "name")
		return target{name: n.val}, err
	}
	var items []target
	isTuple := false
	for {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return target{}, err
			}
		}
		if p.isTupleEnd(extraEnd) {
			break
		}
		c := p.cur()
		var it target
		switch {
		case c.typ == tName && !isKeywordConst(c.val):
			p.next()
			it = target{name: c.val}
		case c.typ == tOp && c.val == "(":
			p.next()
			inner, err := p.parseAssignTarget(true, false, nil, false)
			if err != nil {
				return target{}, err
			}
			if err := p.expectOp(")"); err != nil {
				return target{}, err
			}
			it = inner
		default:
			return target{}, p.fail(c.line, "can't assign to %s", repr(String(c.describe())))
		}
		items = append(items, it)
		if p.isOp(",") {
			isTuple = true
		} else {
			break
		}
	}
	if !isTuple {
		if len(items) == 0 {
			return target{}, p.fail(p.cur().line, "Expected an expression, got %s", repr(String(p.cur().describe())))
		}
		return items[0], nil
	}
	return target{items: items, tuple: true}, nil
}

func isKeywordConst(s string) bool {
	switch s {
	case "true", "false", "none", "True", "False", "None":
		return true
	}
	return false
}

func (p *parser) isTupleEnd(extraEnd []string) bool {
	t := p.cur()
	switch {
	case t.typ == tVarEnd || t.typ == tBlockEnd || t.typ == tEOF:
		return true
	case t.typ == tOp && t.val == ")":
		return true
	case t.typ == tName && contains(extraEnd, t.val):
		return true
	}
	return false
}

// scanNames records whether a macro body (the names parsed since start) refers to caller,
// varargs or kwargs.
func (m *macroDef) scanNames(names []string) {
	for _, n := range names {
		switch n {
		case "caller":
			m.usesCaller = true
		case "varargs":
			m.usesVA = true
		case "kwargs":
			m.usesKW = true
		}
	}
}
