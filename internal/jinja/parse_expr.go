package jinja

import "strings"

// Expression parsing, following Jinja2's grammar and precedence: conditional expressions,
// or, and, not, comparisons, + -, ~, * / // %, **, unary - +, then primaries with postfix
// (attribute, subscript, call) and filters and tests.

// parseTuple parses an expression or a comma-separated tuple of them. simplified parses only
// primaries (assignment targets); withCond allows conditional expressions.
func (p *parser) parseTuple(simplified, withCond bool, extraEnd []string, explicitParens bool) (expr, error) {
	line := p.cur().line
	var items []expr
	isTuple := false
	for {
		if len(items) > 0 {
			if err := p.expectOp(","); err != nil {
				return nil, err
			}
		}
		if p.isTupleEnd(extraEnd) {
			break
		}
		var e expr
		var err error
		if simplified {
			e, err = p.parsePrimary()
		} else {
			e, err = p.parseExpression(withCond)
		}
		if err != nil {
			return nil, err
		}
		items = append(items, e)
		if p.isOp(",") {
			isTuple = true
		} else {
			break
		}
		line = p.cur().line
	}
	if !isTuple {
		if len(items) > 0 {
			return items[0], nil
		}
		if !explicitParens {
			return nil, p.fail(p.cur().line, "Expected an expression, got %s", repr(String(p.cur().describe())))
		}
	}
	return &listExpr{pos{line}, items, true}, nil
}

func (p *parser) parseExpression(withCond bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	if withCond {
		return p.parseCondExpr()
	}
	return p.parseOr()
}

func (p *parser) parseCondExpr() (expr, error) {
	line := p.cur().line
	mark := len(p.unknowns)
	e1, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	n := 0
	defer func() { p.depth -= n }()
	for p.skipName("if") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		n++
		e2, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		var e3 expr
		if p.skipName("else") {
			if e3, err = p.parseCondExpr(); err != nil {
				return nil, err
			}
		}
		e1 = &condExpr{pos{line}, e2, e1, e3}
		for i := mark; i < len(p.unknowns); i++ {
			p.unknowns[i].soft = true // Jinja2 defers these to runtime
		}
		line = p.cur().line
	}
	return e1, nil
}

// leftAssoc parses operand (op operand)*, left-associative: match reports and consumes the next
// operator, join builds the node. Every operator of a chain counts as one level of nesting, so
// that `1+1+1+…` is bounded by the parser's depth limit as `((((…` is.
func (p *parser) leftAssoc(operand func() (expr, error), match func() (string, bool), join func(line int, op string, l, r expr) expr) (expr, error) {
	line := p.cur().line
	l, err := operand()
	if err != nil {
		return nil, err
	}
	n := 0
	defer func() { p.depth -= n }()
	for {
		op, ok := match()
		if !ok {
			return l, nil
		}
		if err := p.enter(); err != nil {
			return nil, err
		}
		n++
		r, err := operand()
		if err != nil {
			return nil, err
		}
		l = join(line, op, l, r)
		line = p.cur().line
	}
}

// matchName consumes the keyword operator name ("or", "and").
func (p *parser) matchName(name string) func() (string, bool) {
	return func() (string, bool) { return name, p.skipName(name) }
}

// matchOp consumes one of the operator tokens ops.
func (p *parser) matchOp(ops ...string) func() (string, bool) {
	return func() (string, bool) {
		for _, o := range ops {
			if p.isOp(o) {
				return p.next().val, true
			}
		}
		return "", false
	}
}

func logic(and bool) func(int, string, expr, expr) expr {
	return func(line int, _ string, l, r expr) expr { return &logicExpr{pos{line}, and, l, r} }
}

func binary(line int, op string, l, r expr) expr { return &binExpr{pos{line}, op, l, r} }

func (p *parser) parseOr() (expr, error) {
	return p.leftAssoc(p.parseAnd, p.matchName("or"), logic(false))
}

func (p *parser) parseAnd() (expr, error) {
	return p.leftAssoc(p.parseNot, p.matchName("and"), logic(true))
}

