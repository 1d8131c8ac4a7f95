package jinja

import (
	"context"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Limits bound one render. A zero field takes its default (DefaultLimits); a negative one means
// no limit.
type Limits struct {
	// MaxOutputBytes bounds the rendered text.
	MaxOutputBytes int64
	// MaxBytes bounds the total bytes of strings and lists built during the render (counted as
	// they are made, before allocating: concatenation, join, replace, *, format, filters, list
	// and dict literals, macro and block output that is captured ...). Substrings and values
	// passed in are free.
	MaxBytes int64
	// MaxSteps bounds the work: statements and expressions evaluated, loop iterations, filter,
	// test and function calls; each value a walk visits (printing, tojson, ==, <, in, sorting,
	// hashing a tuple key), since a value can hold another many times over ([x, x] doubled 40
	// times is 2^40 leaves built in 40 steps); and each 256 bytes of a string read through
	// (in, find, count, length, indexing by code point).
	MaxSteps int64
	// MaxDepth bounds macro, caller and recursive-loop nesting.
	MaxDepth int
}

// Defaults, sized for chat templates: the largest real chat templates render a conversation in
// well under a million steps and a few MiB, so these leave two orders of magnitude of headroom
// for long conversations while a hostile template stops within about a second and a few hundred
// MiB of memory.
const (
	DefaultMaxOutputBytes = 64 << 20
	DefaultMaxBytes       = 256 << 20
	DefaultMaxSteps       = 50_000_000
	DefaultMaxDepth       = 100
)

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{MaxOutputBytes: DefaultMaxOutputBytes, MaxBytes: DefaultMaxBytes, MaxSteps: DefaultMaxSteps, MaxDepth: DefaultMaxDepth}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = d.MaxOutputBytes
	}
	if l.MaxBytes == 0 {
		l.MaxBytes = d.MaxBytes
	}
	if l.MaxSteps == 0 {
		l.MaxSteps = d.MaxSteps
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = d.MaxDepth
	}
	return l
}

// valueSize is what one list item costs against MaxBytes.
const valueSize = int64(unsafe.Sizeof(Value{}))

// ctxEvery is how many steps pass between checks of the context.
const ctxEvery = 4096

// scanBytesPerStep is how many bytes of a string one step pays for when an operation reads the
// string through (in, find, count, len, indexing by code point, ...): about what one step of the
// interpreter costs, so that a loop over a long string meets MaxSteps, and the context is
// checked, in about the time the same number of steps would take.
const scanBytesPerStep = 256

// budget is one render's counters. Its first error is kept (err) and returned by every later
// charge, so that a walk that meets a limit stops at its next charge even where an error was
// dropped on the way, and no later charge of the render can succeed.
type budget struct {
	lim   Limits
	ctx   context.Context
	steps int64
	bytes int64
	depth int
	err   error
}

// fail keeps err as the budget's error.
func (b *budget) fail(err error) error {
	if b.err == nil {
		b.err = err
	}
	return b.err
}

// step counts n steps. A nil budget charges nothing (a value printed outside a render).
func (b *budget) step(n int64) error {
	if b == nil {
		return nil
	}
	if b.err != nil {
		return b.err
	}
	b.steps += n
	if b.lim.MaxSteps > 0 && b.steps > b.lim.MaxSteps {
		return b.fail(&LimitError{Limit: "MaxSteps", Value: b.lim.MaxSteps})
	}
	if b.steps%ctxEvery < n || n >= ctxEvery {
		if err := b.ctx.Err(); err != nil {
			return b.fail(err)
		}
	}
	return nil
}

// scan charges the steps of reading n bytes of a string.
func (b *budget) scan(n int) error { return b.step(int64(n / scanBytesPerStep)) }

// alloc charges n bytes about to be allocated. A nil budget charges nothing.
func (b *budget) alloc(n int64) error {
	if b == nil {
		return nil
	}
	if b.err != nil {
		return b.err
	}
	if n < 0 {
		return b.fail(&LimitError{Limit: "MaxBytes", Value: b.lim.MaxBytes})
	}
	b.bytes += n
	if b.lim.MaxBytes > 0 && (b.bytes > b.lim.MaxBytes || b.bytes < 0) {
		return b.fail(&LimitError{Limit: "MaxBytes", Value: b.lim.MaxBytes})
	}
	return nil
}

