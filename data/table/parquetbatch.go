package table

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// How Parquet batches are sized. The metadata says how many bytes a column chunk's pages hold
// uncompressed, not how many its rows decode to: a dictionary page of one 1 MiB string and 5,000
// one-byte indices decode to 5 GB, and so do DELTA_BYTE_ARRAY prefixes or run-length levels.
// So batches are sized from the rows already decoded, not from the metadata: a row group starts
// with a few rows, each batch takes batchBytes over the decoded bytes a row of the one before
// (at most twice its rows), and every batch is held to a budget charged before arrow-go
// allocates. A batch of several rows past its budget is read again a row at a time; only one row
// past its own, larger, budget is an error. Columns whose pages are all dictionary-encoded are
// read as dictionaries: the rows share the dictionary's strings instead of copying them.
const (
	// batchBytes is the decoded size a batch aims at.
	batchBytes = 2 << 20
	// maxBatchRows bounds the rows of one batch of small cells.
	maxBatchRows = 4096
	// firstBatchRows is where a row group's batches start, whatever the metadata suggests.
	firstBatchRows = 16
	// rowsBudget bounds what a batch of several rows may allocate: 32 times what it aims at.
	rowsBudget = 32 * batchBytes
	// maxRereads bounds how often one row group is read again after a batch outgrew its budget;
	// each rereads the rows before (Parquet pages are not seekable by row without an index).
	maxRereads = 4
)

// rowBudget bounds what a batch of one row may allocate: the allocator's bound on one buffer
// without the file's size (a row's cells are at most MaxCellBytes; decoding one takes its page
// and its builder's buffers).
func rowBudget(opts Options) int64 { return int64(allocLimit(opts, 0)) }

var (
	// errBudget: a batch outgrew its budget (the allocator refused before allocating).
	errBudget = errors.New("batch budget spent")
	// errShort: a column gave fewer rows than asked for.
	errShort = errors.New("fewer rows than the metadata counts")
)

// batches implements batchSource: each row group in turn, in batches of about batchBytes decoded.
func (s parquetSource) batches(ctx context.Context, t *Table, names []string, fn batchFn) (err error) {
	defer recoverAt(s.path, &err)
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	defer f.Close()
	mem := newCappedAllocator(allocLimit(t.opts, s.size))
	rdr, err := file.NewParquetReader(f, file.WithReadProps(s.readerProps(t.opts, mem)), file.WithMetadata(s.md))
	if err != nil {
		return fmt.Errorf("table: %s: %w (%w)", s.path, err, ErrCorrupt)
	}
	plain, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, mem)
	if err != nil {
		return fmt.Errorf("table: %s: %w (%w)", s.path, err, ErrCorrupt)
	}
	leaves, err := leavesOf(plain, names)
	if err != nil {
		return fmt.Errorf("table: %s: %w", s.path, err)
	}
	var dict *pqarrow.FileReader
	strs := stringLeaves(plain, names)
	if len(strs) > 0 {
		var props pqarrow.ArrowReadProperties
		for _, leaf := range strs {
			props.SetReadDict(leaf, true)
		}
		if dict, err = pqarrow.NewFileReader(rdr, props, mem); err != nil {
			return fmt.Errorf("table: %s: %w (%w)", s.path, err, ErrCorrupt)
		}
	}
	g := rowGroupScan{s: s, opts: t.opts, mem: mem, leaves: leaves, fn: fn}
	for rg := 0; rg < s.md.NumRowGroups(); rg++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		g.fr = plain
		if dict != nil && s.dictionaryOnly(rg, strs) {
			g.fr = dict
		}
		n, err := g.read(ctx, rg)
		if err != nil {
			return err
		}
		g.base += n
	}
	return nil
}

// stringLeaves returns the leaves of the top-level string (or binary) columns named: those a
// dictionary read applies to.
func stringLeaves(fr *pqarrow.FileReader, names []string) []int {
	var leaves []int
	for i := range fr.Manifest.Fields {
		f := &fr.Manifest.Fields[i]
		if f.Field == nil || !f.IsLeaf() {
			continue
		}
		if typ := typeName(f.Field.Type); typ != "string" && typ != "binary" {
			continue
		}
		for _, name := range names {
			if f.Field.Name == name {
				leaves = append(leaves, f.ColIndex)
			}
		}
	}
	return leaves
}

