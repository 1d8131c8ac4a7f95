package regex

import "fmt"

type opcode uint8

const (
	opClass  opcode = iota // consume one rune in cls, continue at x
	opRune                 // consume rune r, continue at x
	opSplit                // continue at x, then (lower priority) at y
	opJmp                  // continue at x
	opAssert               // zero-width assertion at; continue at x
	opLook                 // zero-width lookaround look; continue at x
	opMatch
)

type inst struct {
	op   opcode
	at   assertKind
	r    rune
	x, y uint32
	cls  *charClass
	look int
}

type prog struct {
	insts []inst
	start uint32
}

// look is one lookaround. A body that is a fixed sequence of single
// characters is checked directly (fixed). Any other lookahead body has two
// programs: rev, the body reversed, which one right-to-left pass over the
// text runs to decide the lookahead at every position at once (see
// machine.extend: this is what keeps lookahead linear), and prog, the body
// itself, run anchored at one position where that pass has no answer (a
// position inside a character, or text that is not UTF-8).
type look struct {
	behind, negate bool
	fixed          []*charClass
	isFixed        bool
	prog, rev      *prog
}

// maxInsts bounds the program size (repetition counts multiply it), so that a
// hostile pattern cannot make the engine allocate without bound.
const maxInsts = 200000

type compiler struct {
	looks []*look
	// lookIdx gives each lookaround node one entry in looks, so that a
	// lookaround nested in a lookahead body, compiled again in the reversed
	// body, is decided once per position rather than once per program.
	lookIdx map[*node]int
	n       int // instructions emitted across all programs
}

func (c *compiler) prog(n *node) (*prog, error) {
	p := &prog{}
	if err := c.emit(p, n); err != nil {
		return nil, err
	}
	p.insts = append(p.insts, inst{op: opMatch})
	c.n++
	if c.n > maxInsts {
		return nil, fmt.Errorf("pattern too large (more than %d instructions)", maxInsts)
	}
	return p, nil
}

func (c *compiler) push(p *prog, in inst) uint32 {
	p.insts = append(p.insts, in)
	c.n++
	return uint32(len(p.insts) - 1)
}

func (c *compiler) emit(p *prog, n *node) error {
	if c.n > maxInsts {
		return fmt.Errorf("pattern too large (more than %d instructions)", maxInsts)
	}
	switch n.kind {
	case nEmpty:
	case nClass:
		pc := uint32(len(p.insts))
		if r, ok := n.cls.single(); ok {
			c.push(p, inst{op: opRune, r: r, x: pc + 1})
		} else {
			c.push(p, inst{op: opClass, cls: n.cls, x: pc + 1})
		}
	case nConcat:
		for _, s := range n.subs {
			if err := c.emit(p, s); err != nil {
				return err
			}
		}
	case nAlt:
		var jumps []uint32
		for i, s := range n.subs {
			if i == len(n.subs)-1 {
				if err := c.emit(p, s); err != nil {
					return err
				}
				break
			}
			split := c.push(p, inst{op: opSplit})
			p.insts[split].x = split + 1
			if err := c.emit(p, s); err != nil {
				return err
			}
			jumps = append(jumps, c.push(p, inst{op: opJmp}))
			p.insts[split].y = uint32(len(p.insts))
		}
		end := uint32(len(p.insts))
		for _, j := range jumps {
			p.insts[j].x = end
		}
	case nRepeat:
		sub := n.subs[0]
		for i := 0; i < n.min; i++ {
			if err := c.emit(p, sub); err != nil {
				return err
			}
		}
		if n.max < 0 && nullable(sub) {
			// A nullable body needs (body+)? rather than a plain loop: after
			// an empty iteration the loop must be left with the priority a
			// backtracking engine gives it, before the body's lower-priority
			// alternatives (the same construction as Go's regexp/syntax).
			quest := c.push(p, inst{op: opSplit})
			body := uint32(len(p.insts))
			if err := c.emit(p, sub); err != nil {
				return err
			}
			loop := c.push(p, inst{op: opSplit})
			end := uint32(len(p.insts))
			c.branch(p, loop, body, end, n.greedy)
			c.branch(p, quest, body, end, n.greedy)
			break
		}
		if n.max < 0 {
			// L: split body, end; body; jmp L
			split := c.push(p, inst{op: opSplit})
			if err := c.emit(p, sub); err != nil {
				return err
			}
			c.push(p, inst{op: opJmp, x: split})
			c.branch(p, split, split+1, uint32(len(p.insts)), n.greedy)
			break
		}
		var splits []uint32
		for i := n.min; i < n.max; i++ {
			splits = append(splits, c.push(p, inst{op: opSplit}))
			if err := c.emit(p, sub); err != nil {
				return err
			}
		}
		end := uint32(len(p.insts))
		for _, s := range splits {
			c.branch(p, s, s+1, end, n.greedy)
		}
	case nAssert:
		pc := uint32(len(p.insts))
		c.push(p, inst{op: opAssert, at: n.at, x: pc + 1})
	case nLook:
		idx, err := c.look(n)
		if err != nil {
			return err
		}
		pc := uint32(len(p.insts))
		c.push(p, inst{op: opLook, look: idx, x: pc + 1})
	default:
		return fmt.Errorf("internal error: unknown node kind %d", n.kind)
	}
	if c.n > maxInsts {
		return fmt.Errorf("pattern too large (more than %d instructions)", maxInsts)
	}
	return nil
}

