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
// values feed which, how an AutoSharding program's arguments and results are sharded — without an
// MLIR toolchain. It is what tests and tools inspect; it does not interpret types, nor attributes
// beyond replica groups and Shardy's meshes and shardings.
type HLOModule struct {
	Name          string
	NumReplicas   int // module attribute stablehlo.num_replicas (0 when absent)
	NumPartitions int // module attribute stablehlo.num_partitions (0 when absent)
	// Meshes are the Shardy device meshes the module declares (sdy.mesh), in order.
	Meshes []HLOMesh
	// Args are the main function's parameters as the text names them, Ops its body in order, the
	// final return included; Results the values the return hands back. go-xla names a parameter
	// after GoMLX's parameter name with every character other than [A-Za-z0-9_] replaced by "_":
	// "%arg0" for input 0 of a trace, "%var__layer_w" for the variable "/layer/w" (GoMLX parameter
	// "var:/layer/w"); ArgIndex finds one by its GoMLX name.
	Args    []string
	Ops     []HLOOp
	Results []string
	// ArgTypes and ResultTypes are the main function's signature as written ("tensor<8x4xf32>"),
	// one per Args and per Results. ArgShardings and ResultShardings hold each one's sdy.sharding
	// annotation, nil where there is none (every entry is nil outside AutoSharding programs).
	ArgTypes, ResultTypes         []string
	ArgShardings, ResultShardings []*HLOSharding

	producer map[string]int // value name → index in Ops
}

// HLOMesh is a Shardy device mesh: `sdy.mesh @name = <["data"=2, "fsdp"=4]>`.
type HLOMesh struct {
	Name string
	Axes []HLOMeshAxis
	// DeviceIDs is the mesh's explicit device order (device_ids=[...]); nil for the default,
	// 0..NumDevices()-1.
	DeviceIDs []int
}

// HLOMeshAxis is one named axis of a mesh.
type HLOMeshAxis struct {
	Name string
	Size int
}

// NumDevices is the product of the axis sizes.
func (m HLOMesh) NumDevices() int {
	n := 1
	for _, a := range m.Axes {
		n *= a.Size
	}
	return n
}

// HLOSharding is a Shardy tensor sharding: `#sdy.sharding<@mesh, [{"fsdp"}, {}]>`.
type HLOSharding struct {
	Mesh string // the mesh's name, without the @
	// Dims has one entry per tensor dimension: the mesh axes the dimension is split over, major
	// first, as written without quotes ("fsdp"; a sub-axis as "fsdp:(1)2"; "?" marks an open
	// dimension). An empty entry is a replicated dimension. A fully replicated rank-2 tensor is
	// [[] []]; a scalar's Dims is empty.
	Dims [][]string
	// Replicated lists the axes written as explicitly replicated (replicated={"a"}), if any.
	Replicated []string
}

// IsReplicated reports whether no dimension is split over a mesh axis.
func (s *HLOSharding) IsReplicated() bool {
	for _, d := range s.Dims {
		if len(d) > 0 {
			return false
		}
	}
	return true
}

// Axes returns the mesh axes that split dimension dim, nil for a replicated or missing dimension.
func (s *HLOSharding) Axes(dim int) []string {
	if dim < 0 || dim >= len(s.Dims) {
		return nil
	}
	return s.Dims[dim]
}

// Mesh returns the declared mesh of that name, or nil.
func (m *HLOModule) Mesh(name string) *HLOMesh {
	for i := range m.Meshes {
		if m.Meshes[i].Name == name {
			return &m.Meshes[i]
		}
	}
	return nil
}

// ArgIndex returns the index in Args of the parameter GoMLX named parameterName (for a context
// variable, Variable.ParameterName(), e.g. "var:/optimizer/adamw_m/layer/w"), or -1. The text keeps
// only a sanitised name ([A-Za-z0-9_], other characters as "_"); go-xla refuses two parameters
// with the same sanitised name, so within one module it is unambiguous.
func (m *HLOModule) ArgIndex(parameterName string) int {
	return slices.Index(m.Args, "%"+hloValueName(parameterName))
}

