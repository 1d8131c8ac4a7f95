package regex

import (
	"context"
	"fmt"
	"math"
	"sync"
	"unicode/utf8"
)

// Regexp is a compiled pattern. It is safe for concurrent use.
type Regexp struct {
	expr  string
	prog  *prog
	looks []*look
	word  *charClass // \w, for \b and \B
	pool  sync.Pool  // *machine
	// fast, when set, is a hand-written matcher equivalent to prog (see
	// fast.go); it is used for searches and cross-checked against prog in
	// tests.
	fast func(s string, from int) (int, int, bool)
}

// Compile parses an Oniguruma-dialect pattern.
func Compile(expr string) (*Regexp, error) {
	n, err := parse(expr)
	if err != nil {
		return nil, err
	}
	c := &compiler{}
	p, err := c.prog(n)
	if err != nil {
		return nil, &Error{Pattern: expr, Msg: err.Error()}
	}
	re := &Regexp{expr: expr, prog: p, looks: c.looks, word: wordSet().finish()}
	re.fast = fastMatcher(expr)
	return re, nil
}

// MustCompile is Compile for patterns known to be valid.
func MustCompile(expr string) *Regexp {
	re, err := Compile(expr)
	if err != nil {
		panic(err)
	}
	return re
}

// String returns the source pattern.
func (re *Regexp) String() string { return re.expr }

// FindAt returns the leftmost-first match starting the search at byte
// offset from (assertions still see the text before from).
func (re *Regexp) FindAt(s string, from int) (start, end int, ok bool) {
	if re.fast != nil {
		return re.fast(s, from)
	}
	return re.findNFA(s, from)
}

func (re *Regexp) findNFA(s string, from int) (int, int, bool) {
	m := re.get(context.Background(), s)
	defer re.put(m)
	return m.run(re.prog, &m.main, from, false, false)
}

// FindAll calls fn for every match, in order, iterating as the Rust onig
// crate's find_iter does (which is what Hugging Face tokenizers uses): after
// a match the search resumes at its end, and an empty match right at the end
// of the previous match is skipped by advancing one character.
func (re *Regexp) FindAll(s string, fn func(start, end int)) {
	// Without a context to cancel, findAll cannot fail.
	_, _ = re.findAll(context.Background(), s, fn)
}

// FindAllContext is FindAll for callers that must be able to stop a long
// search (a very long text, a large pattern): the engine checks ctx every
// few thousand steps, and once ctx is done it stops calling fn and returns
// an error wrapping ctx's.
func (re *Regexp) FindAllContext(ctx context.Context, s string, fn func(start, end int)) error {
	_, err := re.findAll(ctx, s, fn)
	return err
}

// findAll is FindAll's iteration; it also returns the work done (the
// machine's steps, or the number of fast-matcher calls), which the tests use
// to check complexity by count, not time.
func (re *Regexp) findAll(ctx context.Context, s string, fn func(start, end int)) (int64, error) {
	// One machine serves every search of the iteration, so that what the
	// lookahead oracles learned about s is reused by the next search.
	var m *machine
	if re.fast == nil {
		m = re.get(ctx, s)
		defer re.put(m)
	}
	return re.iterate(ctx, m, s, fn)
}

// iterate is findAll with the machine given (nil: the fast matcher).
func (re *Regexp) iterate(ctx context.Context, m *machine, s string, fn func(start, end int)) (int64, error) {
	last := 0
	lastMatchEnd := -1
	var fastCalls int64
	for last <= len(s) {
		var st, en int
		var ok bool
		if m == nil {
			// The fast matchers are linear per match and never stop on their
			// own; poll ctx every so many matches.
			if fastCalls%pollEvery == 0 && ctx.Err() != nil {
				return fastCalls, re.stopped(ctx, last, len(s))
			}
			fastCalls++
			st, en, ok = re.fast(s, last)
		} else {
			st, en, ok = m.run(re.prog, &m.main, last, false, false)
			if m.halted {
				return m.steps, re.stopped(ctx, last, len(s))
			}
		}
		if !ok {
			break
		}
		if st == en && en == lastMatchEnd {
			if last < len(s) {
				_, size := utf8.DecodeRuneInString(s[last:])
				last += size
			} else {
				last++
			}
			continue
		}
		last, lastMatchEnd = en, en
		fn(st, en)
	}
	if m == nil {
		return fastCalls, nil
	}
	return m.steps, nil
}

