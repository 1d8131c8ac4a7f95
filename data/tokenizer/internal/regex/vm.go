package regex

import (
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
	m := re.get()
	defer re.pool.Put(m)
	return m.run(re.prog, s, from, false, false)
}

// FindAll calls fn for every match, in order, iterating as the Rust onig
// crate's find_iter does (which is what Hugging Face tokenizers uses): after
// a match the search resumes at its end, and an empty match right at the end
// of the previous match is skipped by advancing one character.
func (re *Regexp) FindAll(s string, fn func(start, end int)) {
	last := 0
	lastMatchEnd := -1
	for last <= len(s) {
		st, en, ok := re.FindAt(s, last)
		if !ok {
			return
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
}

func (re *Regexp) get() *machine {
	if m, ok := re.pool.Get().(*machine); ok {
		return m
	}
	return newMachine(re)
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

type machine struct {
	re     *Regexp
	q0, q1 queue
	stack  []uint32
	subs   []*machine // one per lookahead that needs a sub-program
}

func newMachine(re *Regexp) *machine {
	return newMachineFor(re, len(re.prog.insts))
}

func newMachineFor(re *Regexp, n int) *machine {
	return &machine{re: re, q0: newQueue(n), q1: newQueue(n), subs: make([]*machine, len(re.looks))}
}

// run executes p on s from byte offset pos. anchored: only a match starting
// at pos counts. anyMatch: stop at the first thread that reaches Match (used
// for lookahead, where only existence matters).
func (m *machine) run(p *prog, s string, pos int, anchored, anyMatch bool) (int, int, bool) {
	clist, nlist := &m.q0, &m.q1
	clist.clear()
	nlist.clear()
	matched := false
	ms, me := 0, 0
	startPos := pos
	for {
		if !matched && (!anchored || pos == startPos) {
			m.add(p, clist, p.start, pos, pos, s)
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
					m.add(p, nlist, in.x, pos+size, t.start, s)
				}
			case opClass:
				if size > 0 && in.cls.matches(r) {
					m.add(p, nlist, in.x, pos+size, t.start, s)
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
	return ms, me, matched
}

// add follows the epsilon closure of pc at text position pos, in priority
// order, appending consuming and Match instructions to q.
func (m *machine) add(p *prog, q *queue, pc uint32, pos, start int, s string) {
	stack := append(m.stack[:0], pc)
	for len(stack) > 0 {
		pc = stack[len(stack)-1]
		stack = stack[:len(stack)-1]
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
			if m.assert(in.at, s, pos) {
				stack = append(stack, in.x)
			}
		case opLook:
			if m.lookaround(in.look, s, pos) {
				stack = append(stack, in.x)
			}
		default:
			q.threads = append(q.threads, thread{pc: pc, start: start})
		}
	}
	m.stack = stack
}

func (m *machine) assert(at assertKind, s string, pos int) bool {
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

func (m *machine) lookaround(idx int, s string, pos int) bool {
	l := m.re.looks[idx]
	var ok bool
	switch {
	case l.isFixed && !l.behind:
		ok = true
		p := pos
		for _, c := range l.fixed {
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
		sub := m.subs[idx]
		if sub == nil {
			sub = newMachineFor(m.re, len(l.prog.insts))
			m.subs[idx] = sub
		}
		_, _, ok = sub.run(l.prog, s, pos, true, true)
	}
	return ok != l.negate
}
