package table

import (
	"fmt"
	"os"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// parquetSource reads a Parquet file one row group at a time, the footer parsed once at Open.
type parquetSource struct {
	path string
	size int64
	md   *metadata.FileMetaData
}

// readerProps streams column chunks through a small buffer (never a whole chunk in memory) and
// bounds the page sizes the file may claim, and every buffer arrow-go allocates (through mem).
func (s parquetSource) readerProps(opts Options, mem *cappedAllocator) *parquet.ReaderProperties {
	props := parquet.NewReaderProperties(mem)
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
	mem := newCappedAllocator(allocLimit(t.opts, size))
	rdr, err := file.NewParquetReader(f, file.WithReadProps(s.readerProps(t.opts, mem)))
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
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, mem)
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