func (re *Regexp) stopped(ctx context.Context, at, n int) error {
	return fmt.Errorf("regex %q: search stopped at byte %d of %d: %w", re.expr, at, n, ctx.Err())
}

// get returns a machine ready to search s, with ctx polled while it runs.
func (re *Regexp) get(ctx context.Context, s string) *machine {
	m, ok := re.pool.Get().(*machine)
	if !ok {
		m = newMachine(re)
	}
	m.reset(ctx, s)
	return m
}

func newMachine(re *Regexp) *machine {
	return &machine{re: re, main: newRunner(re.prog), looks: make([]lookState, len(re.looks))}
}

func (re *Regexp) put(m *machine) {
	// Drop what refers to the caller's text and context, so that the pool
	// does not keep them alive.
	m.s, m.ctx = "", nil
	re.pool.Put(m)
}

type thread struct {
	pc    uint32
	start int
}

// queue is an ordered thread list with O(1) membership by generation stamps.
type queue struct {
	mark    []uint32
	gen     uint32
	threads []thread
}

func newQueue(n int) queue { return queue{mark: make([]uint32, n), gen: 1} }

func (q *queue) clear() {
	q.threads = q.threads[:0]
	q.gen++
	if q.gen == 0 {
		clear(q.mark)
		q.gen = 1
	}
}

// runner is the scratch space of one program: two thread lists and the
// stack of the epsilon closure. Each program has its own, because deciding a
// lookaround in the middle of one program's closure runs another program.
type runner struct {
	q0, q1 queue
	stack  []uint32
}

func newRunner(p *prog) runner {
	return runner{q0: newQueue(len(p.insts)), q1: newQueue(len(p.insts))}
}

// pollEvery is how many steps pass between two checks of the context: often
// enough to stop within a fraction of a millisecond, rarely enough to cost
// nothing measurable.
const pollEvery = 1 << 12

// machine is the state of the searches of one text.
type machine struct {
	re   *Regexp
	s    string
	main runner
	// looks holds, per lookaround of the pattern, what is known about the
	// current text (see lookState).
	looks []lookState
	// steps counts the work done since reset: instructions visited by
	// closures and threads stepped over a character. Every loop of the engine
	// increments it, so it bounds the running time, and tests assert
	// complexity on it.
	steps int64
	// ctx is polled when steps passes nextPoll; halted is set once it is
	// done, and every loop then unwinds (the results are then meaningless
	// and findAll reports the context's error instead).
	ctx      context.Context
	nextPoll int64
	halted   bool
	// direct makes lookaheads run their body at each position asked, as the
	// engine did before the oracles: the reference the tests compare against.
	direct bool
}

// lookState is what a machine knows about one lookahead on the current
// text. The lookahead's body is decided at every position at once by a
// right-to-left pass of its reversed program (an oracle): a thread of the
// reversed program at position p that reaches Match means the body matches
// some s[p:q]. The pass starts at len(s) when the lookahead is first asked
// about and goes left only as far as it is asked, resuming where it stopped,
// so it reads each character of the text at most once per search iteration
// whatever the order of the questions.
type lookState struct {
	rev     runner // the reversed program's lists; cur is the one holding threads at lo
	cur     *queue
	sub     runner // the forward program's, for the direct check
	started bool
	lo      int      // positions lo..len(s) reached by the pass
	seen    []uint64 // bit p: the pass stopped at position p (a character boundary)
	holds   []uint64 // bit p: the body matches at p
}

func (m *machine) reset(ctx context.Context, s string) {
	m.s, m.ctx, m.steps, m.halted = s, ctx, 0, false
	m.nextPoll = math.MaxInt64
	if ctx.Done() != nil {
		m.nextPoll = pollEvery
	}
	for i := range m.looks {
		m.looks[i].started = false
	}
}

// poll reports whether the search may go on, checking the context when
// enough steps have passed since the last check. The loops over text
// positions call it, where the work between two calls stays bounded by the
// pattern's size. It is kept small enough to be inlined.
func (m *machine) poll() bool {
	if m.steps >= m.nextPoll {
		m.checkContext()
	}
	return !m.halted
}