// hloValueName is go-xla's stablehlo.ConvertToValidName (kept here so parsing needs no builder).
func hloValueName(name string) string {
	out := make([]byte, 0, len(name))
	for _, r := range name {
		if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '_' {
			out = append(out, byte(r))
		} else {
			out = append(out, '_')
		}
	}
	return string(out)
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
		for _, kv := range splitTopLevel(attrs) {
			k, v, _ := strings.Cut(kv, "=")
			var dst *int
			switch strings.TrimSpace(k) {
			case "stablehlo.num_replicas", "mhlo.num_replicas":
				dst = &m.NumReplicas
			case "stablehlo.num_partitions", "mhlo.num_partitions":
				dst = &m.NumPartitions
			default:
				continue
			}
			// `8`, or with a type: `8 : i32`.
			f := strings.Fields(v)
			n, err := strconv.Atoi(strings.Join(f[:min(len(f), 1)], ""))
			if err != nil || n < 0 {
				return nil, p.errorf("module attribute %q is not a count", strings.TrimSpace(kv))
			}
			*dst = n
		}
	}
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	// Meshes and functions: only main is kept (go-xla writes closures inline, as regions).
	for !p.peek("}") {
		if p.pos >= len(p.s) {
			return nil, p.errorf("module not closed")
		}
		if p.peek("sdy.mesh") {
			mesh, err := p.mesh()
			if err != nil {
				return nil, err
			}
			if m.Mesh(mesh.Name) != nil {
				return nil, p.errorf("mesh @%s declared twice", mesh.Name)
			}
			m.Meshes = append(m.Meshes, mesh)
			continue
		}
		if err := p.expect("func.func"); err != nil {
			return nil, err
		}
		name := p.ident()
		headerLine := p.line()
		args, err := p.balanced('(', ')')
		if err != nil {
			return nil, err
		}
		var results string
		if p.peek("->") {
			p.pos += len("->")
			if p.peek("(") {
				if results, err = p.balanced('(', ')'); err != nil {
					return nil, err
				}
			} else {
				// One result without attributes: its type runs up to the body's opening brace.
				rest := strings.IndexByte(p.s[p.pos:], '{')
				if rest < 0 {
					return nil, p.errorf("function %s has no body", name)
				}
				results = p.s[p.pos : p.pos+rest]
				p.pos += rest
			}
		}
		if !p.peek("{") {
			return nil, p.errorf("function %s has no body", name)
		}
		bodyStart := p.pos + 1
		if _, err := p.balanced('{', '}'); err != nil {
			return nil, err
		}
		if name != "@main" {
			continue
		}
		if m.Ops != nil {
			return nil, p.errorf("module %s has two main functions", m.Name)
		}
		if err := m.signature(args, results, headerLine); err != nil {
			return nil, err
		}
		body := &hloParser{s: p.s, pos: bodyStart}
		if m.Ops, err = body.ops(p.pos - 1); err != nil {
			return nil, err
		}
		if m.Ops == nil {
			return nil, fmt.Errorf("StableHLO text, line %d: main has an empty body", headerLine)
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
	if len(m.Results) != len(m.ResultTypes) {
		return nil, fmt.Errorf("StableHLO text, line %d: main returns %d values but its signature has %d results",
			m.Ops[len(m.Ops)-1].Line, len(m.Results), len(m.ResultTypes))
	}
	for i, sh := range append(slices.Clone(m.ArgShardings), m.ResultShardings...) {
		if sh == nil {
			continue
		}
		if err := m.checkSharding(sh); err != nil {
			if i < len(m.Args) {
				return nil, fmt.Errorf("StableHLO text: main's argument %s: %w", m.Args[i], err)
			}
			return nil, fmt.Errorf("StableHLO text: main's result #%d: %w", i-len(m.Args), err)
		}
	}
	return m, nil
}

// checkSharding checks that a sharding names a declared mesh and only its axes.
func (m *HLOModule) checkSharding(sh *HLOSharding) error {
	mesh := m.Mesh(sh.Mesh)
	if mesh == nil {
		return fmt.Errorf("sharding over mesh @%s, which the module does not declare", sh.Mesh)
	}
	known := func(axis string) bool {
		base, _, _ := strings.Cut(axis, ":")
		return slices.ContainsFunc(mesh.Axes, func(a HLOMeshAxis) bool { return a.Name == base })
	}
	for d, axes := range sh.Dims {
		for _, a := range axes {
			if a != "?" && !known(a) {
				return fmt.Errorf("dimension %d is sharded over %q, not an axis of mesh @%s", d, a, sh.Mesh)
			}
		}
	}
	for _, a := range sh.Replicated {
		if !known(a) {
			return fmt.Errorf("replicated axis %q is not an axis of mesh @%s", a, sh.Mesh)
		}
	}
	return nil
}

// signature reads main's parameters (`%name: type [{attrs}]`, comma separated) and result types
// (`type [{attrs}]`, comma separated) with their sdy.sharding annotations.
func (m *HLOModule) signature(args, results string, line int) error {
	for _, a := range splitTopLevel(args) {
		name, rest, ok := strings.Cut(a, ":")
		name = strings.TrimSpace(name)
		if !ok || !strings.HasPrefix(name, "%") || len(name) < 2 {
			return fmt.Errorf("StableHLO text, line %d: main's parameter %q is not `%%name: type`", line, a)
		}
		typ, sh, err := typeAndSharding(rest)
		if err != nil {
			return fmt.Errorf("StableHLO text, line %d: main's parameter %s: %w", line, name, err)
		}
		m.Args = append(m.Args, name)
		m.ArgTypes = append(m.ArgTypes, typ)
		m.ArgShardings = append(m.ArgShardings, sh)
	}
	for i, r := range splitTopLevel(results) {
		typ, sh, err := typeAndSharding(r)
		if err != nil {
			return fmt.Errorf("StableHLO text, line %d: main's result #%d: %w", line, i, err)
		}
		m.ResultTypes = append(m.ResultTypes, typ)
		m.ResultShardings = append(m.ResultShardings, sh)
	}
	return nil
}

// typeAndSharding splits `type [{attrs}]` and parses the sdy.sharding attribute, if any.
func typeAndSharding(s string) (string, *HLOSharding, error) {
	s = strings.TrimSpace(s)
	typ, attrs := s, ""
	if i := indexTopLevel(s, '{'); i >= 0 {
		typ = strings.TrimSpace(s[:i])
		if !strings.HasSuffix(s, "}") {
			return "", nil, fmt.Errorf("attributes %q are not closed", s[i:])
		}
		attrs = s[i+1 : len(s)-1]
	}
	if typ == "" {
		return "", nil, fmt.Errorf("no type in %q", s)
	}
	var sh *HLOSharding
	for _, kv := range splitTopLevel(attrs) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return "", nil, fmt.Errorf("attribute %q is not `name = value`", kv)
		}
		if strings.TrimSpace(k) != "sdy.sharding" {
			continue
		}
		var err error
		if sh, err = parseSharding(strings.TrimSpace(v)); err != nil {
			return "", nil, err
		}
	}
	return typ, sh, nil
}