func (p *parser) parseNot() (expr, error) {
	if p.isName("not") {
		line := p.next().line
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		e, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{pos{line}, "not", e}, nil
	}
	return p.parseCompare()
}

func (p *parser) parseCompare() (expr, error) {
	line := p.cur().line
	first, err := p.parseMath1()
	if err != nil {
		return nil, err
	}
	var c *compareExpr
	for {
		t := p.cur()
		var op string
		switch {
		case t.typ == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == "<=" || t.val == ">" || t.val == ">="):
			op = t.val
			p.next()
		case t.typ == tName && t.val == "in":
			op = "in"
			p.next()
		case t.typ == tName && t.val == "not" && p.look().typ == tName && p.look().val == "in":
			op = "notin"
			p.next()
			p.next()
		default:
			if c == nil {
				return first, nil
			}
			return c, nil
		}
		if c == nil {
			c = &compareExpr{pos: pos{line}, first: first}
		}
		r, err := p.parseMath1()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
	}
}

func (p *parser) parseMath1() (expr, error) {
	return p.leftAssoc(p.parseConcat, p.matchOp("+", "-"), binary)
}

func (p *parser) parseConcat() (expr, error) {
	line := p.cur().line
	first, err := p.parseMath2()
	if err != nil {
		return nil, err
	}
	if !p.isOp("~") {
		return first, nil
	}
	items := []expr{first}
	for p.skipOp("~") {
		e, err := p.parseMath2()
		if err != nil {
			return nil, err
		}
		items = append(items, e)
	}
	return &concatExpr{pos{line}, items}, nil
}

func (p *parser) parseMath2() (expr, error) {
	return p.leftAssoc(p.parsePow, p.matchOp("*", "/", "//", "%"), binary)
}

func (p *parser) parsePow() (expr, error) {
	return p.leftAssoc(func() (expr, error) { return p.parseUnary(true) }, p.matchOp("**"), binary)
}

func (p *parser) parseUnary(withFilter bool) (expr, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	t := p.cur()
	var e expr
	var err error
	if t.typ == tOp && (t.val == "-" || t.val == "+") {
		p.next()
		inner, err := p.parseUnary(false)
		if err != nil {
			return nil, err
		}
		e = &unaryExpr{pos{t.line}, t.val, inner}
	} else if e, err = p.parsePrimary(); err != nil {
		return nil, err
	}
	if e, err = p.parsePostfix(e); err != nil {
		return nil, err
	}
	if withFilter {
		return p.parseFilterExpr(e)
	}
	return e, nil
}

func (p *parser) parsePrimary() (expr, error) {
	t := p.cur()
	switch t.typ {
	case tName:
		p.next()
		switch t.val {
		case "true", "True":
			return &constExpr{pos{t.line}, Bool(true)}, nil
		case "false", "False":
			return &constExpr{pos{t.line}, Bool(false)}, nil
		case "none", "None":
			return &constExpr{pos{t.line}, None()}, nil
		}
		p.names = append(p.names, t.val)
		return &nameExpr{pos{t.line}, t.val}, nil
	case tString:
		p.next()
		if p.cur().typ != tString {
			return &constExpr{pos{t.line}, String(t.val)}, nil
		}
		var b strings.Builder
		b.WriteString(t.val)
		for p.cur().typ == tString {
			b.WriteString(p.next().val)
		}
		return &constExpr{pos{t.line}, String(b.String())}, nil
	case tInt, tFloat:
		p.next()
		return &constExpr{pos{t.line}, t.value()}, nil
	case tOp:
		switch t.val {
		case "(":
			p.next()
			e, err := p.parseTuple(false, true, nil, true)
			if err != nil {
				return nil, err
			}
			return e, p.expectOp(")")
		case "[":
			p.next()
			l := &listExpr{pos: pos{t.line}}
			err := p.commaSeparated("]", true, func() error {
				e, err := p.parseExpression(true)
				l.items = append(l.items, e)
				return err
			})
			if err != nil {
				return nil, err
			}
			return l, nil
		case "{":
			p.next()
			d := &dictExpr{pos: pos{t.line}}
			err := p.commaSeparated("}", true, func() error {
				k, err := p.parseExpression(true)
				if err != nil {
					return err
				}
				if err := p.expectOp(":"); err != nil {
					return err
				}
				v, err := p.parseExpression(true)
				if err != nil {
					return err
				}
				d.keys = append(d.keys, k)
				d.vals = append(d.vals, v)
				return nil
			})
			if err != nil {
				return nil, err
			}
			return d, nil
		}
	}
	return nil, p.fail(t.line, "unexpected %s", repr(String(t.describe())))
}

