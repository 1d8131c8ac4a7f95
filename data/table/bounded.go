package table

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
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

func newLineReader(r io.Reader, max int, what string) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10), max: max, what: what}
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
