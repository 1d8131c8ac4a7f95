package table

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
)

// csvSource reads a CSV (or, for .tsv, tab-separated) file as HF's csv loader (pandas.read_csv)
// does: a header row names the columns; RFC 4180 quoting, newlines inside quoted cells; blank
// lines skipped; a quote inside an unquoted cell is kept as a character; an empty cell is null. Cells are strings as they are: unlike pandas, no type
// inference and no "NA"/"null" spellings of missing values. Int-list columns are written by
// datasets' to_csv as "[1, 2, 3]" and parsed as JSON arrays of integers.
type csvSource struct {
	comma rune
}

// utf8BOM is skipped at the start of a CSV or JSON file, as pandas and Python's json do.
var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

func openCSV(t *Table) error {
	s := csvSource{comma: csvDelimiter(t.path)}
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	defer f.Close()
	r, _ := s.reader(f, t.opts)
	header, err := r.next()
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("table: %s: empty CSV file, no header row: %w", t.path, ErrCorrupt)
	}
	if err != nil {
		return fmt.Errorf("table: %s: header row: %w", t.path, err)
	}
	for i, name := range header {
		t.cols = append(t.cols, Column{Name: name, Type: "string"})
		if name == "" {
			return fmt.Errorf("table: %s: header cell %d is empty: %w", t.path, i, ErrCorrupt)
		}
	}
	t.src = s
	return nil
}

// csvReader bounds each record's bytes with a windowReader and its fields with a fieldCounter.
type csvReader struct {
	w         *windowReader
	r         *csv.Reader
	max       int
	maxFields int
	line      int // where the last record read started
}

func (s csvSource) reader(f io.Reader, opts Options) (*csvReader, error) {
	br := &bomSkipper{r: f}
	w := &windowReader{r: br}
	r := csv.NewReader(newFieldCounter(w, s.comma, opts.MaxRecordFields))
	r.Comma = s.comma
	r.ReuseRecord = true
	r.LazyQuotes = true // as pandas: a quote inside an unquoted cell is a character
	return &csvReader{w: w, r: r, max: opts.MaxRecordBytes, maxFields: opts.MaxRecordFields}, nil
}

func (c *csvReader) next() ([]string, error) {
	c.w.allow(c.r.InputOffset(), c.max)
	rec, err := c.r.Read()
	if errors.Is(err, errWindow) {
		return nil, fmt.Errorf("%s is longer than MaxRecordBytes %d: %w", c.which(), c.max, ErrTooLarge)
	}
	if errors.Is(err, errFields) {
		return nil, fmt.Errorf("%s has more than MaxRecordFields %d fields: %w", c.which(), c.maxFields, ErrTooLarge)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w (%w)", err, ErrCorrupt)
	}
	if err == nil && len(rec) > 0 {
		c.line, _ = c.r.FieldPos(0)
	}
	return rec, err
}

// which names the record being read: the line where it starts is known only once it is read.
func (c *csvReader) which() string {
	if c.line == 0 {
		return "the first record"
	}
	return fmt.Sprintf("the record after line %d", c.line)
}

// cells streams the records after the header, calling fn with the cells of cols (-1: absent,
// given as null) and the record's line.
func (s csvSource) cells(ctx context.Context, t *Table, cols []int, fn func(row int64, line int, cells []string, null []bool) error) error {
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	defer f.Close()
	r, _ := s.reader(f, t.opts)
	if _, err := r.next(); err != nil {
		return fmt.Errorf("table: %s: header row: %w", t.path, err)
	}
	cells := make([]string, len(cols))
	null := make([]bool, len(cols))
	for row := int64(0); ; row++ {
		if row%ctxEvery == ctxEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		rec, err := r.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("table: %s: row %d: %w", t.path, row, err)
		}
		line := r.line
		for i, c := range cols {
			cells[i], null[i] = "", true
			if c < 0 {
				continue
			}
			if len(rec[c]) > t.opts.MaxCellBytes {
				return rowErr(t.path, row, t.cols[c].Name, fmt.Errorf("a %d-byte cell (line %d), more than MaxCellBytes %d: %w", len(rec[c]), line, t.opts.MaxCellBytes, ErrTooLarge))
			}
			cells[i], null[i] = rec[c], rec[c] == ""
		}
		if err := fn(row, line, cells, null); err != nil {
			return err
		}
	}
}

func (s csvSource) scanStrings(ctx context.Context, t *Table, col int, fn func(int64, string, bool) error) error {
	return s.cells(ctx, t, []int{col}, func(row int64, _ int, cells []string, null []bool) error {
		if err := fn(row, cells[0], !null[0]); err != nil {
			return fmt.Errorf("table: %s: row %d: %w", t.path, row, err)
		}
		return nil
	})
}

func (s csvSource) scanIntLists(ctx context.Context, t *Table, cols []int, fn func(int64, [][]int32) error) error {
	lists := make([][]int32, len(cols))
	bufs := make([][]int32, len(cols))
	maxLen := t.opts.MaxCellBytes / 4
	return s.cells(ctx, t, cols, func(row int64, line int, cells []string, null []bool) error {
		for i := range cols {
			if null[i] {
				lists[i] = nil
				continue
			}
			l, err := parseIntList(cells[i], bufs[i], maxLen)
			if err != nil {
				return rowErr(t.path, row, t.cols[cols[i]].Name, fmt.Errorf("line %d: %q: %w", line, clip(cells[i]), err))
			}
			bufs[i], lists[i] = l, l
		}
		if err := fn(row, lists); err != nil {
			return fmt.Errorf("table: %s: row %d: %w", t.path, row, err)
		}
		return nil
	})
}

// clip shortens a cell quoted in an error.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// bomSkipper drops a UTF-8 byte-order mark at the start of its input.
type bomSkipper struct {
	r    io.Reader
	done bool
	head []byte
}

func (b *bomSkipper) Read(p []byte) (int, error) {
	if !b.done {
		b.done = true
		head := make([]byte, 3)
		n, err := io.ReadFull(b.r, head)
		head = head[:n]
		if !bytes.Equal(head, utf8BOM) {
			b.head = head
		}
		if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
			return 0, err
		}
	}
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	return b.r.Read(p)
}
