package data

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// Dataset is a random-access collection of examples. Get may be called concurrently.
type Dataset interface {
	Len() int
	Get(i int) (Example, error)
}

// SliceDataset is an in-memory Dataset.
type SliceDataset []Example

// Len implements Dataset.
func (s SliceDataset) Len() int { return len(s) }

// Get implements Dataset.
func (s SliceDataset) Get(i int) (Example, error) {
	if i < 0 || i >= len(s) {
		return Example{}, fmt.Errorf("data: index %d out of range [0,%d)", i, len(s))
	}
	return s[i], nil
}

// LineIndex holds the byte offsets of the non-empty lines of a file, so that any line can be read
// with one ReadAt: large files are streamed once to build it (8 bytes a line), never held whole.
type LineIndex struct {
	path    string
	f       *os.File
	offsets []int64 // start of each non-blank line, plus the end of the last one
	lineNos []int   // 1-based line numbers, for error messages
	ends    []int64
	mu      sync.Mutex
	closed  bool
}

// maxLine bounds a single line (a document or an example); longer lines are an error naming it.
const maxLine = 256 << 20

// IndexLines scans path once and indexes its non-blank lines.
func IndexLines(path string) (*LineIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	idx := &LineIndex{path: path, f: f}
	r := bufio.NewReaderSize(f, 1<<20)
	var off int64
	for lineNo := 1; ; lineNo++ {
		line, err := r.ReadSlice('\n')
		for errors.Is(err, bufio.ErrBufferFull) { // long line: keep reading without keeping it
			if int64(len(line)) > maxLine {
				f.Close()
				return nil, fmt.Errorf("data: %s:%d: line longer than %d bytes", path, lineNo, maxLine)
			}
			var more []byte
			more, err = r.ReadSlice('\n')
			line = append(append([]byte(nil), line...), more...)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			idx.offsets = append(idx.offsets, off)
			idx.ends = append(idx.ends, off+int64(len(bytes.TrimRight(line, "\r\n"))))
			idx.lineNos = append(idx.lineNos, lineNo)
		}
		off += int64(len(line))
		if err == io.EOF {
			break
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("data: %s:%d: %w", path, lineNo, err)
		}
	}
	return idx, nil
}

// Len is the number of non-blank lines.
func (x *LineIndex) Len() int { return len(x.offsets) }

// Path is the indexed file.
func (x *LineIndex) Path() string { return x.path }

// Line returns the i-th non-blank line (without its newline) and its 1-based line number.
func (x *LineIndex) Line(i int) ([]byte, int, error) {
	if i < 0 || i >= len(x.offsets) {
		return nil, 0, fmt.Errorf("data: %s: line index %d out of range [0,%d)", x.path, i, len(x.offsets))
	}
	buf := make([]byte, x.ends[i]-x.offsets[i])
	if _, err := x.f.ReadAt(buf, x.offsets[i]); err != nil {
		return nil, x.lineNos[i], fmt.Errorf("data: %s:%d: %w", x.path, x.lineNos[i], err)
	}
	return buf, x.lineNos[i], nil
}

// Close closes the file.
func (x *LineIndex) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	return x.f.Close()
}

// JSONLDataset reads pre-tokenized JSON lines (`{"input_ids": [...], ...}`, as HF datasets store
// them) lazily from an indexed file.
type JSONLDataset struct{ idx *LineIndex }

// OpenJSONL indexes a pre-tokenized JSON-lines file. Every line is parsed when read; Validate
// parses them all up front.
func OpenJSONL(path string) (*JSONLDataset, error) {
	idx, err := IndexLines(path)
	if err != nil {
		return nil, err
	}
	if idx.Len() == 0 {
		idx.Close()
		return nil, fmt.Errorf("data: %s: no examples", path)
	}
	return &JSONLDataset{idx: idx}, nil
}

// Len implements Dataset.
func (d *JSONLDataset) Len() int { return d.idx.Len() }

// Get implements Dataset; errors name the file and line.
func (d *JSONLDataset) Get(i int) (Example, error) {
	line, lineNo, err := d.idx.Line(i)
	if err != nil {
		return Example{}, err
	}
	ex, err := ParseExample(line)
	if err != nil {
		return Example{}, fmt.Errorf("data: %s:%d: %w", d.idx.Path(), lineNo, err)
	}
	return ex, nil
}

// Validate parses every example, returning the first error.
func (d *JSONLDataset) Validate() error {
	for i := range d.Len() {
		if _, err := d.Get(i); err != nil {
			return err
		}
	}
	return nil
}

// Close releases the file.
func (d *JSONLDataset) Close() error { return d.idx.Close() }