// allocMul charges n*size bytes, refusing overflow.
func (b *budget) allocMul(n, size int64) error {
	if b == nil {
		return nil
	}
	if n < 0 || size < 0 || (size != 0 && n > (1<<62)/size) {
		return b.fail(&LimitError{Limit: "MaxBytes", Value: b.lim.MaxBytes})
	}
	return b.alloc(n * size)
}

// bounded is a string builder that charges its budget before it grows: the render's output
// (root, against MaxOutputBytes) or a string being built (against MaxBytes; with a nil budget,
// nothing: Value.String outside a render). After the first refusal it keeps err and ignores
// further writes, and the walks that write into it (printing, tojson) stop at their next value.
// It keeps its bytes in blocks that double up to maxBlock, so that building n bytes allocates
// about 2n (blocks, then the string), not the 5n of an appended slice growing by a quarter.
type bounded struct {
	blocks [][]byte
	buf    []byte
	n      int
	bud    *budget
	root   bool
	max    int64
	err    error
}

const maxBlock = 1 << 20

func (b *bounded) grow(n int) bool {
	if b.err != nil {
		return false
	}
	if b.root {
		if b.max > 0 && int64(b.n)+int64(n) > b.max {
			b.err = &LimitError{Limit: "MaxOutputBytes", Value: b.max}
			return false
		}
		return true
	}
	if err := b.bud.alloc(int64(n)); err != nil {
		b.err = err
		return false
	}
	return true
}

// visit charges one step for a value a walk is about to write, and reports whether to go on:
// every value written costs at least a byte, and now a step too, so that a walk of a value
// shared many times over (a DAG: [x, x] doubled) stops at MaxSteps or the context's end even
// while it writes few bytes.
func (b *bounded) visit() bool {
	if b.err != nil {
		return false
	}
	if err := b.bud.step(1); err != nil {
		b.err = err
		return false
	}
	return true
}

func (b *bounded) WriteString(s string) (int, error) {
	if !b.grow(len(s)) {
		return 0, b.err
	}
	n := len(s)
	b.n += n
	for len(s) > 0 {
		if len(b.buf) == cap(b.buf) {
			size := 256
			if c := cap(b.buf); c > 0 {
				b.blocks = append(b.blocks, b.buf)
				size = min(2*c, maxBlock)
			}
			if b.blocks == nil && len(s) > size {
				size = min(len(s), maxBlock) // a first write of a large string: one exact block
			}
			b.buf = make([]byte, 0, size)
		}
		k := copy(b.buf[len(b.buf):cap(b.buf)], s)
		b.buf = b.buf[:len(b.buf)+k]
		s = s[k:]
	}
	return n, nil
}

func (b *bounded) WriteByte(c byte) error {
	if len(b.buf) < cap(b.buf) && b.grow(1) {
		b.buf = append(b.buf, c)
		b.n++
		return nil
	}
	_, err := b.WriteString(string(c))
	return err
}

func (b *bounded) WriteRune(r rune) (int, error) {
	if r < 0x80 {
		return 1, b.WriteByte(byte(r))
	}
	var tmp [4]byte
	n := utf8.EncodeRune(tmp[:], r)
	return b.WriteString(string(tmp[:n]))
}

// writeRepeat writes s n times, a few KiB at a time.
func (b *bounded) writeRepeat(s string, n int) {
	if n <= 0 || s == "" {
		return
	}
	per := max(1, 4096/len(s))
	chunk := strings.Repeat(s, min(n, per))
	for ; n >= per && b.err == nil; n -= per {
		b.WriteString(chunk)
	}
	if n > 0 && n < per {
		b.WriteString(chunk[:n*len(s)])
	}
}

// Len is the number of bytes written.
func (b *bounded) Len() int { return b.n }

// String returns the bytes written, in one allocation.
func (b *bounded) String() string {
	var sb strings.Builder
	sb.Grow(b.n)
	for _, bl := range b.blocks {
		sb.Write(bl)
	}
	sb.Write(b.buf)
	return sb.String()
}

// result is the string built and the error that stopped it; a failed build copies nothing.
func (b *bounded) result() (string, error) {
	if b.err != nil {
		return "", b.err
	}
	return b.String(), nil
}