// branch fills a split so that the preferred branch (body for greedy, exit
// for lazy) is tried first.
func (c *compiler) branch(p *prog, split, body, exit uint32, greedy bool) {
	if greedy {
		p.insts[split].x, p.insts[split].y = body, exit
	} else {
		p.insts[split].x, p.insts[split].y = exit, body
	}
}

func (c *compiler) look(n *node) (int, error) {
	if idx, ok := c.lookIdx[n]; ok {
		return idx, nil
	}
	l := &look{behind: n.behind, negate: n.negate}
	if seq, ok := fixedSeq(n.subs[0]); ok && len(seq) <= 64 {
		l.fixed, l.isFixed = seq, true
	} else if n.behind {
		return 0, fmt.Errorf("lookbehind must have a fixed length made of single characters")
	} else {
		p, err := c.prog(n.subs[0])
		if err != nil {
			return 0, err
		}
		rev, err := c.prog(reverse(n.subs[0]))
		if err != nil {
			return 0, err
		}
		l.prog, l.rev = p, rev
	}
	c.looks = append(c.looks, l)
	if c.lookIdx == nil {
		c.lookIdx = make(map[*node]int)
	}
	c.lookIdx[n] = len(c.looks) - 1
	return len(c.looks) - 1, nil
}

// reverse returns a node that matches the reversal of every string n
// matches, for deciding "does n match at position p" right to left.
// Zero-width nodes stay as they are: an assertion or a lookaround is a
// property of a position, whichever direction the text is read. Priorities
// (alternative order, greediness) are kept but do not matter: the reversed
// body is only asked whether it matches, never which match.
func reverse(n *node) *node {
	switch n.kind {
	case nConcat:
		r := &node{kind: nConcat, subs: make([]*node, len(n.subs))}
		for i, s := range n.subs {
			r.subs[len(n.subs)-1-i] = reverse(s)
		}
		return r
	case nAlt:
		r := &node{kind: nAlt, subs: make([]*node, len(n.subs))}
		for i, s := range n.subs {
			r.subs[i] = reverse(s)
		}
		return r
	case nRepeat:
		r := *n
		r.subs = []*node{reverse(n.subs[0])}
		return &r
	}
	return n // nEmpty, nClass, nAssert, nLook
}

// fixedSeq reports whether n always matches exactly a fixed sequence of
// single-character classes, and returns them.
func fixedSeq(n *node) ([]*charClass, bool) {
	switch n.kind {
	case nEmpty:
		return nil, true
	case nClass:
		return []*charClass{n.cls}, true
	case nConcat:
		var out []*charClass
		for _, s := range n.subs {
			q, ok := fixedSeq(s)
			if !ok {
				return nil, false
			}
			out = append(out, q...)
		}
		return out, true
	case nRepeat:
		if n.min != n.max || n.min > 64 {
			return nil, false
		}
		q, ok := fixedSeq(n.subs[0])
		if !ok {
			return nil, false
		}
		var out []*charClass
		for i := 0; i < n.min; i++ {
			out = append(out, q...)
		}
		return out, true
	}
	return nil, false
}

// nullable reports whether n can match the empty string.
func nullable(n *node) bool {
	switch n.kind {
	case nClass:
		return false
	case nConcat:
		for _, s := range n.subs {
			if !nullable(s) {
				return false
			}
		}
		return true
	case nAlt:
		for _, s := range n.subs {
			if nullable(s) {
				return true
			}
		}
		return false
	case nRepeat:
		return n.min == 0 || nullable(n.subs[0])
	}
	return true
}