// parseSharding reads `#sdy.sharding<@mesh, [{"a", "b"}, {}, {?}], replicated={"c"}>`. Dimension
// priorities (`{"a"}p1`) are accepted and dropped; an inline mesh (`mesh<[...]>`) is refused.
func parseSharding(s string) (*HLOSharding, error) {
	body, ok := strings.CutPrefix(s, "#sdy.sharding<")
	if !ok || !strings.HasSuffix(body, ">") {
		return nil, fmt.Errorf("sdy.sharding %q is not #sdy.sharding<...>", s)
	}
	parts := splitTopLevel(body[:len(body)-1])
	if len(parts) < 2 {
		return nil, fmt.Errorf("sdy.sharding %q has no mesh or no dimension list", s)
	}
	mesh, ok := strings.CutPrefix(parts[0], "@")
	if !ok || mesh == "" || !isIdent(mesh) {
		return nil, fmt.Errorf("sdy.sharding %q: mesh %q is not a reference @name (inline meshes are not supported)", s, parts[0])
	}
	sh := &HLOSharding{Mesh: mesh, Dims: [][]string{}}
	dims := parts[1]
	if !strings.HasPrefix(dims, "[") || !strings.HasSuffix(dims, "]") {
		return nil, fmt.Errorf("sdy.sharding %q: dimension list %q is not [...]", s, dims)
	}
	for _, d := range splitTopLevel(dims[1 : len(dims)-1]) {
		// {axes} then an optional priority p<N>.
		end := strings.LastIndexByte(d, '}')
		if !strings.HasPrefix(d, "{") || end < 0 {
			return nil, fmt.Errorf("sdy.sharding %q: dimension %q is not {...}", s, d)
		}
		if prio := d[end+1:]; prio != "" && !isPriority(prio) {
			return nil, fmt.Errorf("sdy.sharding %q: dimension %q: %q is not a priority p<N>", s, d, prio)
		}
		axes, err := axisList(d[1:end])
		if err != nil {
			return nil, fmt.Errorf("sdy.sharding %q: dimension %q: %w", s, d, err)
		}
		sh.Dims = append(sh.Dims, axes)
	}
	for _, extra := range parts[2:] {
		k, v, ok := strings.Cut(extra, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !strings.HasPrefix(v, "{") || !strings.HasSuffix(v, "}") {
			return nil, fmt.Errorf("sdy.sharding %q: %q is not `name={axes}`", s, extra)
		}
		axes, err := axisList(v[1 : len(v)-1])
		if err != nil {
			return nil, fmt.Errorf("sdy.sharding %q: %s: %w", s, k, err)
		}
		if k == "replicated" {
			sh.Replicated = axes
		} // unreduced={...} and the like: not interpreted
	}
	return sh, nil
}

// axisList reads `"a", "b":(1)2, ?` into ["a", "b:(1)2", "?"].
func axisList(s string) ([]string, error) {
	out := []string{}
	for _, a := range splitTopLevel(s) {
		if a == "?" {
			out = append(out, a)
			continue
		}
		rest, ok := strings.CutPrefix(a, `"`)
		q := strings.IndexByte(rest, '"')
		if !ok || q <= 0 {
			return nil, fmt.Errorf("axis %q is not a quoted name", a)
		}
		name, sub := rest[:q], rest[q+1:]
		if !isIdent(name) {
			return nil, fmt.Errorf("axis name %q is not an identifier", name)
		}
		if sub != "" && !subAxisRE.MatchString(sub) {
			return nil, fmt.Errorf("axis %q: %q is not a sub-axis :(pre)size", a, sub)
		}
		out = append(out, name+sub)
	}
	return out, nil
}

var subAxisRE = regexp.MustCompile(`^:\(\d+\)\d+$`)

func isPriority(s string) bool {
	if len(s) < 2 || s[0] != 'p' {
		return false
	}
	for _, c := range s[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// isIdent reports whether s is a non-empty [A-Za-z0-9_.$-] word (MLIR's bare identifier).
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '$' || c == '-') {
			return false
		}
	}
	return true
}

