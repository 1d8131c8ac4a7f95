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
func IndexLines(path string) (*LineIndex, error) { return indexLines(path, 0) }

// indexLines is IndexLines with, when maxSeq > 0, every line's sequence columns counted as they
// stream past (seqCounter): a line is never held whole here, however long.
func indexLines(path string, maxSeq int) (*LineIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	idx := &LineIndex{path: path, f: f}
	r := bufio.NewReaderSize(f, 1<<20)
	var counter *seqCounter
	if maxSeq > 0 {
		counter = newSeqCounter(maxSeq)
	}
	fail := func(lineNo int, err error) (*LineIndex, error) {
		f.Close()
		return nil, fmt.Errorf("data: %s:%d: %w", path, lineNo, err)
	}
	var off int64
	for lineNo := 1; ; lineNo++ {
		if counter != nil {
			counter.reset()
		}
		// A line arrives in chunks of at most the buffer's size; only its length, whether it has
		// anything but white space, and how many line-end bytes it ends with are kept.
		var length, trailing int64
		nonBlank := false
		chunk, err := r.ReadSlice('\n')
		for {
			length += int64(len(chunk))
			if length > maxLine {
				return fail(lineNo, fmt.Errorf("line longer than %d bytes", maxLine))
			}
			if !errors.Is(err, bufio.ErrBufferFull) && length == int64(len(chunk)) {
				nonBlank = len(bytes.TrimSpace(chunk)) > 0 // a whole line: Unicode white space too
			} else if !nonBlank {
				nonBlank = len(bytes.Trim(chunk, " \t\r\n\v\f")) > 0
			}
			if t := int64(len(chunk) - len(bytes.TrimRight(chunk, "\r\n"))); t == int64(len(chunk)) {
				trailing += t
			} else {
				trailing = t
			}
			if counter != nil && !counter.write(chunk) {
				return fail(lineNo, counter.err)
			}
			if !errors.Is(err, bufio.ErrBufferFull) {
				break
			}
			chunk, err = r.ReadSlice('\n')
		}
		if nonBlank {
			idx.offsets = append(idx.offsets, off)
			idx.ends = append(idx.ends, off+length-trailing)
			idx.lineNos = append(idx.lineNos, lineNo)
		}
		off += length
		if err == io.EOF {
			break
		}
		if err != nil {
			return fail(lineNo, err)
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
func OpenJSONL(path string) (*JSONLDataset, error) { return OpenJSONLWith(path, JSONLOptions{}) }

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
