package table

import (
	"context"
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// batchBytes is the decoded size a Parquet record batch aims at: the rows per batch are this
// over the row group's uncompressed bytes per row (from the column chunk metadata), so long
// documents make short batches and memory stays near this whatever the rows hold.
const batchBytes = 2 << 20

// maxBatchRows bounds the rows of one batch of small cells.
const maxBatchRows = 4096

// parquetSource reads a Parquet file one row group at a time, the footer parsed once at Open.
type parquetSource struct {
	path string
	size int64
	md   *metadata.FileMetaData
}

// readerProps streams column chunks through a small buffer (never a whole chunk in memory) and
// bounds the page sizes the file may claim, and every buffer arrow-go allocates.
func (s parquetSource) readerProps(opts Options) *parquet.ReaderProperties {
	props := parquet.NewReaderProperties(newCappedAllocator(allocLimit(opts, s.size)))
	props.BufferedStreamEnabled = true
	props.BufferSize = 1 << 20
	props.MaxCompressedPageSize = min(s.size, parquet.DefaultMaxCompressedPageSize+int64(opts.MaxCellBytes))
	// Writers aim pages at about 1 MiB; a page also holds at least one whole cell. Twice the
	// largest cell plus 16 MiB leaves room for both; a larger claim is refused as corrupt.
	props.MaxUncompressedPageSize = 2*int64(opts.MaxCellBytes) + 16<<20
	return props
}

func openParquet(t *Table, size int64) error {
	s := parquetSource{path: t.path, size: size}
	f, err := os.Open(t.path)
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	defer f.Close()
	rdr, err := file.NewParquetReader(f, file.WithReadProps(s.readerProps(t.opts)))
	if err != nil {
		return fmt.Errorf("table: %s: not a readable Parquet file: %w (%w)", t.path, err, ErrCorrupt)
	}
	s.md = rdr.MetaData()
	if err := checkParquetMetadata(s.md); err != nil {
		return fmt.Errorf("table: %s: %w", t.path, err)
	}
	if kv := s.md.KeyValueMetadata(); kv != nil {
		if err := verifyParquetArrowSchema(kv.FindValue("ARROW:schema")); err != nil {
			return fmt.Errorf("table: %s: the ARROW:schema metadata: %w", t.path, err)
		}
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, newCappedAllocator(allocLimit(t.opts, size)))
	if err != nil {
		return fmt.Errorf("table: %s: Parquet schema: %w (%w)", t.path, err, ErrCorrupt)
	}
	sc, err := fr.Schema()
	if err != nil {
		return fmt.Errorf("table: %s: Parquet schema: %w (%w)", t.path, err, ErrCorrupt)
	}
	t.cols = columnsOf(sc)
	t.nrows, t.known = s.md.NumRows, true
	t.src = batchScanner{s}
	return nil
}

// checkParquetMetadata checks the claims the scan relies on: row counts that add up.
func checkParquetMetadata(md *metadata.FileMetaData) error {
	var sum int64
	for i := 0; i < md.NumRowGroups(); i++ {
		n := md.RowGroup(i).NumRows()
		if n < 0 || sum+n < sum {
			return fmt.Errorf("row group %d claims %d rows: %w", i, n, ErrCorrupt)
		}
		sum += n
	}
	if sum != md.NumRows {
		return fmt.Errorf("the row groups hold %d rows, the footer says %d: %w", sum, md.NumRows, ErrCorrupt)
	}
	return nil
}

// leavesOf returns the Parquet leaf columns under the top-level fields named.
func leavesOf(fr *pqarrow.FileReader, names []string) ([]int, error) {
	var leaves []int
	var walk func(f *pqarrow.SchemaField)
	walk = func(f *pqarrow.SchemaField) {
		if f.IsLeaf() {
			leaves = append(leaves, f.ColIndex)
		}
		for i := range f.Children {
			walk(&f.Children[i])
		}
	}
	for _, name := range names {
		found := false
		for i := range fr.Manifest.Fields {
			if f := &fr.Manifest.Fields[i]; f.Field != nil && f.Field.Name == name {
				walk(f)
				found = true
			}
		}
		if !found {
			return nil, fmt.Errorf("column %q has no Parquet leaves: %w", name, ErrCorrupt)
		}
	}
	return leaves, nil
}

// batches implements batchSource: each row group in turn, in batches of about batchBytes.
func (s parquetSource) batches(ctx context.Context, t *Table, names []string, fn batchFn) (err error) {
	defer recoverAt(s.path, &err)
	f, err := os.Open(s.path)
	if err != nil {
		return fmt.Errorf("table: %w", err)
	}
	defer f.Close()
	rdr, err := file.NewParquetReader(f, file.WithReadProps(s.readerProps(t.opts)), file.WithMetadata(s.md))
	if err != nil {
		return fmt.Errorf("table: %s: %w (%w)", s.path, err, ErrCorrupt)
	}
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, newCappedAllocator(allocLimit(t.opts, s.size)))
	if err != nil {
		return fmt.Errorf("table: %s: %w (%w)", s.path, err, ErrCorrupt)
	}
	leaves, err := leavesOf(fr, names)
	if err != nil {
		return fmt.Errorf("table: %s: %w", s.path, err)
	}
	var base int64
	for rg := 0; rg < s.md.NumRowGroups(); rg++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, err := s.rowGroup(ctx, fr, rg, leaves, base, fn)
		if err != nil {
			return err
		}
		if want := s.md.RowGroup(rg).NumRows(); n != want {
			return fmt.Errorf("table: %s: row group %d gave %d rows, its metadata says %d: %w", s.path, rg, n, want, ErrCorrupt)
		}
		base += n
	}
	return nil
}

func (s parquetSource) rowGroup(ctx context.Context, fr *pqarrow.FileReader, rg int, leaves []int, base int64, fn batchFn) (int64, error) {
	meta := s.md.RowGroup(rg)
	rows := meta.NumRows()
	if rows == 0 {
		return 0, nil
	}
	var bytes int64
	for _, leaf := range leaves {
		cc, err := meta.ColumnChunk(leaf)
		if err != nil {
			return 0, fmt.Errorf("table: %s: row group %d, column %d: %w (%w)", s.path, rg, leaf, err, ErrCorrupt)
		}
		bytes += max(cc.TotalUncompressedSize(), 0)
	}
	fr.Props.BatchSize = min(max(batchBytes/max(bytes/rows, 1), 1), maxBatchRows)
	rr, err := fr.GetRecordReader(ctx, leaves, []int{rg})
	if err != nil {
		return 0, fmt.Errorf("table: %s: row group %d: %w (%w)", s.path, rg, err, ErrCorrupt)
	}
	defer rr.Release()
	var n int64
	for rr.Next() {
		rec := rr.RecordBatch()
		if err := ctx.Err(); err != nil {
			return n, err
		}
		if n+rec.NumRows() > rows {
			return n, fmt.Errorf("table: %s: row group %d gave more rows than the %d of its metadata: %w", s.path, rg, rows, ErrCorrupt)
		}
		if err := fn(s.path, base+n, rec); err != nil {
			return n, err
		}
		n += rec.NumRows()
	}
	if err := rr.Err(); err != nil {
		return n, fmt.Errorf("table: %s: row group %d, after row %d: %w (%w)", s.path, rg, base+n, err, ErrCorrupt)
	}
	return n, nil
}
