package xla

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// HLOModule is the structure of a StableHLO module in the generic op syntax that go-xla writes
// (and StableHLO returns): enough of it to check what a program does — which operations, which
// values feed which — without an MLIR toolchain. It is what tests and tools inspect; it does not
// interpret types or attributes beyond replica groups.
type HLOModule struct {
	Name          string
	NumReplicas   int // module attribute stablehlo.num_replicas (0 when absent)
	NumPartitions int // module attribute stablehlo.num_partitions (0 when absent)
	// Args are the main function's parameters ("%arg0", ...), Ops its body in order, the final
	// return included; Results the values the return hands back.
	Args    []string
	Ops     []HLOOp
	Results []string

	producer map[string]int // value name → index in Ops
}

// HLOOp is one operation of the main function.
type HLOOp struct {
	Name     string   // e.g. "stablehlo.all_reduce"
	Results  []string // value names, e.g. "%8"
	Operands []string
	// Attrs is the attribute dictionary as written (without the braces); Signature the type
	// signature after the colon.
	Attrs, Signature string
	// Regions holds the operations of nested regions (reduction bodies and the like).
	Regions [][]HLOOp
	Line    int // 1-based line of the op in the text
}

// ParseStableHLO parses a module's text. Errors name the line.
func ParseStableHLO(text string) (*HLOModule, error) {
	p := &hloParser{s: text}
	return p.module()
}

// Count returns how many operations of the main function have the given name.
func (m *HLOModule) Count(name string) int {
	n := 0
	for _, op := range m.Ops {
		if op.Name == name {
			n++
		}
	}
	return n
}

// Find returns the indices in Ops of the operations with the given name.
func (m *HLOModule) Find(name string) []int {
	var out []int
	for i, op := range m.Ops {
		if op.Name == name {
			out = append(out, i)
		}
	}
	return out
}

// Producer returns the index in Ops of the operation defining value, or -1 for a function
// argument or an unknown name.
func (m *HLOModule) Producer(value string) int {
	if i, ok := m.producer[value]; ok {
		return i
	}
	return -1
}

// DependsOn reports whether value is computed, directly or through other operations, from a
// result of the operation at index op.
func (m *HLOModule) DependsOn(value string, op int) bool {
	ops, _ := m.Ancestors(value)
	return slices.Contains(ops, op)
}

// Ancestors returns the operations (indices in Ops, ascending) and the main function's arguments
// (in Args order) that value is computed from, directly or not; value's own producer included.
func (m *HLOModule) Ancestors(value string) (ops []int, args []string) {
	seenOp, seenArg := map[int]bool{}, map[string]bool{}
	stack := []string{value}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		i := m.Producer(v)
		if i < 0 {
			seenArg[v] = true
			continue
		}
		if seenOp[i] {
			continue
		}
		seenOp[i] = true
		stack = append(stack, m.Ops[i].Operands...)
	}
	for i := range m.Ops {
		if seenOp[i] {
			ops = append(ops, i)
		}
	}
	for _, a := range m.Args {
		if seenArg[a] {
			args = append(args, a)
		}
	}
	return ops, args
}