// checkContext is out of line so that poll stays small enough to inline.
//
//go:noinline
func (m *machine) checkContext() {
	m.nextPoll = m.steps + pollEvery
	if m.ctx.Err() != nil {
		m.halted = true
	}
}

// run executes p on m.s from byte offset pos. anchored: only a match
// starting at pos counts. anyMatch: stop at the first thread that reaches
// Match (used for lookahead, where only existence matters).
func (m *machine) run(p *prog, rn *runner, pos int, anchored, anyMatch bool) (int, int, bool) {
	s := m.s
	clist, nlist := &rn.q0, &rn.q1
	clist.clear()
	nlist.clear()
	matched := false
	ms, me := 0, 0
	startPos := pos
	for m.poll() {
		if !matched && (!anchored || pos == startPos) {
			m.add(p, rn, clist, p.start, pos, pos)
		}
		if len(clist.threads) == 0 && (matched || anchored) {
			break
		}
		var r rune
		size := 0
		if pos < len(s) {
			if c := s[pos]; c < utf8.RuneSelf {
				r, size = rune(c), 1
			} else {
				r, size = utf8.DecodeRuneInString(s[pos:])
			}
		}
		m.steps += int64(len(clist.threads))
	step:
		for i := 0; i < len(clist.threads); i++ {
			t := clist.threads[i]
			in := &p.insts[t.pc]
			switch in.op {
			case opMatch:
				if anyMatch {
					return t.start, pos, true
				}
				matched, ms, me = true, t.start, pos
				break step // lower-priority threads are cut
			case opRune:
				if size > 0 && r == in.r {
					m.add(p, rn, nlist, in.x, pos+size, t.start)
				}
			case opClass:
				if size > 0 && in.cls.matches(r) {
					m.add(p, rn, nlist, in.x, pos+size, t.start)
				}
			}
		}
		if pos >= len(s) {
			break
		}
		clist.clear()
		clist, nlist = nlist, clist
		pos += size
	}
	if m.halted {
		return 0, 0, false
	}
	return ms, me, matched
}

// add follows the epsilon closure of pc at text position pos, in priority
// order, appending consuming and Match instructions to q.
func (m *machine) add(p *prog, rn *runner, q *queue, pc uint32, pos, start int) {
	stack := append(rn.stack[:0], pc)
	visited := int64(0) // added to m.steps at the end, off the hot path
	for len(stack) > 0 {
		pc = stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		visited++
		if q.mark[pc] == q.gen {
			continue
		}
		q.mark[pc] = q.gen
		in := &p.insts[pc]
		switch in.op {
		case opJmp:
			stack = append(stack, in.x)
		case opSplit:
			stack = append(stack, in.y, in.x)
		case opAssert:
			if m.assert(in.at, pos) {
				stack = append(stack, in.x)
			}
		case opLook:
			// Deciding a lookaround may run other programs (the lookaround's
			// own, and those of lookarounds nested in it), each on its own
			// runner, never on rn: this stack is left alone.
			if m.lookaround(in.look, pos) {
				stack = append(stack, in.x)
			}
		default:
			q.threads = append(q.threads, thread{pc: pc, start: start})
		}
	}
	rn.stack = stack
	m.steps += visited
}

func (m *machine) assert(at assertKind, pos int) bool {
	s := m.s
	switch at {
	case aBeginLine:
		return pos == 0 || s[pos-1] == '\n'
	case aEndLine:
		return pos == len(s) || s[pos] == '\n'
	case aBeginText:
		return pos == 0
	case aEndText:
		return pos == len(s)
	case aEndTextNL:
		return pos == len(s) || (pos == len(s)-1 && s[pos] == '\n')
	case aWordB, aNotWordB:
		before, after := false, false
		if pos > 0 {
			r, _ := utf8.DecodeLastRuneInString(s[:pos])
			before = m.re.word.matches(r)
		}
		if pos < len(s) {
			r, _ := utf8.DecodeRuneInString(s[pos:])
			after = m.re.word.matches(r)
		}
		return (before != after) == (at == aWordB)
	}
	return false
}

