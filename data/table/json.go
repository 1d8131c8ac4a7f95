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
	err = s.records(context.Background(), t, func(_ int64, _ int64, obj []byte) error {
		if cols, err = jsonColumns(obj); err != nil {
			return fmt.Errorf("table: %s: %w", t.path, err)
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

// jsonColumns returns the keys of obj in order, each typed by its value; a repeated key keeps its
// first place (its last value wins, as in Python's json).
func jsonColumns(obj []byte) ([]Column, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("the first row is not a JSON object: %w", ErrCorrupt)
	}
	var cols []Column
	at := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("the first row: %w (%w)", err, ErrCorrupt)
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("the first row, key %q: %w (%w)", key, err, ErrCorrupt)
		}
		c := Column{Name: key, Type: jsonType(raw)}
		if i, ok := at[key]; ok {
			cols[i] = c
			continue
		}
		at[key] = len(cols)
		cols = append(cols, c)
	}
	return cols, nil
}

// jsonType names the type pyarrow would give a JSON value.
func jsonType(raw []byte) string {
	if len(raw) == 0 {
		return "null"
	}
	switch raw[0] {
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	case '{':
		return "struct"
	case '[':
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return "list<null>"
		}
		for _, e := range elems {
			if t := jsonType(e); t != "null" {
				return "list<" + t + ">"
			}
		}
		return "list<null>"
	}
	if bytes.ContainsAny(raw, ".eE") {
		return "double"
	}
	return "int64"
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
		lr := newLineReader(&bomSkipper{r: f}, t.opts.MaxRecordBytes, "MaxRecordBytes")
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
	w := &windowReader{r: bufio.NewReaderSize(&bomSkipper{r: f}, 64<<10)}
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

// fields decodes the values of the columns cols of one object (nil for a missing key).
func (s jsonSource) fields(t *Table, obj []byte, m map[string]json.RawMessage, cols []int, out []json.RawMessage) error {
	clear(m)
	if err := json.Unmarshal(obj, &m); err != nil {
		return fmt.Errorf("%w (%w)", err, ErrCorrupt)
	}
	for i, c := range cols {
		out[i] = nil
		if c >= 0 {
			out[i] = m[t.cols[c].Name]
		}
	}
	return nil
}

func where(row, line int64) string {
	if line > 0 {
		return fmt.Sprintf("row %d (line %d)", row, line)
	}
	return fmt.Sprintf("row %d", row)
}

func (s jsonSource) scanStrings(ctx context.Context, t *Table, col int, fn func(int64, string, bool) error) error {
	m := map[string]json.RawMessage{}
	vals := make([]json.RawMessage, 1)
	name := t.cols[col].Name
	return s.records(ctx, t, func(row, line int64, obj []byte) error {
		if err := s.fields(t, obj, m, []int{col}, vals); err != nil {
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
	m := map[string]json.RawMessage{}
	vals := make([]json.RawMessage, len(cols))
	lists := make([][]int32, len(cols))
	bufs := make([][]int32, len(cols))
	maxLen := t.opts.MaxCellBytes / 4
	return s.records(ctx, t, func(row, line int64, obj []byte) error {
		if err := s.fields(t, obj, m, cols, vals); err != nil {
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