// Users returns the indices of the operations that take value as an operand.
func (m *HLOModule) Users(value string) []int {
	var out []int
	for i, op := range m.Ops {
		for _, in := range op.Operands {
			if in == value {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

var replicaGroupsRE = regexp.MustCompile(`replica_groups\s*=\s*dense<(\[[\d\s,\[\]]*\])>`)

// ReplicaGroups parses the replica_groups attribute of a collective, e.g. [[0, 1, 2, 3]].
func (op HLOOp) ReplicaGroups() ([][]int, error) {
	m := replicaGroupsRE.FindStringSubmatch(op.Attrs)
	if m == nil {
		return nil, fmt.Errorf("line %d: %s has no replica_groups attribute", op.Line, op.Name)
	}
	body := strings.TrimSpace(m[1])
	if !strings.HasPrefix(body, "[[") || !strings.HasSuffix(body, "]]") {
		return nil, fmt.Errorf("line %d: replica_groups %s is not a list of lists", op.Line, body)
	}
	var groups [][]int
	for _, g := range strings.Split(body[2:len(body)-2], "], [") {
		var ids []int
		for _, f := range strings.Split(g, ",") {
			id, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return nil, fmt.Errorf("line %d: replica_groups %s: %w", op.Line, body, err)
			}
			ids = append(ids, id)
		}
		groups = append(groups, ids)
	}
	return groups, nil
}

// hloParser is a small recursive-descent reader of go-xla's output.
type hloParser struct {
	s   string
	pos int
}

func (p *hloParser) line() int { return 1 + strings.Count(p.s[:p.pos], "\n") }

func (p *hloParser) errorf(format string, args ...any) error {
	return fmt.Errorf("StableHLO text, line %d: %s", p.line(), fmt.Sprintf(format, args...))
}

func (p *hloParser) skipSpace() {
	for p.pos < len(p.s) && strings.ContainsRune(" \t\r\n", rune(p.s[p.pos])) {
		p.pos++
	}
}

func (p *hloParser) peek(lit string) bool {
	p.skipSpace()
	return strings.HasPrefix(p.s[p.pos:], lit)
}

func (p *hloParser) expect(lit string) error {
	if !p.peek(lit) {
		return p.errorf("want %q, found %q", lit, p.snippet())
	}
	p.pos += len(lit)
	return nil
}

func (p *hloParser) snippet() string {
	end := min(p.pos+40, len(p.s))
	return p.s[p.pos:end]
}

// balanced returns the text between the opening bracket at p.pos and its matching close, and
// moves past the close. It ignores brackets inside quoted strings.
func (p *hloParser) balanced(open, close byte) (string, error) {
	p.skipSpace()
	if p.pos >= len(p.s) || p.s[p.pos] != open {
		return "", p.errorf("want %q, found %q", open, p.snippet())
	}
	start, depth, inStr := p.pos+1, 0, false
	for ; p.pos < len(p.s); p.pos++ {
		c := p.s[p.pos]
		switch {
		case inStr:
			if c == '\\' {
				p.pos++
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == open:
			depth++
		case c == close:
			depth--
			if depth == 0 {
				p.pos++
				return p.s[start : p.pos-1], nil
			}
		}
	}
	p.pos = start - 1 // report the line of the opening bracket
	return "", p.errorf("unbalanced %q", open)
}

// ident reads a value or symbol name: %name, @name, or a bare word.
func (p *hloParser) ident() string {
	p.skipSpace()
	start := p.pos
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		if c == '%' || c == '@' || c == '_' || c == '.' || c == '^' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			p.pos++
			continue
		}
		break
	}
	return p.s[start:p.pos]
}

func (p *hloParser) module() (*HLOModule, error) {
	if err := p.expect("module"); err != nil {
		return nil, err
	}
	m := &HLOModule{Name: strings.TrimPrefix(p.ident(), "@"), producer: map[string]int{}}
	if p.peek("attributes") {
		p.pos += len("attributes")
		attrs, err := p.balanced('{', '}')
		if err != nil {
			return nil, err
		}
		for _, kv := range strings.Split(attrs, ",") {
			k, v, _ := strings.Cut(kv, "=")
			n, _ := strconv.Atoi(strings.Fields(strings.TrimSpace(v) + " ")[0])
			switch strings.TrimSpace(k) {
			case "stablehlo.num_replicas", "mhlo.num_replicas":
				m.NumReplicas = n
			case "stablehlo.num_partitions", "mhlo.num_partitions":
				m.NumPartitions = n
			}
		}
	}
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	// Functions: only main is kept (go-xla writes closures inline, as regions).
	for !p.peek("}") {
		if p.pos >= len(p.s) {
			return nil, p.errorf("module not closed")
		}
		if err := p.expect("func.func"); err != nil {
			return nil, err
		}
		name := p.ident()
		args, err := p.balanced('(', ')')
		if err != nil {
			return nil, err
		}
		// The result types run up to the body's opening brace.
		rest := strings.IndexByte(p.s[p.pos:], '{')
		if rest < 0 {
			return nil, p.errorf("function %s has no body", name)
		}
		p.pos += rest
		bodyStart := p.pos + 1
		if _, err := p.balanced('{', '}'); err != nil {
			return nil, err
		}
		if name != "@main" {
			continue
		}
		for _, a := range strings.Split(args, ",") {
			if n, _, ok := strings.Cut(strings.TrimSpace(a), ":"); ok && strings.HasPrefix(n, "%") {
				m.Args = append(m.Args, strings.TrimSpace(n))
			}
		}
		body := &hloParser{s: p.s, pos: bodyStart}
		if m.Ops, err = body.ops(p.pos - 1); err != nil {
			return nil, err
		}
	}
	if m.Ops == nil {
		return nil, p.errorf("module %s has no main function", m.Name)
	}
	for i, op := range m.Ops {
		for _, r := range op.Results {
			m.producer[r] = i
		}
	}
	if last := m.Ops[len(m.Ops)-1]; last.Name == "stablehlo.return" || last.Name == "func.return" {
		m.Results = last.Operands
	} else {
		return nil, fmt.Errorf("StableHLO text, line %d: main does not end with a return", last.Line)
	}
	return m, nil
}

// ops reads operations until end (an offset in p.s).
func (p *hloParser) ops(end int) ([]HLOOp, error) {
	var out []HLOOp
	for {
		p.skipSpace()
		if p.pos >= end {
			return out, nil
		}
		op, err := p.op()
		if err != nil {
			return nil, err
		}
		out = append(out, op)
	}
}

// op reads `[%r, ... =] "name"(%a, ...) [({regions})] [{attrs}] : signature`.
func (p *hloParser) op() (HLOOp, error) {
	op := HLOOp{Line: p.line()}
	if p.peek("%") {
		for {
			r := p.ident()
			if r == "" || r[0] != '%' {
				return op, p.errorf("bad result name %q", r)
			}
			op.Results = append(op.Results, r)
			if p.peek(",") {
				p.pos++
				continue
			}
			break
		}
		if err := p.expect("="); err != nil {
			return op, err
		}
	}
	if err := p.expect(`"`); err != nil {
		return op, err
	}
	q := strings.IndexByte(p.s[p.pos:], '"')
	if q < 0 {
		return op, p.errorf("unterminated op name")
	}
	op.Name = p.s[p.pos : p.pos+q]
	p.pos += q + 1
	operands, err := p.balanced('(', ')')
	if err != nil {
		return op, err
	}
	for _, o := range strings.Split(operands, ",") {
		if o = strings.TrimSpace(o); o != "" {
			op.Operands = append(op.Operands, o)
		}
	}
	if p.peek("({") {
		p.pos++ // into the parenthesis; each region is {...} separated by commas
		for {
			body, err := p.balanced('{', '}')
			if err != nil {
				return op, err
			}
			region, err := parseRegion(body, op.Line)
			if err != nil {
				return op, err
			}
			op.Regions = append(op.Regions, region)
			if p.peek(",") {
				p.pos++
				continue
			}
			break
		}
		if err := p.expect(")"); err != nil {
			return op, err
		}
	}
	if p.peek("{") {
		if op.Attrs, err = p.balanced('{', '}'); err != nil {
			return op, err
		}
		op.Attrs = strings.TrimSpace(op.Attrs)
	}
	if err := p.expect(":"); err != nil {
		return op, err
	}
	nl := strings.IndexByte(p.s[p.pos:], '\n')
	if nl < 0 {
		nl = len(p.s) - p.pos
	}
	op.Signature = strings.TrimSpace(p.s[p.pos : p.pos+nl])
	p.pos += nl
	return op, nil
}

// parseRegion reads a region body: an optional block label `^name(args) :` then operations.
func parseRegion(body string, line int) ([]HLOOp, error) {
	r := &hloParser{s: body}
	if r.peek("^") {
		r.ident()
		if _, err := r.balanced('(', ')'); err != nil {
			return nil, fmt.Errorf("region at line %d: %w", line, err)
		}
		if err := r.expect(":"); err != nil {
			return nil, fmt.Errorf("region at line %d: %w", line, err)
		}
	}
	ops, err := r.ops(len(body))
	if err != nil {
		return nil, fmt.Errorf("region at line %d: %w", line, err)
	}
	return ops, nil
}