// mesh reads `sdy.mesh @name = <["a"=2, "b"=4]>` or `<[...], device_ids=[...]>`.
func (p *hloParser) mesh() (HLOMesh, error) {
	if err := p.expect("sdy.mesh"); err != nil {
		return HLOMesh{}, err
	}
	name := p.ident()
	mesh := HLOMesh{Name: strings.TrimPrefix(name, "@")}
	if !strings.HasPrefix(name, "@") || !isIdent(mesh.Name) {
		return mesh, p.errorf("mesh name %q is not @name", name)
	}
	if err := p.expect("="); err != nil {
		return mesh, err
	}
	line := p.line()
	body, err := p.balanced('<', '>')
	if err != nil {
		return mesh, err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("StableHLO text, line %d: mesh @%s: %s", line, mesh.Name, fmt.Sprintf(format, args...))
	}
	parts := splitTopLevel(body)
	if len(parts) == 0 || !strings.HasPrefix(parts[0], "[") || !strings.HasSuffix(parts[0], "]") {
		return mesh, bad("axes %q are not [...]", body)
	}
	for _, a := range splitTopLevel(parts[0][1 : len(parts[0])-1]) {
		k, v, ok := strings.Cut(a, "=")
		axis, okq := strings.CutPrefix(strings.TrimSpace(k), `"`)
		axis, okq2 := strings.CutSuffix(axis, `"`)
		size, err := strconv.Atoi(strings.TrimSpace(v))
		if !ok || !okq || !okq2 || !isIdent(axis) || err != nil || size < 1 {
			return mesh, bad("axis %q is not \"name\"=size", a)
		}
		if slices.ContainsFunc(mesh.Axes, func(x HLOMeshAxis) bool { return x.Name == axis }) {
			return mesh, bad("axis %q appears twice", axis)
		}
		mesh.Axes = append(mesh.Axes, HLOMeshAxis{Name: axis, Size: size})
	}
	for _, extra := range parts[1:] {
		k, v, _ := strings.Cut(extra, "=")
		v = strings.TrimSpace(v)
		if strings.TrimSpace(k) != "device_ids" || !strings.HasPrefix(v, "[") || !strings.HasSuffix(v, "]") {
			return mesh, bad("%q is not device_ids=[...]", extra)
		}
		for _, f := range splitTopLevel(v[1 : len(v)-1]) {
			id, err := strconv.Atoi(f)
			if err != nil || id < 0 {
				return mesh, bad("device id %q", f)
			}
			mesh.DeviceIDs = append(mesh.DeviceIDs, id)
		}
		if len(mesh.DeviceIDs) != mesh.NumDevices() {
			return mesh, bad("%d device ids for %d devices", len(mesh.DeviceIDs), mesh.NumDevices())
		}
	}
	return mesh, nil
}

