package table

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// jsonSource reads HF's json loader inputs: JSON lines (one object per line; blank lines
// skipped) or a file holding one top-level array of objects, streamed element by element with
// encoding/json's tokens, never loaded whole. Which one is decided by the first byte that is not
// whitespace ('[' or '{'), whatever the extension. Columns are the keys of the first object, in
// its order, typed by its values (pyarrow infers over a whole block; a key first seen in a later
// object is not a column, and a row lacking a key reads as null).
type jsonSource struct {
	array bool
}

// firstJSONByte returns the first byte of r that is not a byte-order mark or whitespace: '['
// for an array of objects, '{' for JSON lines.
func firstJSONByte(r io.Reader) (byte, error) {
	br := bufio.NewReader(&bomSkipper{r: r})
	for {
		c, err := br.ReadByte()
		if err != nil {
			return 0, err
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c, nil
		}
	}
}

// IsJSONArray reports whether the JSON file at path holds one top-level array (rather than JSON
// lines), by the rule Open uses: its first byte past a byte-order mark and whitespace is '['.
// An empty file is not an array.
func IsJSONArray(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("table: %w", err)
	}
	defer f.Close()
	c, err := firstJSONByte(f)
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("table: %s: %w", path, err)
	}
	return c == '[', nil
}

func openJSON(t *Table) error {
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	defer f.Close()
	first, err := firstJSONByte(f)
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("table: %s: no JSON object in the file: %w", t.path, ErrCorrupt)
	}
	if err != nil {
		return fmt.Errorf("table: %s: %w", t.path, err)
	}
	if first != '[' && first != '{' {
		return fmt.Errorf("table: %s: starts with %q: neither JSON lines ({...}) nor an array of objects ([...]): %w", t.path, first, ErrCorrupt)
	}
	s := jsonSource{array: first == '['}
	var cols []Column
	errFirst := errors.New("first object read")
	err = s.records(context.Background(), t, func(row int64, line int64, obj []byte) error {
		if cols, err = s.jsonColumns(t, obj); err != nil {
			return fmt.Errorf("table: %s: %s: %w", t.path, where(row, line), err)
		}
		return errFirst
	})
	switch {
	case err == nil:
		return fmt.Errorf("table: %s: no JSON object in the file: %w", t.path, ErrCorrupt)
	case !errors.Is(err, errFirst):
		return err
	}
	t.cols, t.src = cols, s
	return nil
}

// jsonColumns returns the keys of the first object in order, each typed by its value; a
// repeated key keeps its first place (its last value wins, as in Python's json). The object is
// walked once (walkObject): no key beyond MaxRecordFields and no value is copied.
func (s jsonSource) jsonColumns(t *Table, obj []byte) ([]Column, error) {
	var cols []Column
	at := map[string]int{}
	err := walkObject(obj, t.opts.MaxRecordFields, func(key, val []byte) error {
		name, err := keyText(key)
		if err != nil {
			return err
		}
		c := Column{Name: name, Type: jsonType(val)}
		if i, ok := at[name]; ok {
			cols[i] = c
			return nil
		}
		at[name] = len(cols)
		cols = append(cols, c)
		return nil
	})
	if err := s.recordErr(t, obj, err); err != nil {
		return nil, err
	}
	return cols, nil
}

// recordErr turns an error of walkObject on obj into one saying which limit or rule it broke;
// with none, a JSON line (not validated while read, as an array's objects are) is validated.
func (s jsonSource) recordErr(t *Table, obj []byte, err error) error {
	switch {
	case errors.Is(err, errFields):
		return fmt.Errorf("an object of more than MaxRecordFields %d keys: %w", t.opts.MaxRecordFields, ErrTooLarge)
	case errors.Is(err, errJSONSyntax):
		if verr := validJSON(obj); verr != nil {
			return verr
		}
		return fmt.Errorf("%w (%w)", err, ErrCorrupt)
	case err != nil:
		return err
	case !s.array:
		return validJSON(obj)
	}
	return nil
}