// Page types of parquet.thrift (arrow-go keeps its enum internal).
const (
	pageData   = 0
	pageDataV2 = 3
)

// dictionaryOnly reports whether, by the metadata's page encoding statistics, every data page
// of the leaves in row group rg is dictionary-encoded. Reading a chunk with plain pages as a
// dictionary would hash each of their values into a dictionary that grows with the chunk; a
// file whose statistics lie is still held to the batch budgets.
func (s parquetSource) dictionaryOnly(rg int, leaves []int) bool {
	for _, leaf := range leaves {
		cc, err := s.md.RowGroup(rg).ColumnChunk(leaf)
		if err != nil {
			return false
		}
		data := 0
		for _, st := range cc.EncodingStats() {
			switch int32(st.PageType) {
			case pageData, pageDataV2:
				if st.Encoding != parquet.Encodings.RLEDict && st.Encoding != parquet.Encodings.PlainDict {
					return false
				}
				data++
			}
		}
		if data == 0 {
			return false
		}
	}
	return true
}

// rowGroupScan reads the row groups of one scan.
type rowGroupScan struct {
	s      parquetSource
	opts   Options
	fr     *pqarrow.FileReader
	mem    *cappedAllocator
	leaves []int
	base   int64 // the table row of the row group's first row
	fn     batchFn
}

// read reads row group rg in batches, calling fn with each; it returns the rows read.
func (g *rowGroupScan) read(ctx context.Context, rg int) (int64, error) {
	rows := g.s.md.RowGroup(rg).NumRows()
	if rows == 0 {
		return 0, nil
	}
	next := min(g.estimate(rg, rows), firstBatchRows)
	var sizes []int64 // of the batches delivered: skipped when the row group is read again
	var n int64       // the rows delivered
	for rereads := 0; ; rereads++ {
		rd, err := g.open(ctx, rg)
		if err != nil {
			return n, err
		}
		var at int64
		for _, k := range sizes { // the same batches as before, within the same budgets
			var rec arrow.RecordBatch
			if rec, err = g.batch(rd, rg, at, k); err != nil {
				break
			}
			rec.Release()
			at += k
		}
		for err == nil && at < rows {
			if err = ctx.Err(); err != nil {
				break
			}
			want := min(next, rows-at)
			var rec arrow.RecordBatch
			if rec, err = g.batch(rd, rg, at, want); err != nil {
				break
			}
			decoded := decodedSize(rec)
			err = g.fn(g.s.path, g.base+at, rec)
			rec.Release()
			if err != nil {
				break
			}
			at += want
			n += want
			sizes = append(sizes, want)
			next = min(max(batchBytes/max(decoded/want, 1), 1), 2*want, maxBatchRows)
		}
		if err == nil {
			err = g.exhausted(rd, rg, rows)
		}
		rd.release()
		if !errors.Is(err, errBudget) {
			return n, err
		}
		if rereads == maxRereads {
			return n, fmt.Errorf("table: %s: row group %d, rows from %d: read again %d times, batches of them still decode to more than a batch may take (%d bytes, %d in one buffer): %w",
				g.s.path, rg, g.base+n, maxRereads, rowsBudget, g.mem.limit, ErrTooLarge)
		}
		next = 1 // read the row group again, from row n a row at a time at first
	}
}

// exhausted checks that the row group holds no row past the rows its metadata counts.
func (g *rowGroupScan) exhausted(rd *rowGroupReader, rg int, rows int64) error {
	rec, err := g.batch(rd, rg, rows, 1)
	switch {
	case err == nil:
		rec.Release()
		return fmt.Errorf("table: %s: row group %d gives more rows than the %d of its metadata: %w", g.s.path, rg, rows, ErrCorrupt)
	case errors.Is(err, errShort):
		return nil
	}
	return err
}

