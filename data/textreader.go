package data

import (
	"bufio"
	"fmt"
	"io"
)

// TextLinesFrom yields each line of r, as TextLines does for a file: text held in the program
// (an embedded file, a string through strings.NewReader) or a stream (os.Stdin). r is read as
// the documents are iterated, so they can be iterated once; name identifies r in errors.
func TextLinesFrom(r io.Reader, name string) Documents {
	return func(yield func(string, error) bool) {
		scanLines(r, name, yield)
	}
}

// scanLines yields each line of r without its newline (a final line without one included) and
// then the read error, if any, naming name.
func scanLines(r io.Reader, name string, yield func(string, error) bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), maxLine)
	for sc.Scan() {
		if !yield(sc.Text(), nil) {
			return
		}
	}
	if err := sc.Err(); err != nil {
		yield("", fmt.Errorf("data: %s: %w", name, err))
	}
}
