package jinja

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"unicode/utf8"
)

// Result is a rendered template.
type Result struct {
	Text string
	// Generation holds the byte offsets [start, end) in Text of each
	// {% generation %}...{% endgeneration %} block, in the order the blocks end, as
	// transformers' AssistantTracker records them (see the package documentation).
	Generation [][2]int
}

// Render renders the template with the variables vars (they shadow the engine's globals:
// range, dict, namespace, cycler, joiner) under the limits lim (zero fields take the
// defaults). Errors: *LimitError when a limit is reached, ctx's error when it is cancelled,
// *Error for a failure of the template (undefined values used, type errors, ...), and an error
// returned by a Func passed in vars unchanged. Render is safe for concurrent use.
func (t *Template) Render(ctx context.Context, vars map[string]Value, lim Limits) (res Result, err error) {
	if ctx == nil {
		ctx = context.Background()
	}
	r := &renderer{vars: vars, name: t.name}
	r.bud = budget{lim: lim.withDefaults(), ctx: ctx}
	r.root = &bounded{bud: &r.bud, root: true, max: r.bud.lim.MaxOutputBytes}
	r.out = r.root
	r.scope = &scope{}
	defer func() {
		if p := recover(); p != nil {
			res, err = Result{}, fmt.Errorf("jinja: internal error while rendering (a bug): %v\n%s", p, debug.Stack())
		}
	}()
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if err := r.execBody(t.body); err != nil {
		return Result{}, err
	}
	if r.root.err != nil {
		return Result{}, r.root.err
	}
	text := r.root.String()
	return Result{Text: text, Generation: cpSpansToBytes(text, r.gen)}, nil
}

// cpSpansToBytes converts code point spans (what AssistantTracker records) to byte offsets in
// text, in one pass over text; offsets past the end are clamped to it.
func cpSpansToBytes(text string, spans [][2]int) [][2]int {
	if spans == nil {
		return nil
	}
	cps := make([]int, 0, 2*len(spans))
	for _, s := range spans {
		cps = append(cps, s[0], s[1])
	}
	slices.Sort(cps)
	cps = slices.Compact(cps)
	bytesAt := make([]int, len(cps)) // bytesAt[k] is the byte offset of code point cps[k]
	k, cp := 0, 0
	for b := range text {
		for k < len(cps) && cps[k] <= cp {
			bytesAt[k] = b
			k++
		}
		if k == len(cps) {
			break
		}
		cp++
	}
	for ; k < len(cps); k++ {
		bytesAt[k] = len(text)
	}
	at := func(cp int) int {
		i, _ := slices.BinarySearch(cps, cp)
		return bytesAt[i]
	}
	out := make([][2]int, len(spans))
	for i, s := range spans {
		out[i] = [2]int{at(s[0]), at(s[1])}
	}
	return out
}

// spanCharge is what one generation span costs against MaxBytes: the span, then the code
// points, byte offsets and spans cpSpansToBytes makes of it.
const spanCharge = 5 * 16

type renderer struct {
	bud        budget
	vars       map[string]Value
	name       string
	root, out  *bounded
	scope      *scope
	rootRunes  int
	rootYields bool     // something was output at the top level (AssistantTracker's is_active)
	gen        [][2]int // generation spans in code points
}

// scope is one frame of variables; frames hold few names, so they are searched linearly.
type scope struct {
	names    []string
	vals     []Value
	parent   *scope
	captured bool // a macro or caller closes over it: it may not be reused
}

func (s *scope) set(name string, v Value) {
	for i, n := range s.names {
		if n == name {
			s.vals[i] = v
			return
		}
	}
	s.names = append(s.names, name)
	s.vals = append(s.vals, v)
}

func (s *scope) get(name string) (Value, bool) {
	for i, n := range s.names {
		if n == name {
			return s.vals[i], true
		}
	}
	return Value{}, false
}

// reset empties the scope for reuse.
func (s *scope) reset() {
	clear(s.vals)
	s.names, s.vals = s.names[:0], s.vals[:0]
}

var errBreak = errors.New("break")
var errContinue = errors.New("continue")

func (r *renderer) lookup(name string) Value {
	for s := r.scope; s != nil; s = s.parent {
		if v, ok := s.get(name); ok {
			return v
		}
	}
	if v, ok := r.vars[name]; ok {
		return v
	}
	if v, ok := globals[name]; ok {
		return v
	}
	return Undefined(name)
}

// write outputs s where the render writes now.
func (r *renderer) write(s string) error {
	if r.out == r.root {
		r.rootYields = true
		r.rootRunes += utf8.RuneCountInString(s)
	}
	r.out.WriteString(s)
	return r.out.err
}

