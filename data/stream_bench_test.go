package data_test

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/table"
	"github.com/gotpu/gotpu/internal/procstat"
)

const (
	// benchParquetOut, set in the environment of a re-executed test binary, makes
	// BenchmarkStreamParquet3GB write the Parquet file there and return: the generator's memory
	// is another process's, not counted in the measured peak RSS.
	benchParquetOut = "GOTPU_BENCH_PARQUET_OUT"
	// benchParquetGB overrides the file's size in GB (10^9 bytes of tokens; default 3).
	benchParquetGB = "GOTPU_BENCH_PARQUET_GB"

	benchSeqLen       = 1024
	benchRowsPerGroup = 64 << 20 / (4 * benchSeqLen) // ~64 MiB of int32 tokens a row group
	benchVocab        = 50257
	benchSeed         = 7
	benchBatch        = 8
)

// benchRow fills ids with row r's tokens: a function of the row alone, so the loader's batches
// can be checked against it without keeping the file's contents.
func benchRow(pcg *rand.PCG, r int64, ids []int32) {
	pcg.Seed(benchSeed, uint64(r))
	rng := rand.New(pcg)
	for j := range ids {
		ids[j] = int32(rng.IntN(benchVocab))
	}
}

// BenchmarkStreamParquet3GB streams a ~3 GB Parquet file of pre-tokenized rows (input_ids,
// list<int32> of 1024 tokens, ~64 MiB row groups, snappy, plain encoding so the file is as large
// as its tokens) through data/table into a disk-backed TokenStore, then runs a shuffled Loader
// (batch 8, CausalLMCollator 1024, PrefetchFactor 2) over one whole epoch (every row, in shuffled
// order), checking every row against the generator. It reports the peak RSS of this
// process over build and load against the file's size: the claim is that memory stays bounded,
// far below the file. The file is written by a child process first (not timed, not counted).
// About 3 minutes on 2 cores and ~6 GB of temporary disk at 3 GB; run by `make bench`, never by
// `go test ./...`.
func BenchmarkStreamParquet3GB(b *testing.B) {
	if out := os.Getenv(benchParquetOut); out != "" {
		if err := writeBenchParquet(out, benchGB(b)); err != nil {
			b.Fatal(err)
		}
		return
	}
	if bench := flag.Lookup("test.bench"); bench == nil || !strings.Contains(bench.Value.String(), "StreamParquet") {
		b.Skip("writes ~6 GB to the temporary directory and runs minutes: select it by name (-bench StreamParquet3GB, as make bench does)")
	}
	if runtime.GOOS != "linux" {
		b.Skip("peak RSS is read from /proc/self/status (Linux)")
	}
	ctx := context.Background()
	dir := b.TempDir()
	path := filepath.Join(dir, "train.parquet")
	genStart := time.Now()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^$", "-test.bench=^BenchmarkStreamParquet3GB$", "-test.benchtime=1x")
	child.Env = append(os.Environ(), benchParquetOut+"="+path)
	if out, err := child.CombinedOutput(); err != nil {
		b.Fatalf("generating %s in a child process: %v\n%s", path, err, out)
	}
	st, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	fileBytes := st.Size()
	b.Logf("generated %s: %.2f GB in %.0f s (child process)", path, float64(fileBytes)/1e9, time.Since(genStart).Seconds())

	b.ResetTimer()
	for range b.N {
		runtime.GC()
		if err := procstat.ResetPeakRSS(); err != nil {
			b.Fatalf("resetting the peak RSS (VmHWM): %v", err)
		}
		base := rssReading(b, "VmRSS", procstat.CurrentRSS())

		start := time.Now()
		store := buildBenchStore(ctx, b, path, dir)
		buildSec := time.Since(start).Seconds()
		buildPeak := rssReading(b, "VmHWM", procstat.PeakRSS())

		// The loader's own peak: reset again, with the build's garbage returned to the OS first,
		// so that its figure is not the build's.
		runtime.GC()
		if err := procstat.ResetPeakRSS(); err != nil {
			b.Fatalf("resetting the peak RSS (VmHWM): %v", err)
		}
		start = time.Now()
		batches := runBenchLoader(ctx, b, store)
		loadSec := time.Since(start).Seconds()
		loadPeak := rssReading(b, "VmHWM", procstat.PeakRSS())
		peak := max(buildPeak, loadPeak)
		rows, tokens := store.Len(), store.Tokens()
		if err := store.Close(); err != nil {
			b.Fatal(err)
		}

		peakMiB := float64(peak) / (1 << 20)
		ratio := float64(peak) / float64(fileBytes)
		b.ReportMetric(float64(fileBytes)/1e9, "file_GB")
		b.ReportMetric(peakMiB, "peak_RSS_MiB")
		b.ReportMetric(ratio, "peak_RSS/file")
		b.ReportMetric(float64(fileBytes)/1e6/buildSec, "build_MB/s")
		b.ReportMetric(float64(batches)/loadSec, "batches/s")
		b.Logf("file %.2f GB (%d rows, %d tokens); RSS %.0f MiB before; peak RSS %.0f MiB building the store, %.0f MiB over %d loader batches; peak %.0f MiB = %.3f of the file; build %.1f s = %.0f MB/s; loader %.1f s = %.0f batches/s",
			float64(fileBytes)/1e9, rows, tokens, float64(base)/(1<<20), float64(buildPeak)/(1<<20), float64(loadPeak)/(1<<20), batches,
			peakMiB, ratio, buildSec, float64(fileBytes)/1e6/buildSec, loadSec, float64(batches)/loadSec)
	}
}

