package table

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
)

// textSource reads a text file as HF's text loader does with keep_linebreaks=False: one column
// "text", one row per line, the line break stripped, empty lines kept as rows. Python opens the
// file with universal newlines, so "\n", "\r\n" and a lone "\r" all end a line, and a final line
// break does not start an empty last row.
type textSource struct{}

func (textSource) scanStrings(ctx context.Context, t *Table, _ int, fn func(int64, string, bool) error) error {
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	defer f.Close()
	lr := newLineReader(f, f, t.opts.MaxCellBytes, "MaxCellBytes")
	var row int64
	for {
		if row%ctxEvery == ctxEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, err := lr.next(true)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("table: %s: row %d: %w", t.path, row, err)
		}
		for len(line) > 0 || lr.terminated {
			piece, rest, cr := bytes.Cut(line, []byte{'\r'})
			if !cr && len(piece) == 0 && !lr.terminated {
				break // "x\r" at the end of the file: the "\r" ended the last row
			}
			if err := fn(row, string(piece), true); err != nil {
				return fmt.Errorf("table: %s: row %d: %w", t.path, row, err)
			}
			row++
			if !cr {
				break
			}
			line = rest
			if len(line) == 0 && !lr.terminated {
				break
			}
		}
	}
}

func (textSource) scanIntLists(_ context.Context, t *Table, _ []int, _ func(int64, [][]int32) error) error {
	return fmt.Errorf("table: %s: column \"text\" is string, not a list of integers: %w", t.path, ErrType)
}