// splitTopLevel splits s at the commas outside brackets ((), [], {}, <>) and quoted strings, and
// trims the pieces; an empty or blank s gives none. Unbalanced closers are treated as text.
func splitTopLevel(s string) []string {
	var out []string
	depth, inStr, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '(' || c == '[' || c == '{' || c == '<':
			depth++
		case c == ')' || c == ']' || c == '}' || c == '>':
			// "->" is an arrow, not a closer.
			if c == '>' && i > 0 && s[i-1] == '-' {
				continue
			}
			if depth > 0 {
				depth--
			}
		case c == ',' && depth == 0:
			out = append(out, strings.TrimSpace(s[start:i]))
			start = i + 1
		}
	}
	if last := strings.TrimSpace(s[start:]); last != "" || len(out) > 0 {
		out = append(out, last)
	}
	return out
}

// indexTopLevel returns the index of the first c outside brackets and quoted strings, or -1.
func indexTopLevel(s string, c byte) int {
	depth, inStr := 0, false
	for i := 0; i < len(s); i++ {
		switch x := s[i]; {
		case inStr:
			if x == '\\' {
				i++
			} else if x == '"' {
				inStr = false
			}
		case x == c && depth == 0:
			return i
		case x == '"':
			inStr = true
		case x == '(' || x == '[' || x == '{' || x == '<':
			depth++
		case x == ')' || x == ']' || x == '}' || x == '>':
			if depth > 0 {
				depth--
			}
		}
	}
	return -1
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
