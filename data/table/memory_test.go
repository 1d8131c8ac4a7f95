package table

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// writeBigParquet writes about size bytes of incompressible text (rowBytes a row) and token
// lists with pqarrow, in row groups of rowsPerGroup rows; it returns the rows written.
func writeBigParquet(t *testing.T, path string, size, rowBytes, rowsPerGroup int) int64 {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	props := parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(int64(rowsPerGroup)),
		parquet.WithCompression(compress.Codecs.Snappy), parquet.WithDictionaryDefault(false))
	w, err := pqarrow.NewFileWriter(sc, f, props, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	// Rows are slices at random offsets of a 4 MiB pool of random letters: snappy finds no
	// repeats (its window is far smaller than the pool), so the file is as large as its text.
	rng := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _"
	pool := make([]byte, 4<<20)
	for i := 0; i < len(pool); i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			pool[i+j] = letters[(v>>(8*j))&63]
		}
	}
	var rows int64
	for written := 0; written < size; written += rowsPerGroup * (rowBytes + 16*4) {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		tb := b.Field(0).(*array.StringBuilder)
		lb := b.Field(1).(*array.ListBuilder)
		vb := lb.ValueBuilder().(*array.Int32Builder)
		for range rowsPerGroup {
			off := rng.IntN(len(pool) - rowBytes)
			tb.Append(string(pool[off : off+rowBytes]))
			lb.Append(true)
			for range 16 {
				vb.Append(rng.Int32N(50000))
			}
		}
		rec := b.NewRecordBatch()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rows += rec.NumRows()
		rec.Release()
		b.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestBoundedMemory scans a ~64 MiB Parquet file of 32 row groups and samples the heap in the
// callbacks: its growth stays far below the file (a scan holds one batch, never the file).
func TestBoundedMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.parquet")
	wantRows := writeBigParquet(t, path, 64<<20, 2048, 1024)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := tb.NumRows(); n != wantRows {
		t.Fatalf("NumRows %d, wrote %d", n, wantRows)
	}
	// A lower GC target makes HeapInuse follow what is live rather than when the collector last
	// ran; the bound asserted is still against the whole heap, test process included.
	defer debug.SetGCPercent(debug.SetGCPercent(25))
	runtime.GC()
	runtime.GC() // the second empties sync.Pools' victim caches
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, before := ms.HeapInuse, ms.TotalAlloc
	var peak uint64
	sample := func() {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
	}
	var rows, bytes int64
	err = tb.ScanStrings(context.Background(), "text", func(r int64, s string, valid bool) error {
		if r%128 == 0 {
			sample()
		}
		rows++
		bytes += int64(len(s))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := 0
	err = tb.ScanIntLists(context.Background(), []string{"input_ids"}, nil, func(r int64, l [][]int32) error {
		if r%128 == 0 {
			sample()
		}
		ids += len(l[0])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&ms)
	t.Logf("file %.1f MiB, %d rows, %.1f MiB of text, %d ids; heap in use %.1f MiB before the scans, peak %.1f MiB; %.1f MiB allocated in all",
		mib(st.Size()), rows, mib(bytes), ids, mib(int64(base)), mib(int64(peak)), mib(int64(ms.TotalAlloc-before)))
	if rows != wantRows || ids != int(wantRows)*16 {
		t.Fatalf("scanned %d rows and %d ids, wrote %d rows", rows, ids, wantRows)
	}
	// What the scans hold is the peak over the heap before them (which holds what earlier tests
	// left to pools, such as arrow-go's zstd encoders).
	if peak <= base || int64(peak-base) > st.Size()/4 {
		t.Fatalf("peak heap %.1f MiB over %.1f MiB before: more than a quarter of the %.1f MiB file", mib(int64(peak)), mib(int64(base)), mib(st.Size()))
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