// estimate is the metadata's guess of the rows of batchBytes: right for plain pages, far too
// many for pages that decode to more than they hold.
func (g *rowGroupScan) estimate(rg int, rows int64) int64 {
	var bytes int64
	for _, leaf := range g.leaves {
		if cc, err := g.s.md.RowGroup(rg).ColumnChunk(leaf); err == nil {
			bytes += max(cc.TotalUncompressedSize(), 0)
		}
	}
	return min(max(batchBytes/max(bytes/rows, 1), 1), maxBatchRows)
}

// rowGroupReader reads the fields of one row group.
type rowGroupReader struct {
	readers []*pqarrow.ColumnReader
	schema  *arrow.Schema
}

func (g *rowGroupScan) open(ctx context.Context, rg int) (*rowGroupReader, error) {
	readers, sc, err := g.fr.GetFieldReaders(ctx, g.leaves, []int{rg})
	if err != nil {
		return nil, fmt.Errorf("table: %s: row group %d: %w (%w)", g.s.path, rg, err, ErrCorrupt)
	}
	return &rowGroupReader{readers: readers, schema: sc}, nil
}

func (rd *rowGroupReader) release() {
	for _, r := range rd.readers {
		r.Release()
	}
}

// batch reads the next want rows (from row at of row group rg) of every field into one record,
// within the budget of a batch of that many rows.
func (g *rowGroupScan) batch(rd *rowGroupReader, rg int, at, want int64) (rec arrow.RecordBatch, err error) {
	budget := int64(rowsBudget)
	if want == 1 {
		budget = rowBudget(g.opts)
	}
	cols := make([]arrow.Array, 0, len(rd.readers))
	defer func() {
		g.mem.startBatch(0, 0)
		if r := recover(); r != nil {
			ae, ok := r.(allocError)
			if !ok || !ae.batch {
				panic(r)
			}
			err = errBudget
			if want == 1 {
				err = fmt.Errorf("table: %s: row group %d, row %d: decoding the row takes more than %d bytes (4 × MaxCellBytes + 32 MiB): %w",
					g.s.path, rg, g.base+at, budget, ErrTooLarge)
			}
		}
		if err != nil {
			releaseAll(cols)
		}
	}()
	g.mem.startBatch(budget, want)
	for i, r := range rd.readers {
		chunks, err := r.NextBatch(want)
		if err != nil {
			return nil, fmt.Errorf("table: %s: row group %d, after row %d: %w (%w)", g.s.path, rg, g.base+at, err, ErrCorrupt)
		}
		arr, err := oneArray(chunks, g.mem)
		chunks.Release()
		if err != nil {
			return nil, fmt.Errorf("table: %s: row group %d, after row %d: %w (%w)", g.s.path, rg, g.base+at, err, ErrCorrupt)
		}
		cols = append(cols, arr)
		if int64(arr.Len()) != want {
			return nil, fmt.Errorf("table: %s: row group %d, column %q: %d rows from row %d where %d were asked for (the metadata counts %d in the row group): %w (%w)",
				g.s.path, rg, rd.schema.Field(i).Name, arr.Len(), g.base+at, want, g.s.md.RowGroup(rg).NumRows(), errShort, ErrCorrupt)
		}
	}
	rec = array.NewRecordBatch(rd.schema, cols, want)
	releaseAll(cols)
	cols = nil
	return rec, nil
}

// oneArray returns the chunks of one batch as one array (arrow-go splits a batch only where a
// string builder outgrows 32-bit offsets).
func oneArray(chunks *arrow.Chunked, mem *cappedAllocator) (arrow.Array, error) {
	switch c := chunks.Chunks(); len(c) {
	case 0:
		return array.MakeArrayOfNull(mem, chunks.DataType(), 0), nil
	case 1:
		c[0].Retain()
		return c[0], nil
	default:
		return array.Concatenate(c, mem)
	}
}

func releaseAll(arrs []arrow.Array) {
	for _, a := range arrs {
		a.Release()
	}
}

// decodedSize is the bytes of rec's buffers, without dictionaries (shared by the batches of a
// chunk, and not what more rows would add).
func decodedSize(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += dataSize(c.Data())
	}
	return n
}

func dataSize(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataSize(c)
	}
	return n
}
