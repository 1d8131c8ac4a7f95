package sft

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/data/chat"
	"github.com/gotpu/gotpu/data/table"
)

// MaxRowBytes bounds one row: a chat render's whole input plus room for the row's other keys.
// A longer row is refused while it is read, before it is held.
const MaxRowBytes = chat.MaxInputBytes + 1<<20

var errTooLong = fmt.Errorf("longer than %d bytes", MaxRowBytes)

// ReadJSONL yields the non-blank lines of a JSON-lines file as rows (Row.Line is the line
// number). A line longer than MaxRowBytes is an error naming it, found before it is held.
func ReadJSONL(path string) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		f, err := os.Open(path)
		if err != nil {
			yield(Row{}, err)
			return
		}
		defer f.Close()
		r := bufio.NewReaderSize(f, 1<<20)
		for n := 1; ; n++ {
			line, err := readLine(r)
			if errors.Is(err, errTooLong) {
				yield(Row{}, fmt.Errorf("%s: line %d: %w", path, n, err))
				return
			}
			if err != nil && !errors.Is(err, io.EOF) {
				yield(Row{}, fmt.Errorf("%s: line %d: %w", path, n, err))
				return
			}
			if len(bytes.TrimSpace(line)) > 0 {
				if n == 1 {
					line = bytes.TrimPrefix(line, []byte("\ufeff"))
				}
				if !yield(Row{Source: path, Line: n, JSON: line}, nil) {
					return
				}
			}
			if err != nil { // io.EOF
				return
			}
		}
	}
}

// readLine reads one line without its end, at most MaxRowBytes; at the end of input it returns
// the last line (possibly empty) with io.EOF.
func readLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		frag, err := r.ReadSlice('\n')
		if len(buf)+len(frag) > MaxRowBytes+2 {
			return nil, errTooLong
		}
		buf = append(buf, frag...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		buf = bytes.TrimSuffix(bytes.TrimSuffix(buf, []byte("\n")), []byte("\r"))
		return buf, err
	}
}

// window is a reader that fails once more than its allowance past a mark has been read, so a
// json.Decoder never buffers more than one row's bound.
type window struct {
	r         io.Reader
	pos, stop int64
}

var errWindow = errors.New("window exhausted")

func (w *window) Read(p []byte) (int, error) {
	if w.pos >= w.stop {
		return 0, errWindow
	}
	if int64(len(p)) > w.stop-w.pos {
		p = p[:w.stop-w.pos]
	}
	n, err := w.r.Read(p)
	w.pos += int64(n)
	return n, err
}

// ReadJSONArray yields the objects of a file holding one JSON array (Row.Index is the
// element's index). An element longer than MaxRowBytes is an error naming it.
func ReadJSONArray(path string) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		f, err := os.Open(path)
		if err != nil {
			yield(Row{}, err)
			return
		}
		defer f.Close()
		w := &window{r: bufio.NewReaderSize(f, 64<<10), stop: 1 << 20}
		dec := json.NewDecoder(w)
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			yield(Row{}, fmt.Errorf("%s: not a JSON array", path))
			return
		}
		for i := int64(0); ; i++ {
			w.stop = dec.InputOffset() + MaxRowBytes + 64<<10
			if !dec.More() {
				break
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				if errors.Is(err, errWindow) {
					err = errTooLong
				}
				yield(Row{}, fmt.Errorf("%s: row %d: %w", path, i, err))
				return
			}
			if !yield(Row{Source: path, Index: i, JSON: raw}, nil) {
				return
			}
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim(']') {
			yield(Row{}, fmt.Errorf("%s: the JSON array does not close", path))
		}
	}
}

// ReadTable yields the rows of a Parquet, Arrow, CSV (or other data/table) file as JSON
// objects of its string columns: textField when the table has it, else "prompt" and
// "completion". data/table reads strings and integer lists only, so conversational tables
// (nested "messages") are refused with a pointer to JSON lines. Prompt–completion tables are
// read one column after the other, so their prompts are held in memory meanwhile.
func ReadTable(ctx context.Context, path string, format table.Format, textField string) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		t, err := table.Open(path, table.Options{Format: format})
		if err != nil {
			yield(Row{}, err)
			return
		}
		defer t.Close()
		has := func(name string) bool {
			return slices.ContainsFunc(t.Columns(), func(c table.Column) bool { return c.Name == name })
		}
		stop := errors.New("stop")
		cellErr := func(row int64, col string) error {
			return fmt.Errorf("%s: row %d: field %q: null, want a string", path, row, col)
		}
		switch {
		case has(textField):
			err = t.ScanStrings(ctx, textField, func(row int64, s string, valid bool) error {
				if !valid {
					return cellErr(row, textField)
				}
				b, _ := json.Marshal(map[string]string{textField: s})
				if !yield(Row{Source: path, Index: row, JSON: b}, nil) {
					return stop
				}
				return nil
			})
		case has("prompt") && has("completion"):
			var prompts []string
			err = t.ScanStrings(ctx, "prompt", func(row int64, s string, valid bool) error {
				if !valid {
					return cellErr(row, "prompt")
				}
				prompts = append(prompts, s)
				return nil
			})
			if err == nil {
				err = t.ScanStrings(ctx, "completion", func(row int64, s string, valid bool) error {
					if !valid {
						return cellErr(row, "completion")
					}
					if row >= int64(len(prompts)) {
						return fmt.Errorf("%s: row %d: more completions than prompts", path, row)
					}
					b, _ := json.Marshal(map[string]string{"prompt": prompts[row], "completion": s})
					if !yield(Row{Source: path, Index: row, JSON: b}, nil) {
						return stop
					}
					return nil
				})
			}
		case has("messages") || has("conversations"):
			err = fmt.Errorf("%s: a conversational table (nested messages) cannot be read from %s here: gotpu's table reader reads string and integer-list columns; convert it to JSON lines", path, t.Format())
		default:
			var names []string
			for _, c := range t.Columns() {
				names = append(names, c.Name)
			}
			err = fmt.Errorf("%s: no %q column, nor \"prompt\" and \"completion\" (columns: %s)", path, textField, strings.Join(names, ", "))
		}
		if err != nil && !errors.Is(err, stop) {
			yield(Row{}, err)
		}
	}
}

// ReadFile yields the rows of one data file: JSON lines (.jsonl, or .json not holding an
// array), a JSON array (.json), or a table (Parquet, Arrow, CSV...) read by ReadTable; format
// overrides the extension for tables ("" infers it).
func ReadFile(ctx context.Context, path string, format table.Format, textField string) iter.Seq2[Row, error] {
	ext := strings.ToLower(filepath.Ext(path))
	if st, err := os.Stat(path); err == nil && !st.IsDir() && (format == "" || format == "json") && (ext == ".jsonl" || ext == ".json") {
		arr, err := table.IsJSONArray(path)
		if err != nil {
			return func(yield func(Row, error) bool) { yield(Row{}, fmt.Errorf("%s: %w", path, err)) }
		}
		if arr {
			return ReadJSONArray(path)
		}
		return ReadJSONL(path)
	}
	return ReadTable(ctx, path, format, textField)
}

// Concat yields the rows of each sequence in turn.
func Concat(seqs ...iter.Seq2[Row, error]) iter.Seq2[Row, error] {
	return func(yield func(Row, error) bool) {
		for _, s := range seqs {
			for r, err := range s {
				if !yield(r, err) || err != nil {
					return
				}
			}
		}
	}
}
