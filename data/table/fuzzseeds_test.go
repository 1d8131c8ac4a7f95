package table

import (
	"bytes"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// The fuzz targets' seeds: a few hundred bytes each (fuzz_test.go says why), covering what the
// fixtures do: nulls, empty lists, non-ASCII text; Parquet's codecs, dictionary and plain and
// DELTA_BYTE_ARRAY pages, v1 and v2 pages, several row groups, an ARROW:schema; Arrow's stream and
// file formats, dictionary batches and datasets' metadata; JSON lines and arrays; CSV quoting.

// seedRecord is three rows: text "a", null, "héllo"; input_ids [1 2], null, []. textType is the
// text column's type: string, large_string, or a dictionary of strings.
func seedRecord(textType arrow.DataType, meta map[string]string) arrow.RecordBatch {
	var md *arrow.Metadata
	if meta != nil {
		m := arrow.MetadataFrom(meta)
		md = &m
	}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "text", Type: textType, Nullable: true},
		{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, md)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	texts := []string{"a", "", "héllo"}
	for i, s := range texts {
		switch tb := b.Field(0).(type) {
		case *array.StringBuilder:
			if i == 1 {
				tb.AppendNull()
			} else {
				tb.Append(s)
			}
		case *array.LargeStringBuilder:
			if i == 1 {
				tb.AppendNull()
			} else {
				tb.Append(s)
			}
		case *array.BinaryDictionaryBuilder:
			if i == 1 {
				tb.AppendNull()
			} else if err := tb.AppendString(s); err != nil {
				panic(err)
			}
		}
	}
	lb := b.Field(1).(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.Int32Builder)
	lb.Append(true)
	vb.AppendValues([]int32{1, 2}, nil)
	lb.AppendNull()
	lb.Append(true)
	return b.NewRecordBatch()
}

var dictOfStrings = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}

// parquetSeeds writes the three seed rows with pqarrow in several layouts.
func parquetSeeds(f testing.TB) [][]byte {
	noStats := parquet.WithStats(false)
	layouts := []struct {
		text   arrow.DataType
		schema bool // store ARROW:schema
		props  []parquet.WriterProperty
	}{
		{arrow.BinaryTypes.String, false, []parquet.WriterProperty{noStats, parquet.WithCompression(compress.Codecs.Snappy)}},
		{arrow.BinaryTypes.String, false, []parquet.WriterProperty{noStats, parquet.WithCompression(compress.Codecs.Zstd),
			parquet.WithDictionaryDefault(false), parquet.WithDataPageVersion(parquet.DataPageV2)}},
		{arrow.BinaryTypes.String, false, []parquet.WriterProperty{noStats, parquet.WithCompression(compress.Codecs.Gzip),
			parquet.WithDictionaryDefault(false), parquet.WithEncodingFor("text", parquet.Encodings.DeltaByteArray)}},
		{arrow.BinaryTypes.LargeString, true, []parquet.WriterProperty{noStats, parquet.WithMaxRowGroupLength(2)}},
		{dictOfStrings, true, []parquet.WriterProperty{parquet.WithCompression(compress.Codecs.Zstd)}},
	}
	var seeds [][]byte
	for _, l := range layouts {
		rec := seedRecord(l.text, nil)
		var buf bytes.Buffer
		ap := pqarrow.DefaultWriterProps()
		if l.schema {
			ap = pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema())
		}
		w, err := pqarrow.NewFileWriter(rec.Schema(), &buf, parquet.NewWriterProperties(l.props...), ap)
		if err == nil {
			err = w.Write(rec)
		}
		if err == nil {
			err = w.Close()
		}
		rec.Release()
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	return seeds
}

// arrowSeeds writes the three seed rows as IPC streams (as datasets writes them, with its
// metadata) and files.
func arrowSeeds(f testing.TB) [][]byte {
	hf := map[string]string{"huggingface": `{"info":{"features":{"text":{"dtype":"string","_type":"Value"}}}}`}
	var seeds [][]byte
	for _, c := range []struct {
		text arrow.DataType
		meta map[string]string
		file bool
	}{
		{arrow.BinaryTypes.String, hf, false},
		{dictOfStrings, nil, false},
		{arrow.BinaryTypes.LargeString, nil, true},
	} {
		rec := seedRecord(c.text, c.meta)
		var buf bytes.Buffer
		var err error
		if c.file {
			var w *ipc.FileWriter
			if w, err = ipc.NewFileWriter(&buf, ipc.WithSchema(rec.Schema())); err == nil {
				if err = w.Write(rec); err == nil {
					err = w.Close()
				}
			}
		} else {
			w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()))
			if err = w.Write(rec); err == nil {
				err = w.Close()
			}
		}
		rec.Release()
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	return seeds
}

var jsonSeeds = [][]byte{
	[]byte("{\"text\": \"a\", \"input_ids\": [1, 2]}\n\n{\"input_ids\": []}\r\n{\"text\": \"\\u00e9\\n\", \"input_ids\": null, \"extra\": {\"k\": [1.5]}}"),
	[]byte(`[{"text": null, "input_ids": [[1]]}, {"text": "é", "te\u0078t": "dup"}, {"input_ids": [2147483648]}]`),
	[]byte("\ufeff{\"text\": 5, \"input_ids\": [-1, 0]}\n{\"text\": \"b\"} x\n"),
	[]byte(`{"text": "a", "n": [[[null, [true]]], {"a": [1e3]}]}`),
}

var csvSeeds = [][]byte{
	[]byte("text,input_ids\n\"a, \"\"b\"\"\nc\",\"[1, 2]\"\r\n\r\n,[]\nplain,\n"),
	[]byte("\ufefftext,input_ids\nx\"y,[2147483648]\n\"a\"b\",\"[1,]\"\n"),
}

// TestFuzzSeeds: the binary seeds are valid files of the three rows (a seed the reader refuses
// explores only the refusal), and small (fuzz_test.go says why).
func TestFuzzSeeds(t *testing.T) {
	for ext, seeds := range map[string][][]byte{"parquet": parquetSeeds(t), "arrow": arrowSeeds(t)} {
		for i, b := range seeds {
			p := writeFile(t, "seed."+ext, string(b))
			rows, err := readEverything(p, fuzzOpts)
			t.Logf("%s seed %d: %d bytes, %d rows: %v", ext, i, len(b), rows, err)
			if err != nil || rows != 3 {
				t.Errorf("%s seed %d: %d rows: %v", ext, i, rows, err)
			}
			if len(b) > 1<<10 {
				t.Errorf("%s seed %d: %d bytes, more than 1 KiB", ext, i, len(b))
			}
		}
	}
	for i, b := range append(append([][]byte{}, jsonSeeds...), csvSeeds...) {
		if len(b) > 1<<10 {
			t.Errorf("text seed %d: %d bytes, more than 1 KiB", i, len(b))
		}
	}
}
