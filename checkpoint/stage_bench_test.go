package checkpoint

import (
	"bufio"
	"bytes"
	"io"
	"runtime"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
)

// BenchmarkStage measures the host memory and time of writing 32 tensors of 4 MiB and one of
// 16 MiB (144 MiB): staged tensor by tensor (SafetensorsFile) against staging every tensor on
// the host first and writing them then (the trainer's path before TensorSource), both into a
// write buffer of hashChunk over io.Discard, and a whole save to disk (Commit: fsyncs, checksum,
// manifest). alloc_MiB/op is the Go heap allocated per save (TotalAlloc), an upper bound on the
// host memory a save holds at once beyond the tensors' own.
//
//	go test -run XXX -bench BenchmarkStage -benchtime 5x ./checkpoint/
func BenchmarkStage(b *testing.B) {
	src := bigSource(32)
	var sum int64
	for _, d := range src.data {
		sum += int64(len(d))
	}
	md := map[string]string{"format": "pt"}
	f, err := SafetensorsFile("model.safetensors", src, md)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(io.Discard, hashChunk)
	run := func(b *testing.B, save func(i int) error) {
		b.SetBytes(sum)
		b.ReportAllocs()
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		for i := 0; b.Loop(); i++ {
			if err := save(i); err != nil {
				b.Fatal(err)
			}
		}
		runtime.ReadMemStats(&m1)
		b.ReportMetric(float64(m1.TotalAlloc-m0.TotalAlloc)/float64(b.N)/(1<<20), "alloc_MiB/op")
		b.ReportMetric(float64(sum)/(1<<20), "tensors_MiB")
	}
	b.Run("tensor_by_tensor", func(b *testing.B) {
		run(b, func(int) error { return f.WriteTo(bw) })
	})
	b.Run("host_staged_first", func(b *testing.B) {
		run(b, func(int) error {
			specs := src.specs()
			for i := range specs {
				specs[i].Data = bytes.Clone(specs[i].Data)
			}
			return safetensors.Write(bw, specs, md)
		})
	})
	b.Run("commit", func(b *testing.B) {
		dir := b.TempDir()
		run(b, func(i int) error {
			_, err := Commit(dir, Snapshot{Step: i, Files: []File{f}})
			if err == nil {
				_, err = Prune(dir, 1)
			}
			return err
		})
	})
}