// buildBenchStore streams the file's input_ids into a TokenStore in dir.
func buildBenchStore(ctx context.Context, b *testing.B, path, dir string) *data.TokenStore {
	tbl, err := table.Open(path, table.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer tbl.Close()
	builder, err := data.NewTokenStoreBuilder(data.StoreOptions{Dir: dir, MaxSeqLength: benchSeqLen, Source: filepath.Base(path)})
	if err != nil {
		b.Fatal(err)
	}
	err = tbl.ScanIntLists(ctx, []string{"input_ids"}, nil, func(_ int64, lists [][]int32) error {
		return builder.Add(data.Example{InputIDs: lists[0]}) // Add copies
	})
	if err != nil {
		builder.Abort()
		b.Fatal(err)
	}
	store, err := builder.Finish()
	if err != nil {
		b.Fatal(err)
	}
	return store
}

// runBenchLoader takes one epoch of shuffled batches, checks every row against benchRow and
// returns how many batches it took.
func runBenchLoader(ctx context.Context, b *testing.B, store *data.TokenStore) int {
	cfg := data.LoaderConfig{
		Dataset:        store,
		Collator:       data.CausalLMCollator{BlockSize: benchSeqLen},
		Sampler:        data.Sampler{NumExamples: store.Len(), GlobalBatch: benchBatch, Seed: 42, Shuffle: true},
		NumReplicas:    1,
		PrefetchFactor: 2,
		NumWorkers:     1,
	}
	l, err := data.NewLoader(ctx, cfg, data.State{Seed: 42})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	want := make([]int32, benchSeqLen)
	var pcg rand.PCG
	batches := cfg.Sampler.BatchesPerEpoch()
	for range batches {
		s, err := l.Next(ctx)
		if err != nil {
			b.Fatal(err)
		}
		batch := s.Shards[0]
		if batch.Size != benchBatch || batch.SeqLen != benchSeqLen {
			b.Fatalf("batch [%d,%d]", batch.Size, batch.SeqLen)
		}
		for i, row := range batch.Indices {
			benchRow(&pcg, int64(row), want)
			got := batch.InputIDs[i*benchSeqLen : (i+1)*benchSeqLen]
			for j := range want {
				if got[j] != want[j] {
					b.Fatalf("epoch %d batch %d: row %d token %d is %d, the file holds %d", s.Epoch, s.Batch, row, j, got[j], want[j])
				}
			}
		}
	}
	return batches
}

func benchGB(b *testing.B) float64 {
	s := os.Getenv(benchParquetGB)
	if s == "" {
		return 3
	}
	gb, err := strconv.ParseFloat(s, 64)
	if err != nil || gb <= 0 {
		b.Fatalf("%s=%q: want a positive number of GB", benchParquetGB, s)
	}
	return gb
}

// rssReading fails the benchmark where a procstat reading of /proc/self/status's name line is
// missing (0) and returns it in bytes.
func rssReading(b *testing.B, name string, v uint64) uint64 {
	b.Helper()
	if v == 0 {
		b.Fatalf("/proc/self/status has no %s line in kB", name)
	}
	return v
}

// countingWriter counts the bytes written through it.
type countingWriter struct {
	w *bufio.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// writeBenchParquet writes row groups of benchRowsPerGroup rows of benchRow tokens (one Write
// each), snappy-compressed, without dictionary encoding (random ids leave snappy little to
// compress), until the file holds gb × 10^9 bytes.
func writeBenchParquet(path string, gb float64) error {
	target := int64(gb * 1e9)
	schema := arrow.NewSchema([]arrow.Field{{Name: "input_ids", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}}, nil)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := &countingWriter{w: bufio.NewWriterSize(f, 4<<20)}
	props := parquet.NewWriterProperties(
		parquet.WithCompression(compress.Codecs.Snappy),
		parquet.WithDictionaryDefault(false),
		parquet.WithMaxRowGroupLength(benchRowsPerGroup),
	)
	fw, err := pqarrow.NewFileWriter(schema, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return err
	}
	mem := memory.NewGoAllocator()
	ids := make([]int32, benchSeqLen)
	var pcg rand.PCG
	for first := int64(0); w.n < target; first += benchRowsPerGroup {
		n := int64(benchRowsPerGroup)
		lb := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int32)
		vb := lb.ValueBuilder().(*array.Int32Builder)
		lb.Reserve(int(n))
		vb.Reserve(int(n) * benchSeqLen)
		for r := first; r < first+n; r++ {
			benchRow(&pcg, r, ids)
			lb.Append(true)
			vb.AppendValues(ids, nil)
		}
		col := lb.NewArray()
		lb.Release()
		rec := array.NewRecordBatch(schema, []arrow.Array{col}, n)
		err := fw.Write(rec)
		rec.Release()
		col.Release()
		if err != nil {
			return fmt.Errorf("writing rows from %d: %w", first, err)
		}
	}
	if err := fw.Close(); err != nil {
		return err
	}
	if err := w.w.Flush(); err != nil {
		return err
	}
	return f.Close()
}