func (r *renderer) execBody(body []stmt) error {
	for _, s := range body {
		if err := r.bud.step(1); err != nil {
			return err
		}
		if err := s.exec(r); err != nil {
			return err
		}
	}
	return nil
}

// capture renders body into a new buffer and returns its text.
func (r *renderer) capture(body []stmt) (string, error) {
	saved := r.out
	buf := &bounded{bud: &r.bud}
	r.out = buf
	err := r.execBody(body)
	r.out = saved
	if err == nil {
		err = buf.err
	}
	if err != nil {
		return "", err
	}
	return buf.String(), nil
}

func (n *textNode) exec(r *renderer) error { return r.write(n.s) }

func (n *outputNode) exec(r *renderer) error {
	v, err := n.e.eval(r)
	if err != nil {
		return err
	}
	if v.k == KindString {
		return r.write(v.s)
	}
	if r.out == r.root {
		b := &bounded{bud: &r.bud}
		writeStr(b, v)
		if b.err != nil {
			return b.err
		}
		return r.write(b.String())
	}
	writeStr(r.out, v)
	return r.out.err
}

func (n *ifNode) exec(r *renderer) error {
	for i, c := range n.conds {
		v, err := c.eval(r)
		if err != nil {
			return err
		}
		if v.Truth() {
			return r.execBody(n.bodies[i])
		}
	}
	return r.execBody(n.els)
}

// iterate returns the items a for loop (or list()) sees.
func (r *renderer) iterate(v Value) ([]Value, error) {
	switch v.k {
	case KindList, KindTuple:
		l := v.p.(*listObj)
		if l.gen != "" {
			if l.consumed {
				return nil, nil
			}
			l.consumed = true
		}
		return l.items, nil
	case KindDict:
		return v.dict().keys, nil
	case KindUndefined:
		if u, _ := v.p.(*undefined); u != nil && u.exc == "SecurityError" {
			return nil, undefError(v)
		}
		return nil, nil
	case KindString:
		n := utf8.RuneCountInString(v.s)
		if err := r.bud.allocMul(int64(n), valueSize); err != nil {
			return nil, err
		}
		out := make([]Value, 0, n)
		for i := range v.s {
			out = append(out, String(v.s[i:i+runeSize(v.s, i)]))
		}
		return out, nil
	}
	return nil, typeErr("'%s' object is not iterable", typeName(v))
}

func (n *forNode) exec(r *renderer) error {
	it, err := n.iter.eval(r)
	if err != nil {
		return err
	}
	return r.runLoop(n, it, 0)
}

