package table

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
)

// Format names a file format of the Hugging Face Hub's dataset files.
type Format string

// The formats Open reads.
const (
	FormatParquet Format = "parquet"
	FormatArrow   Format = "arrow" // IPC file, IPC stream, or a save_to_disk directory
	FormatCSV     Format = "csv"
	FormatJSON    Format = "json" // JSON lines, or one top-level array of objects
	FormatText    Format = "text"
)

// Column is one top-level column: its name and its type in Arrow's spelling, normalized the way
// Hugging Face's features read: "string" (utf8, large_utf8, string_view, dictionary of strings),
// "int64", "double", "bool", "list<int32>" (list, large_list, fixed_size_list alike), ...
type Column struct {
	Name string
	Type string
}

// Options says how to open a table. The zero value works: every zero field takes its default.
type Options struct {
	// Format is the file format; "" infers it from the extension (.parquet, .arrow, .csv, .tsv,
	// .json, .jsonl, .txt) or, for a directory, reads it as a datasets save_to_disk directory.
	Format Format
	// Split selects the split of a save_to_disk DatasetDict directory (dataset_dict.json); a wrong
	// or missing split is an error that lists the splits there are. Ignored elsewhere.
	Split string
	// MaxCellBytes bounds one string or list cell (a text line for FormatText); a larger cell is
	// an error naming the file, row and column. 0 = DefaultMaxCellBytes.
	MaxCellBytes int
	// MaxRecordBytes bounds one CSV record or one JSON line/object, refused while it is being
	// read, before it is held whole. 0 = 4 × MaxCellBytes.
	MaxRecordBytes int
	// MaxRecordFields bounds the fields of one CSV record (the header included) and the keys of
	// one JSON object (its own, not those of objects nested in its values). A record's bytes are
	// bounded by MaxRecordBytes, but a reader holds a header, an offset and a position for each
	// field (encoding/csv) or a column or map entry for each key: a line of commas took many
	// times its size. A record with more is refused while it is read, before those are held, with
	// an error naming the file, row and this limit. 0 = DefaultMaxRecordFields.
	MaxRecordFields int
}

// DefaultMaxCellBytes is the default bound on one cell: 256 MiB, as data's JSON-lines reader.
const DefaultMaxCellBytes = 256 << 20

// DefaultMaxRecordFields is the default bound on the fields of a CSV record or the keys of a JSON
// object: 65,536, four times the columns a spreadsheet holds; at most a few MiB of bookkeeping.
const DefaultMaxRecordFields = 1 << 16

// DefaultOptions returns the options with every default filled in (Format inferred).
func DefaultOptions() Options {
	return Options{MaxCellBytes: DefaultMaxCellBytes, MaxRecordBytes: 4 * DefaultMaxCellBytes, MaxRecordFields: DefaultMaxRecordFields}
}

// Validate reports the first bad field of o.
func (o Options) Validate() error {
	switch o.Format {
	case "", FormatParquet, FormatArrow, FormatCSV, FormatJSON, FormatText:
	default:
		return fmt.Errorf("table: Options.Format %q: want one of parquet, arrow, csv, json, text (or empty to infer)", o.Format)
	}
	if o.MaxCellBytes < 0 {
		return fmt.Errorf("table: Options.MaxCellBytes %d is negative", o.MaxCellBytes)
	}
	if o.MaxRecordBytes < 0 {
		return fmt.Errorf("table: Options.MaxRecordBytes %d is negative", o.MaxRecordBytes)
	}
	if o.MaxRecordFields < 0 {
		return fmt.Errorf("table: Options.MaxRecordFields %d is negative", o.MaxRecordFields)
	}
	return nil
}

// withDefaults fills the zero fields.
func (o Options) withDefaults() Options {
	if o.MaxCellBytes == 0 {
		o.MaxCellBytes = DefaultMaxCellBytes
	}
	if o.MaxRecordBytes == 0 {
		o.MaxRecordBytes = 4 * o.MaxCellBytes
	}
	if o.MaxRecordFields == 0 {
		o.MaxRecordFields = DefaultMaxRecordFields
	}
	return o
}

// Table is an opened dataset file (or save_to_disk directory): its schema is read, its rows are
// not. Scans stream it; any number of scans may run at once, each with its own file handles.
type Table struct {
	path    string
	format  Format
	opts    Options
	cols    []Column
	nrows   int64
	known   bool
	src     source
	closed  atomic.Bool
	display string // the file errors name before a scan knows which file of a directory
}

// source is one format's reader. Scans receive the indexes (into Columns) of the columns they
// read, -1 for an optional column the file lacks.
type source interface {
	scanStrings(ctx context.Context, t *Table, col int, fn func(row int64, s string, valid bool) error) error
	scanIntLists(ctx context.Context, t *Table, cols []int, fn func(row int64, lists [][]int32) error) error
}

// Open opens path and reads its schema (and, where the format keeps it, its row count); rows are
// read only by the scans.
func Open(path string, opts Options) (t *Table, err error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	defer func() {
		if err != nil {
			t = nil
		}
	}()
	defer recoverEdge(path, &err)
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("table: %w", err)
	}
	format := opts.Format
	if format == "" {
		if format, err = inferFormat(path, st.IsDir()); err != nil {
			return nil, err
		}
	}
	t = &Table{path: path, format: format, opts: opts, display: path}
	switch {
	case st.IsDir() && format != FormatArrow:
		return nil, fmt.Errorf("table: %s: a directory is read only as a save_to_disk dataset (format arrow), not %s", path, format)
	case st.IsDir():
		err = openSaveToDisk(t)
	case format == FormatParquet:
		err = openParquet(t, st.Size())
	case format == FormatArrow:
		err = openIPC(t, st.Size())
	case format == FormatCSV:
		err = openCSV(t)
	case format == FormatJSON:
		err = openJSON(t)
	case format == FormatText:
		t.cols = []Column{{Name: "text", Type: "string"}}
		t.src = textSource{}
	}
	if err != nil {
		return nil, err
	}
	if dup := duplicateName(t.cols); dup != "" {
		return nil, fmt.Errorf("table: %s: column %q appears twice: %w", t.display, dup, ErrCorrupt)
	}
	return t, nil
}