func (m *machine) lookaround(idx int, pos int) bool {
	s := m.s
	l := m.re.looks[idx]
	var ok bool
	switch {
	case l.isFixed && !l.behind:
		ok = true
		p := pos
		for _, c := range l.fixed {
			m.steps++
			if p >= len(s) {
				ok = false
				break
			}
			r, size := utf8.DecodeRuneInString(s[p:])
			if !c.matches(r) {
				ok = false
				break
			}
			p += size
		}
	case l.isFixed:
		ok = true
		p := pos
		for i := len(l.fixed) - 1; i >= 0; i-- {
			m.steps++
			if p <= 0 {
				ok = false
				break
			}
			r, size := utf8.DecodeLastRuneInString(s[:p])
			if !l.fixed[i].matches(r) {
				ok = false
				break
			}
			p -= size
		}
	default:
		ok = m.lookahead(idx, pos)
	}
	return ok != l.negate
}

// lookahead reports whether the body of lookahead idx matches at pos.
func (m *machine) lookahead(idx int, pos int) bool {
	l, st := m.re.looks[idx], &m.looks[idx]
	if !m.direct {
		m.extend(l, st, pos)
		if st.seen[pos>>6]&(1<<(pos&63)) != 0 {
			return st.holds[pos>>6]&(1<<(pos&63)) != 0
		}
	}
	// The pass stepped over pos (pos is inside a character, as the reader
	// going right to left sees characters) or it was told not to run: run the
	// body anchored at pos. This costs up to the rest of the text per
	// question, which is why it is not the way.
	if st.sub.q0.mark == nil {
		st.sub = newRunner(l.prog)
	}
	_, _, ok := m.run(l.prog, &st.sub, pos, true, true)
	return ok
}

// extend runs the right-to-left pass of a lookahead's reversed body until it
// has reached position p (see lookState). Each step costs O(size of the
// body), so the pass over a text of n bytes costs O(body × n) for the whole
// search iteration.
func (m *machine) extend(l *look, st *lookState, p int) {
	s, rp := m.s, l.rev
	if !st.started {
		if st.rev.q0.mark == nil {
			st.rev = newRunner(rp)
		}
		words := len(s)/64 + 1
		if cap(st.seen) < words {
			st.seen, st.holds = make([]uint64, words), make([]uint64, words)
		}
		st.seen, st.holds = st.seen[:words], st.holds[:words]
		clear(st.seen)
		clear(st.holds)
		st.started = true
		st.cur = &st.rev.q0
		st.cur.clear()
		// A body match may end anywhere, the end of the text included: the
		// reversed body starts at every position the pass reaches.
		m.add(rp, &st.rev, st.cur, rp.start, len(s), 0)
		st.lo = len(s)
		st.record(rp)
	}
	for st.lo > p && m.poll() {
		pos := st.lo
		var r rune
		size := 1
		if c := s[pos-1]; c < utf8.RuneSelf {
			r = rune(c)
		} else {
			r, size = utf8.DecodeLastRuneInString(s[:pos])
		}
		next := &st.rev.q0
		if next == st.cur {
			next = &st.rev.q1
		}
		next.clear()
		m.steps += int64(len(st.cur.threads))
		for _, t := range st.cur.threads {
			in := &rp.insts[t.pc]
			switch in.op {
			case opRune:
				if r == in.r {
					m.add(rp, &st.rev, next, in.x, pos-size, 0)
				}
			case opClass:
				if in.cls.matches(r) {
					m.add(rp, &st.rev, next, in.x, pos-size, 0)
				}
			}
		}
		m.add(rp, &st.rev, next, rp.start, pos-size, 0)
		st.cur, st.lo = next, pos-size
		st.record(rp)
	}
}

// record notes what the pass knows at st.lo: whether a thread there has
// matched the whole reversed body, that is, whether the body matches at lo.
func (st *lookState) record(rp *prog) {
	p := st.lo
	st.seen[p>>6] |= 1 << (p & 63)
	for _, t := range st.cur.threads {
		if rp.insts[t.pc].op == opMatch {
			st.holds[p>>6] |= 1 << (p & 63)
			return
		}
	}
}
