package tabletest

import (
	"fmt"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// Long is the string of size bytes WriteRepeatedParquet repeats: "aaa…az".
func Long(size int) string { return strings.Repeat("a", size-1) + "z" }

// WriteRepeatedParquet writes a Parquet file with one string column "text": small rows of "x"
// (DELTA_BYTE_ARRAY only) and then rows rows of Long(size), zstd-compressed, either as a
// dictionary (one entry and rows indices: a file of about a kilobyte that decodes to rows × size
// bytes) or DELTA_BYTE_ARRAY (each row the previous one's prefix: as small).
func WriteRepeatedParquet(path string, small, rows, size int, dict bool) error {
	if dict && small > 0 {
		return fmt.Errorf("tabletest: small rows are for DELTA_BYTE_ARRAY only")
	}
	long := Long(size)
	var typ arrow.DataType = arrow.BinaryTypes.String
	if dict {
		typ = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "text", Type: typ}}, nil)
	var col arrow.Array
	if dict {
		vb := array.NewStringBuilder(memory.DefaultAllocator)
		vb.Append(long)
		values := vb.NewArray()
		ib := array.NewInt32Builder(memory.DefaultAllocator)
		ib.AppendValues(make([]int32, rows), nil)
		indices := ib.NewArray()
		col = array.NewDictionaryArray(typ, indices, values)
		values.Release()
		indices.Release()
	} else {
		sb := array.NewStringBuilder(memory.DefaultAllocator)
		for range small {
			sb.Append("x")
		}
		for range rows {
			sb.Append(long)
		}
		col = sb.NewArray()
	}
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, int64(col.Len()))
	col.Release()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	props := []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Zstd), parquet.WithStats(false),
		parquet.WithDictionaryPageSizeLimit(int64(2 * size))}
	if !dict {
		props = append(props, parquet.WithDictionaryDefault(false), parquet.WithEncoding(parquet.Encodings.DeltaByteArray))
	}
	w, err := pqarrow.NewFileWriter(sc, f, parquet.NewWriterProperties(props...), pqarrow.DefaultWriterProps())
	if err != nil {
		f.Close()
		return err
	}
	if err := w.Write(rec); err != nil {
		w.Close()
		return err
	}
	return w.Close() // closes f
}