// records calls fn with each object of the file (its bytes valid only during fn) and, for JSON
// lines, its line number. No object longer than MaxRecordBytes is held.
func (s jsonSource) records(ctx context.Context, t *Table, fn func(row, line int64, obj []byte) error) error {
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	defer f.Close()
	if !s.array {
		lr := newLineReader(f, &bomSkipper{r: f}, t.opts.MaxRecordBytes, "MaxRecordBytes")
		for row := int64(0); ; {
			if row%ctxEvery == ctxEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			line, err := lr.next(false)
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("table: %s: row %d: %w", t.path, row, err)
			}
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if err := fn(row, lr.line, line); err != nil {
				return err
			}
			row++
		}
	}
	w := &windowReader{r: bufio.NewReaderSize(&bomSkipper{r: f}, readBuffer(f))}
	w.allow(0, t.opts.MaxRecordBytes)
	dec := json.NewDecoder(w)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return fmt.Errorf("table: %s: not a JSON array: %w", t.path, ErrCorrupt)
	}
	var raw json.RawMessage
	for row := int64(0); ; row++ {
		if row%ctxEvery == ctxEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		w.allow(dec.InputOffset(), t.opts.MaxRecordBytes)
		if !dec.More() {
			break
		}
		raw = raw[:0]
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, errWindow) {
				return fmt.Errorf("table: %s: row %d: an object longer than MaxRecordBytes %d: %w", t.path, row, t.opts.MaxRecordBytes, ErrTooLarge)
			}
			if strings.Contains(err.Error(), "exceeded max depth") {
				// encoding/json's own bound (10,000 levels) met before the walk could meet
				// MaxJSONDepth: the same error. Its message is the only sign of it.
				return fmt.Errorf("table: %s: row %d: %w", t.path, row, errJSONDepth)
			}
			return fmt.Errorf("table: %s: row %d (byte %d): %w (%w)", t.path, row, dec.InputOffset(), err, ErrCorrupt)
		}
		if len(raw) == 0 || raw[0] != '{' {
			return fmt.Errorf("table: %s: row %d (byte %d): not a JSON object: %w", t.path, row, dec.InputOffset(), ErrCorrupt)
		}
		if err := fn(row, 0, raw); err != nil {
			return err
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
		return fmt.Errorf("table: %s: the array does not close (byte %d): %w", t.path, dec.InputOffset(), ErrCorrupt)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("table: %s: data after the array (byte %d): %w", t.path, dec.InputOffset(), ErrCorrupt)
	}
	return nil
}

// fields finds the values of the columns cols in one object (nil for a missing key, the last
// value for a repeated one), as slices of obj.
func (s jsonSource) fields(t *Table, obj []byte, cols []int, out []json.RawMessage) error {
	clear(out)
	err := walkObject(obj, t.opts.MaxRecordFields, func(key, val []byte) error {
		for i, c := range cols {
			if c >= 0 && keyIs(key, t.cols[c].Name) {
				out[i] = val
			}
		}
		return nil
	})
	return s.recordErr(t, obj, err)
}

func where(row, line int64) string {
	if line > 0 {
		return fmt.Sprintf("row %d (line %d)", row, line)
	}
	return fmt.Sprintf("row %d", row)
}

func (s jsonSource) scanStrings(ctx context.Context, t *Table, col int, fn func(int64, string, bool) error) error {
	vals := make([]json.RawMessage, 1)
	cols := []int{col}
	name := t.cols[col].Name
	return s.records(ctx, t, func(row, line int64, obj []byte) error {
		if err := s.fields(t, obj, cols, vals); err != nil {
			return fmt.Errorf("table: %s: %s: %w", t.path, where(row, line), err)
		}
		v := vals[0]
		var str string
		valid := len(v) > 0 && v[0] != 'n'
		if valid {
			if v[0] != '"' {
				return rowErr(t.path, row, name, fmt.Errorf("%s: a %s, not a string: %w", where(row, line), jsonType(v), ErrType))
			}
			if len(v) > t.opts.MaxCellBytes+2 {
				return rowErr(t.path, row, name, fmt.Errorf("a %d-byte cell, more than MaxCellBytes %d: %w", len(v), t.opts.MaxCellBytes, ErrTooLarge))
			}
			if err := json.Unmarshal(v, &str); err != nil {
				return rowErr(t.path, row, name, fmt.Errorf("%w (%w)", err, ErrCorrupt))
			}
		}
		if err := fn(row, str, valid); err != nil {
			return fmt.Errorf("table: %s: row %d: %w", t.path, row, err)
		}
		return nil
	})
}

func (s jsonSource) scanIntLists(ctx context.Context, t *Table, cols []int, fn func(int64, [][]int32) error) error {
	vals := make([]json.RawMessage, len(cols))
	lists := make([][]int32, len(cols))
	bufs := make([][]int32, len(cols))
	maxLen := t.opts.MaxCellBytes / 4
	return s.records(ctx, t, func(row, line int64, obj []byte) error {
		if err := s.fields(t, obj, cols, vals); err != nil {
			return fmt.Errorf("table: %s: %s: %w", t.path, where(row, line), err)
		}
		for i, v := range vals {
			if len(v) == 0 || v[0] == 'n' {
				lists[i] = nil
				continue
			}
			l, err := parseIntList([]byte(v), bufs[i], maxLen)
			if err != nil {
				return rowErr(t.path, row, t.cols[cols[i]].Name, fmt.Errorf("%s: %w", where(row, line), err))
			}
			bufs[i], lists[i] = l, l
		}
		if err := fn(row, lists); err != nil {
			return fmt.Errorf("table: %s: row %d: %w", t.path, row, err)
		}
		return nil
	})
}