// commaSeparated parses item, item, ... up to the operator end and consumes end; trailing
// allows a comma before end (list, dict and call syntax), as Jinja2's parser does.
func (p *parser) commaSeparated(end string, trailing bool, item func() error) error {
	for n := 0; !p.isOp(end); n++ {
		if n > 0 {
			if err := p.expectOp(","); err != nil {
				return err
			}
			if trailing && p.isOp(end) {
				break
			}
		}
		if err := item(); err != nil {
			return err
		}
	}
	p.next()
	return nil
}

func (p *parser) parsePostfix(e expr) (expr, error) {
	n := 0
	defer func() { p.depth -= n }()
	for {
		if err := p.enter(); err != nil {
			return nil, err
		}
		n++
		t := p.cur()
		if t.typ != tOp {
			return e, nil
		}
		var err error
		switch t.val {
		case ".":
			p.next()
			a := p.next()
			switch a.typ {
			case tName:
				e = &getattrExpr{pos{t.line}, e, a.val}
			case tInt:
				e = &getitemExpr{pos{t.line}, e, &constExpr{pos{a.line}, a.value()}}
			default:
				return nil, p.fail(a.line, "expected name or number")
			}
		case "[":
			p.next()
			var args []expr
			err := p.commaSeparated("]", false, func() error {
				a, err := p.parseSubscribed()
				args = append(args, a)
				return err
			})
			if err != nil {
				return nil, err
			}
			var key expr
			switch len(args) {
			case 0:
				return nil, p.failOwn(t.line, "expected an expression in the subscript")
			case 1:
				key = args[0]
			default:
				key = &listExpr{pos{t.line}, args, true}
			}
			e = &getitemExpr{pos{t.line}, e, key}
		case "(":
			if e, err = p.parseCall(e); err != nil {
				return nil, err
			}
		default:
			return e, nil
		}
	}
}

func (p *parser) parseSubscribed() (expr, error) {
	line := p.cur().line
	var args [3]expr
	if p.skipOp(":") {
	} else {
		e, err := p.parseExpression(true)
		if err != nil {
			return nil, err
		}
		if !p.skipOp(":") {
			return e, nil
		}
		args[0] = e
	}
	endArg := func() bool { return p.isOp("]") || p.isOp(",") || p.isOp(":") }
	var err error
	if !endArg() {
		if args[1], err = p.parseExpression(true); err != nil {
			return nil, err
		}
	}
	if p.skipOp(":") && !(p.isOp("]") || p.isOp(",")) {
		if args[2], err = p.parseExpression(true); err != nil {
			return nil, err
		}
	}
	return &sliceExpr{pos{line}, args[0], args[1], args[2]}, nil
}

