package table

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// windowSlack is what a decoder may have read ahead of a record's start: encoding/csv's bufio
// buffer (4 KiB) and encoding/json's read-ahead, with room to spare.
const windowSlack = 8 << 10

// errWindow is returned by windowReader past its limit.
var errWindow = errors.New("record beyond the size limit")

// windowReader hands a decoder (encoding/csv, encoding/json) at most limit bytes in total; the
// caller moves limit before each record to "where the record starts + the most it may take", so
// a record too large is refused while it is read, before the decoder holds it whole.
type windowReader struct {
	r     io.Reader
	n     int64
	limit int64
}

func (w *windowReader) Read(p []byte) (int, error) {
	if w.n >= w.limit {
		return 0, errWindow
	}
	if int64(len(p)) > w.limit-w.n {
		p = p[:w.limit-w.n]
	}
	k, err := w.r.Read(p)
	w.n += int64(k)
	return k, err
}

// allow lets the next record take max bytes from start (the decoder's input offset).
func (w *windowReader) allow(start int64, max int) {
	w.limit = start + int64(max) + windowSlack
	if w.limit < w.n {
		w.limit = w.n
	}
	if w.limit < 0 { // overflow
		w.limit = math.MaxInt64
	}
}

// lineReader reads lines of at most max bytes without holding a longer one: ReadSlice gives the
// line in the bufio buffer's pieces and the pieces are gathered only while they fit.
type lineReader struct {
	r    *bufio.Reader
	buf  []byte
	max  int
	what string // the option max comes from, for errors
	line int64  // 1-based number of the line last read
	// terminated: the line last read ended with "\n" (not at the end of the file).
	terminated bool
}

func newLineReader(f *os.File, r io.Reader, max int, what string) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, readBuffer(f)), max: max, what: what}
}

// readBuffer is the size of a buffered reader of f: 64 KiB, or the file's size when smaller (a
// small file, as every fuzzing input, need not allocate the whole buffer each scan).
func readBuffer(f *os.File) int {
	const size = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() < size {
		return int(max(st.Size()+1, 16))
	}
	return size
}

// next returns the next line without its "\n" (nor a "\r" before it when crlf), valid until the
// next call; io.EOF after the last. A last line without "\n" is a line.
func (l *lineReader) next(crlf bool) ([]byte, error) {
	l.buf = l.buf[:0]
	for {
		piece, err := l.r.ReadSlice('\n')
		if len(l.buf)+len(piece) > l.max+1 { // +1: the "\n" is not part of the line
			return nil, fmt.Errorf("line %d is longer than %s %d: %w", l.line+1, l.what, l.max, ErrTooLarge)
		}
		if need := len(l.buf) + len(piece); need > cap(l.buf) {
			// Doubling, not append's growth (a quarter at a time for large slices, which
			// allocated five times a long line in all), and never past the limit.
			grown := make([]byte, len(l.buf), min(max(need, 2*cap(l.buf)), l.max+1))
			copy(grown, l.buf)
			l.buf = grown
		}
		l.buf = append(l.buf, piece...)
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF && len(l.buf) == 0 {
			return nil, io.EOF
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
		l.line++
		b := l.buf
		l.terminated = false
		if n := len(b); n > 0 && b[n-1] == '\n' {
			l.terminated = true
			b = b[:n-1]
			if n := len(b); crlf && n > 0 && b[n-1] == '\r' {
				b = b[:n-1]
			}
		}
		if len(b) > l.max {
			return nil, fmt.Errorf("line %d is longer than %s %d: %w", l.line, l.what, l.max, ErrTooLarge)
		}
		return b, nil
	}
}

// errFields is returned by fieldCounter past its limit.
var errFields = errors.New("record with too many fields")

// fieldCounter sits between encoding/csv and its input and counts the fields of each record as
// the bytes go by, following encoding/csv's rules with LazyQuotes (a field is quoted when it
// starts with '"'; in one, `""` is a quote, `",` ends the field, `"` before a line break ends the
// record, and any other `"` is a character; newlines inside a quoted field belong to it). It hands
// the reader the bytes before the separator that starts field max+1 and then errFields: the
// reader never holds more than max fields. encoding/csv keeps an offset, a position and a string
// header per field before any check of its own, so a line of commas took about 150 bytes a byte.
type fieldCounter struct {
	r      io.Reader
	comma  byte
	max    int
	fields int // fields begun in the current record
	state  csvState
	err    error // errFields, returned once the bytes before it are read
}

type csvState uint8

const (
	csvFieldStart csvState = iota // at the start of a field
	csvUnquoted                   // inside a field that does not start with '"'
	csvQuoted                     // inside a quoted field
	csvQuote                      // just after a '"' inside a quoted field
	csvQuoteCR                    // after `"\r` inside a quoted field ("\r\n" is a line break)
)

func newFieldCounter(r io.Reader, comma rune, max int) *fieldCounter {
	return &fieldCounter{r: r, comma: byte(comma), max: max, fields: 1}
}

func (c *fieldCounter) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	for i := 0; i < n; i++ {
		if c.step(p[i]) {
			c.err = errFields
			if i == 0 {
				return 0, c.err
			}
			return i, nil
		}
	}
	return n, err
}

// step advances by one byte; it reports whether the byte starts a field beyond the limit.
func (c *fieldCounter) step(b byte) bool {
	switch c.state {
	case csvFieldStart, csvUnquoted:
		switch {
		case b == c.comma:
			c.state = csvFieldStart
			return c.newField()
		case b == '\n':
			c.state, c.fields = csvFieldStart, 1
		case b == '"' && c.state == csvFieldStart:
			c.state = csvQuoted
		default:
			c.state = csvUnquoted
		}
	case csvQuoted:
		if b == '"' {
			c.state = csvQuote
		}
	case csvQuote, csvQuoteCR:
		switch {
		case b == '\n':
			c.state, c.fields = csvFieldStart, 1
		case c.state == csvQuoteCR:
			// `"\r` then not "\n": the quote and the "\r" were characters.
			c.state = csvQuoted
			if b == '"' {
				c.state = csvQuote
			}
		case b == '"':
			c.state = csvQuoted // `""`: a quote
		case b == c.comma:
			c.state = csvFieldStart
			return c.newField()
		case b == '\r':
			c.state = csvQuoteCR
		default:
			c.state = csvQuoted // a bare quote, kept as a character (LazyQuotes)
		}
	}
	return false
}

func (c *fieldCounter) newField() bool {
	c.fields++
	return c.fields > c.max
}