func (r *renderer) runLoop(n *forNode, it Value, depth int) error {
	items, err := r.iterate(it)
	if err != nil {
		return err
	}
	outer := r.scope
	defer func() { r.scope = outer }()
	if n.cond != nil {
		var kept []Value
		for _, x := range items {
			if err := r.bud.step(1); err != nil {
				return err
			}
			r.scope = &scope{parent: outer}
			if err := r.assign(n.tgt, x, n.line); err != nil {
				return err
			}
			c, err := n.cond.eval(r)
			if err != nil {
				return err
			}
			if c.Truth() {
				if err := r.bud.alloc(2 * valueSize); err != nil { // the item, and room to grow
					return err
				}
				kept = append(kept, x)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		r.scope = outer
		return r.execBody(n.els)
	}
	lo := &loopObj{items: items, node: n, depth: depth, scope: outer}
	lv := Value{k: KindCallable, p: lo}
	// Jinja2 runs the else block unless an iteration reached the end of the body.
	completed := false
	var frame *scope
	for i, x := range items {
		if err := r.bud.step(1); err != nil {
			return err
		}
		lo.i = i
		// each iteration has its own scope: what the body sets does not reach the next one
		if frame == nil || frame.captured {
			frame = &scope{parent: outer}
		} else {
			frame.reset()
		}
		r.scope = frame
		if err := r.assign(n.tgt, x, n.line); err != nil {
			return err
		}
		r.scope.set("loop", lv)
		err := r.execBody(n.body)
		if err == errBreak {
			break
		}
		if err == nil {
			completed = true
		} else if err != errContinue {
			return err
		}
	}
	if !completed {
		r.scope = outer
		return r.execBody(n.els)
	}
	return nil
}

// assign binds a target in the current scope.
func (r *renderer) assign(t target, v Value, line int) error {
	if t.tuple {
		var items []Value
		switch v.k {
		case KindList, KindTuple:
			items = v.list()
		default:
			var err error
			if items, err = r.iterate(v); err != nil {
				return err
			}
		}
		if len(items) < len(t.items) {
			return &Error{Line: line, Type: "ValueError", Msg: fmt.Sprintf("not enough values to unpack (expected %d, got %d)", len(t.items), len(items)), Python: true}
		}
		if len(items) > len(t.items) {
			return &Error{Line: line, Type: "ValueError", Msg: fmt.Sprintf("too many values to unpack (expected %d)", len(t.items)), Python: true}
		}
		for i, sub := range t.items {
			if err := r.assign(sub, items[i], line); err != nil {
				return err
			}
		}
		return nil
	}
	if t.attr != "" {
		ns := r.lookup(t.name)
		if ns.k != KindNamespace {
			return &Error{Line: line, Type: "TemplateRuntimeError", Msg: "cannot assign attribute on non-namespace object", Python: true}
		}
		return ns.p.(*namespace).d.set(&r.bud, String(t.attr), v)
	}
	r.scope.set(t.name, v)
	return nil
}

func (n *setNode) exec(r *renderer) error {
	v, err := n.e.eval(r)
	if err != nil {
		return err
	}
	return r.assign(n.tgt, v, n.line)
}

func (n *setBlockNode) exec(r *renderer) error {
	v, err := r.filteredBody(n.body, n.filters)
	if err != nil {
		return err
	}
	return r.assign(n.tgt, v, n.line)
}

func (n *filterBlockNode) exec(r *renderer) error {
	v, err := r.filteredBody(n.body, n.filters)
	if err != nil {
		return err
	}
	return r.writeValue(v)
}

// filteredBody renders body into a string and passes it through filters in order: the value of
// a {% set x | f %} block and the output of a {% filter f %} block.
func (r *renderer) filteredBody(body []stmt, filters []*filterExpr) (Value, error) {
	s, err := r.capture(body)
	if err != nil {
		return Value{}, err
	}
	v := String(s)
	for _, f := range filters {
		if v, err = r.applyFilter(f, v); err != nil {
			return Value{}, err
		}
	}
	return v, nil
}

// writeValue outputs str(v).
func (r *renderer) writeValue(v Value) error {
	if v.k == KindString {
		return r.write(v.s)
	}
	b := &bounded{bud: &r.bud}
	writeStr(b, v)
	if b.err != nil {
		return b.err
	}
	return r.write(b.String())
}

func (n *loopCtlNode) exec(r *renderer) error {
	if n.brk {
		return errBreak
	}
	return errContinue
}

func (n *generationNode) exec(r *renderer) error {
	s, err := r.capture(n.body)
	if err != nil {
		return err
	}
	if r.rootYields || len(r.gen) > 0 {
		// A span is 16 bytes, and Render converts it to byte offsets through a few more: a
		// template can close a block in every step of a loop.
		if err := r.bud.alloc(spanCharge); err != nil {
			return err
		}
		start := r.rootRunes
		r.gen = append(r.gen, [2]int{start, start + utf8.RuneCountInString(s)})
	}
	return r.write(s)
}

func (n *withNode) exec(r *renderer) error {
	vals := make([]Value, len(n.vals))
	for i, e := range n.vals {
		v, err := e.eval(r)
		if err != nil {
			return err
		}
		vals[i] = v
	}
	outer := r.scope
	r.scope = &scope{parent: outer}
	defer func() { r.scope = outer }()
	for i, t := range n.tgts {
		if err := r.assign(t, vals[i], n.line); err != nil {
			return err
		}
	}
	return r.execBody(n.body)
}

func (n *macroNode) exec(r *renderer) error {
	r.scope.captured = true
	r.scope.set(n.m.name, Value{k: KindCallable, p: &macro{def: n.m, scope: r.scope, name: n.m.name}})
	return nil
}

func (n *callBlockNode) exec(r *renderer) error {
	r.scope.captured = true
	caller := Value{k: KindCallable, p: &macro{def: n.caller, scope: r.scope, name: "caller"}}
	fn, err := n.call.fn.eval(r)
	if err != nil {
		return err
	}
	args, kw, err := r.evalArgs(n.call.args, n.call.kwargs)
	if err != nil {
		return err
	}
	kw = append(kw, Kwarg{"caller", caller})
	v, err := r.call(fn, args, kw, n.line)
	if err != nil {
		return err
	}
	return r.writeValue(v)
}

// macro is a macro (or a call block's caller) bound to the scope it was defined in.
type macro struct {
	def   *macroDef
	scope *scope
	name  string
}

func (r *renderer) callMacro(m *macro, args []Value, kw []Kwarg) (Value, error) {
	d := m.def
	r.bud.depth++
	defer func() { r.bud.depth-- }()
	if r.bud.lim.MaxDepth > 0 && r.bud.depth > r.bud.lim.MaxDepth {
		return Value{}, &LimitError{Limit: "MaxDepth", Value: int64(r.bud.lim.MaxDepth)}
	}
	s := &scope{parent: m.scope}
	bound := make([]bool, len(d.params))
	var varargs []Value
	for i, a := range args {
		if i < len(d.params) {
			s.set(d.params[i].name, a)
			bound[i] = true
			continue
		}
		if !d.usesVA {
			return Value{}, typeErr("macro %s takes not more than %d argument(s)", repr(String(d.name)), len(d.params))
		}
		varargs = append(varargs, a)
	}
	kwargs := NewDict()
	hasCaller := false
outer:
	for _, k := range kw {
		for i, p := range d.params {
			if p.name == k.Name {
				if bound[i] {
					return Value{}, typeErr("macro %s got multiple values for argument %s", repr(String(d.name)), repr(String(k.Name)))
				}
				s.set(p.name, k.Value)
				bound[i] = true
				continue outer
			}
		}
		if k.Name == "caller" && d.usesCaller {
			s.set("caller", k.Value)
			hasCaller = true
			continue
		}
		if !d.usesKW {
			return Value{}, typeErr("macro %s takes no keyword argument %s", repr(String(d.name)), repr(String(k.Name)))
		}
		if err := kwargs.Set(String(k.Name), k.Value); err != nil {
			return Value{}, err
		}
	}
	saved := r.scope
	r.scope = s
	defer func() { r.scope = saved }()
	for i, p := range d.params {
		if bound[i] {
			continue
		}
		if p.def != nil {
			v, err := p.def.eval(r)
			if err != nil {
				return Value{}, err
			}
			s.set(p.name, v)
		} else {
			s.set(p.name, undefHint(fmt.Sprintf("parameter %s was not provided", repr(String(p.name)))))
		}
	}
	if d.usesVA {
		if varargs == nil {
			varargs = []Value{}
		}
		s.set("varargs", Tuple(varargs...))
	}
	if d.usesKW {
		s.set("kwargs", DictValue(kwargs))
	}
	if d.usesCaller && !hasCaller {
		s.set("caller", undefHint("No caller defined"))
	}
	out, err := r.capture(d.body)
	if err != nil {
		return Value{}, err
	}
	return String(out), nil
}

// loopObj is a for loop's loop variable.
type loopObj struct {
	items []Value
	i     int
	node  *forNode
	depth int
	scope *scope
	last  *Value // loop.changed's last value
}

func (l *loopObj) attr(name string) (Value, bool) {
	n := len(l.items)
	switch name {
	case "index":
		return Int(int64(l.i + 1)), true
	case "index0":
		return Int(int64(l.i)), true
	case "revindex":
		return Int(int64(n - l.i)), true
	case "revindex0":
		return Int(int64(n - l.i - 1)), true
	case "first":
		return Bool(l.i == 0), true
	case "last":
		return Bool(l.i == n-1), true
	case "length":
		return Int(int64(n)), true
	case "depth":
		return Int(int64(l.depth + 1)), true
	case "depth0":
		return Int(int64(l.depth)), true
	case "previtem":
		if l.i == 0 {
			return undefHint("there is no previous item"), true
		}
		return l.items[l.i-1], true
	case "nextitem":
		if l.i+1 >= n {
			return undefHint("there is no next item"), true
		}
		return l.items[l.i+1], true
	case "cycle", "changed":
		return Value{k: KindCallable, p: &method{recv: Value{k: KindCallable, p: l}, name: name}}, true
	}
	return Value{}, false
}

// callLoop is loop(items) of a recursive loop: the loop's body over items, one level deeper.
func (r *renderer) callLoop(l *loopObj, args []Value) (Value, error) {
	if !l.node.recursive {
		return Value{}, typeErr("Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.")
	}
	if len(args) != 1 {
		return Value{}, typeErr("loop() takes exactly one argument")
	}
	r.bud.depth++
	defer func() { r.bud.depth-- }()
	if r.bud.lim.MaxDepth > 0 && r.bud.depth > r.bud.lim.MaxDepth {
		return Value{}, &LimitError{Limit: "MaxDepth", Value: int64(r.bud.lim.MaxDepth)}
	}
	saved, savedScope := r.out, r.scope
	buf := &bounded{bud: &r.bud}
	r.out, r.scope = buf, l.scope
	err := r.runLoop(l.node, args[0], l.depth+1)
	r.out, r.scope = saved, savedScope
	if err == nil {
		err = buf.err
	}
	if err != nil {
		return Value{}, err
	}
	return String(buf.String()), nil
}
