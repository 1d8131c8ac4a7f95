package table

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

// batchFn receives one record batch of file, whose first row is row base of the table.
type batchFn func(file string, base int64, rec arrow.RecordBatch) error

// batchSource is a columnar format (Parquet, Arrow): it yields record batches holding at least
// the named columns, in row order, one batch at a time.
type batchSource interface {
	batches(ctx context.Context, t *Table, names []string, fn batchFn) error
}

// batchScanner implements the scans over any batchSource.
type batchScanner struct{ bs batchSource }

// ctxEvery is how many rows pass between checks of the context.
const ctxEvery = 64

func columnOf(rec arrow.RecordBatch, file, name string) (arrow.Array, error) {
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return nil, fmt.Errorf("table: %s: record batch has %d columns named %q: %w", file, len(idx), name, ErrCorrupt)
	}
	arr := rec.Column(idx[0])
	if int64(arr.Len()) != rec.NumRows() {
		return nil, fmt.Errorf("table: %s: column %q holds %d rows in a batch of %d: %w", file, name, arr.Len(), rec.NumRows(), ErrCorrupt)
	}
	return arr, nil
}

func (b batchScanner) scanStrings(ctx context.Context, t *Table, col int, fn func(int64, string, bool) error) error {
	name := t.cols[col].Name
	limit := t.opts.MaxCellBytes
	return b.bs.batches(ctx, t, []string{name}, func(file string, base int64, rec arrow.RecordBatch) error {
		arr, err := columnOf(rec, file, name)
		if err != nil {
			return err
		}
		get, err := stringsOf(arr)
		if err != nil {
			return fmt.Errorf("table: %s: column %q: %w", file, name, err)
		}
		for i := 0; i < arr.Len(); i++ {
			if i%ctxEvery == ctxEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			s, valid := get(i)
			row := base + int64(i)
			if len(s) > limit {
				return rowErr(file, row, name, fmt.Errorf("a %d-byte cell, more than MaxCellBytes %d: %w", len(s), limit, ErrTooLarge))
			}
			if err := fn(row, s, valid); err != nil {
				return fmt.Errorf("table: %s: row %d: %w", file, row, err)
			}
		}
		return nil
	})
}

func (b batchScanner) scanIntLists(ctx context.Context, t *Table, cols []int, fn func(int64, [][]int32) error) error {
	var names []string
	for _, c := range cols {
		if c >= 0 {
			names = append(names, t.cols[c].Name)
		}
	}
	lists := make([][]int32, len(cols))
	bufs := make([][]int32, len(cols))
	readers := make([]intListOf, len(cols))
	maxElems := t.opts.MaxCellBytes / 4
	return b.bs.batches(ctx, t, names, func(file string, base int64, rec arrow.RecordBatch) error {
		for i, c := range cols {
			readers[i] = nil
			if c < 0 {
				continue
			}
			arr, err := columnOf(rec, file, t.cols[c].Name)
			if err != nil {
				return err
			}
			if readers[i], err = intListsOf(arr, maxElems); err != nil {
				return fmt.Errorf("table: %s: column %q: %w", file, t.cols[c].Name, err)
			}
		}
		for r := 0; r < int(rec.NumRows()); r++ {
			if r%ctxEvery == ctxEvery-1 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			row := base + int64(r)
			for i, read := range readers {
				if read == nil {
					lists[i] = nil
					continue
				}
				l, err := read(r, bufs[i])
				if err != nil {
					return rowErr(file, row, t.cols[cols[i]].Name, err)
				}
				if l != nil {
					bufs[i] = l
				}
				lists[i] = l
			}
			if err := fn(row, lists); err != nil {
				return fmt.Errorf("table: %s: row %d: %w", file, row, err)
			}
		}
		return nil
	})
}