func duplicateName(cols []Column) string {
	seen := make(map[string]bool, len(cols))
	for _, c := range cols {
		if seen[c.Name] {
			return c.Name
		}
		seen[c.Name] = true
	}
	return ""
}

// Path returns the path given to Open.
func (t *Table) Path() string { return t.path }

// Format returns the format the table is read as.
func (t *Table) Format() Format { return t.format }

// Columns returns the top-level columns in file order (for JSON: the keys of the first object).
func (t *Table) Columns() []Column { return append([]Column(nil), t.cols...) }

// NumRows returns the number of rows where the format records it (Parquet metadata, Arrow IPC
// message headers, save_to_disk shards) and false for CSV, JSON and text, which need a scan.
func (t *Table) NumRows() (int64, bool) { return t.nrows, t.known }

// Close marks the table closed: later scans fail. Scans hold their own file handles, so there is
// nothing else to release.
func (t *Table) Close() error {
	t.closed.Store(true)
	return nil
}

// ScanStrings streams one string column in row order, one Parquet row group / Arrow record batch
// / text record at a time (never the whole file), calling fn for each row; valid is false for a
// null. s may share memory with the reader's buffers: it is valid only during fn (strings.Clone
// it to keep it). A missing column is an error naming the file and listing the columns there
// are; a column of another type is an error naming its type. An error from fn stops the scan and
// is returned (wrapped).
func (t *Table) ScanStrings(ctx context.Context, column string, fn func(row int64, s string, valid bool) error) (err error) {
	if err := t.usable(); err != nil {
		return err
	}
	col, err := t.column(column, false)
	if err != nil {
		return err
	}
	if typ := t.cols[col].Type; typ != "string" && typ != "null" && t.format != FormatCSV {
		return fmt.Errorf("table: %s: column %q is %s, not string: %w", t.display, column, typ, ErrType)
	}
	defer recoverEdge(t.display, &err)
	return t.src.scanStrings(ctx, t, col, guardFn3(fn))
}

// ScanIntLists streams integer-list columns (list, large_list or fixed_size_list of any integer
// type; in CSV, cells like "[1, 2, 3]" as datasets.to_csv writes them) row by row: lists[i]
// belongs to columns[i] and is nil for a null. The slices are reused: valid only during fn. A
// name in optional that the file lacks yields nil in every row instead of an error (HF's
// attention_mask, labels and token_type_ids are optional). A value outside int32 is an error
// naming the file, row and column.
func (t *Table) ScanIntLists(ctx context.Context, columns []string, optional []string, fn func(row int64, lists [][]int32) error) (err error) {
	if err := t.usable(); err != nil {
		return err
	}
	if len(columns) == 0 {
		return fmt.Errorf("table: %s: ScanIntLists needs at least one column", t.display)
	}
	idx := make([]int, len(columns))
	present := 0
	for i, name := range columns {
		isOpt := false
		for _, o := range optional {
			isOpt = isOpt || o == name
		}
		if idx[i], err = t.column(name, isOpt); err != nil {
			return err
		}
		if idx[i] < 0 {
			continue
		}
		present++
		if typ := t.cols[idx[i]].Type; t.format != FormatCSV && !isIntListType(typ) {
			return fmt.Errorf("table: %s: column %q is %s, not a list of integers: %w", t.display, name, typ, ErrType)
		}
	}
	if present == 0 {
		return fmt.Errorf("table: %s: none of the columns %q is in the file (columns: %s): %w", t.display, columns, t.columnList(), ErrNoColumn)
	}
	defer recoverEdge(t.display, &err)
	return t.src.scanIntLists(ctx, t, idx, guardFn2(fn))
}

func (t *Table) usable() error {
	if t == nil || t.src == nil {
		return errors.New("table: scan of a nil or unopened Table")
	}
	if t.closed.Load() {
		return fmt.Errorf("table: %s: scan after Close: %w", t.display, os.ErrClosed)
	}
	return nil
}

// column returns the index of name in Columns; -1 with no error when optional and absent.
func (t *Table) column(name string, optional bool) (int, error) {
	for i, c := range t.cols {
		if c.Name == name {
			return i, nil
		}
	}
	if optional {
		return -1, nil
	}
	return -1, fmt.Errorf("table: %s: no column %q (columns: %s): %w", t.display, name, t.columnList(), ErrNoColumn)
}

func (t *Table) columnList() string {
	parts := make([]string, len(t.cols))
	for i, c := range t.cols {
		parts[i] = c.Name + " " + c.Type
	}
	return strings.Join(parts, ", ")
}

// isIntListType reports whether a normalized type name is a list of integers (or untyped: a JSON
// column whose first value was null or an empty list).
func isIntListType(typ string) bool {
	switch typ {
	case "null", "list<null>",
		"list<int8>", "list<int16>", "list<int32>", "list<int64>",
		"list<uint8>", "list<uint16>", "list<uint32>", "list<uint64>":
		return true
	}
	return false
}