func (p *parser) parseCallArgs() ([]expr, []kwExpr, error) {
	line := p.cur().line
	if err := p.expectOp("("); err != nil {
		return nil, nil, err
	}
	var args []expr
	var kwargs []kwExpr
	err := p.commaSeparated(")", true, func() error {
		if p.isOp("*") || p.isOp("**") {
			return p.failOwn(p.cur().line, "*args and **kwargs in calls are not supported by this engine")
		}
		if t := p.cur(); t.typ == tName && p.look().typ == tOp && p.look().val == "=" {
			p.next()
			p.next()
			v, err := p.parseExpression(true)
			kwargs = append(kwargs, kwExpr{t.val, v})
			return err
		}
		if len(kwargs) > 0 {
			return p.fail(line, "invalid syntax for function call expression")
		}
		v, err := p.parseExpression(true)
		args = append(args, v)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return args, kwargs, nil
}

func (p *parser) parseCall(fn expr) (expr, error) {
	line := p.cur().line
	args, kwargs, err := p.parseCallArgs()
	if err != nil {
		return nil, err
	}
	return &callExpr{pos{line}, fn, args, kwargs}, nil
}

func (p *parser) parseFilterExpr(e expr) (expr, error) {
	n := 0
	defer func() { p.depth -= n }()
	for {
		if err := p.enter(); err != nil {
			return nil, err
		}
		n++
		switch {
		case p.isOp("|"):
			fs, err := p.parseFilterChain(e, false)
			if err != nil {
				return nil, err
			}
			e = fs[len(fs)-1]
		case p.isName("is"):
			var err error
			if e, err = p.parseTest(e); err != nil {
				return nil, err
			}
		case p.isOp("("):
			var err error
			if e, err = p.parseCall(e); err != nil {
				return nil, err
			}
		default:
			return e, nil
		}
	}
}

// parseFilterChain parses |f(args)|g ... applied to e (nil in filter blocks); inline starts
// without a leading pipe. It returns every filter, the last one outermost.
func (p *parser) parseFilterChain(e expr, inline bool) ([]*filterExpr, error) {
	var out []*filterExpr
	n := 0
	defer func() { p.depth -= n }()
	for inline || p.isOp("|") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		n++
		if !inline {
			p.next()
		}
		inline = false
		t, err := p.expectType(tName, "name")
		if err != nil {
			return nil, err
		}
		name := t.val
		for p.skipOp(".") {
			n, err := p.expectType(tName, "name")
			if err != nil {
				return nil, err
			}
			name += "." + n.val
		}
		f := &filterExpr{pos: pos{t.line}, obj: e, name: name}
		if p.isOp("(") {
			if f.args, f.kwargs, err = p.parseCallArgs(); err != nil {
				return nil, err
			}
		}
		if _, ok := filters[name]; !ok {
			p.unknown("filter", name, t.line)
		}
		out = append(out, f)
		e = f
	}
	return out, nil
}

func (p *parser) parseTest(e expr) (expr, error) {
	line := p.next().line
	neg := p.skipName("not")
	t, err := p.expectType(tName, "name")
	if err != nil {
		return nil, err
	}
	name := t.val
	for p.skipOp(".") {
		n, err := p.expectType(tName, "name")
		if err != nil {
			return nil, err
		}
		name += "." + n.val
	}
	te := &testExpr{pos: pos{line}, obj: e, name: name}
	c := p.cur()
	switch {
	case c.typ == tOp && c.val == "(":
		if te.args, te.kwargs, err = p.parseCallArgs(); err != nil {
			return nil, err
		}
	case (c.typ == tName || c.typ == tString || c.typ == tInt || c.typ == tFloat || (c.typ == tOp && (c.val == "[" || c.val == "{"))) &&
		!(c.typ == tName && (c.val == "else" || c.val == "or" || c.val == "and")):
		if c.typ == tName && c.val == "is" {
			return nil, p.fail(c.line, "You cannot chain multiple tests with is")
		}
		a, err := p.parsePrimary()
		if err != nil {
			return nil, err
		}
		if a, err = p.parsePostfix(a); err != nil {
			return nil, err
		}
		te.args = []expr{a}
	}
	if _, ok := tests[name]; !ok {
		p.unknown("test", name, line)
	}
	if neg {
		return &unaryExpr{pos{line}, "not", te}, nil
	}
	return te, nil
}

// unknownRef is a filter or test name that does not exist. Jinja2 fails at compile time unless
// the use is inside an if statement or a conditional expression, where it fails when evaluated.
type unknownRef struct {
	kind, name string
	line       int
	soft       bool
}

func (p *parser) unknown(kind, name string, line int) {
	p.unknowns = append(p.unknowns, unknownRef{kind, name, line, p.soft > 0})
}

// checkUnknown fails for the first unknown filter or test outside a conditional.
func (p *parser) checkUnknown() error {
	for _, u := range p.unknowns {
		if !u.soft {
			return p.fail(u.line, "No %s named %s.", u.kind, repr(String(u.name)))
		}
	}
	return nil
}
