//go:build linux

package checkpoint

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkSave compares, in the same run and on the same disk, the throughput of committing a
// 512 MiB checkpoint (two files, checksummed, fsynced, renamed) with a plain os.File write + fsync
// of the same bytes (each measurement starts after sync(2), so neither pays for the other's
// write-back), and the time a caller is blocked by an async Save versus a synchronous one.
//
//	go test -run XXX -bench BenchmarkSave -benchtime 3x ./checkpoint/
func BenchmarkSave(b *testing.B) {
	const size = 512 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	mb := float64(size) / (1 << 20)
	dir := b.TempDir()
	snap := func(step int) Snapshot {
		return Snapshot{Step: step, Files: []File{{Name: "model.safetensors", Data: data[:size/2]}, {Name: "optimizer.safetensors", Data: data[size/2:]}}}
	}
	var raw, commit, asyncBlocked, syncBlocked time.Duration
	for i := range b.N {
		// The checkpoint first, then a plain sequential write + fsync of the same bytes.
		syscall.Sync() // each measurement starts with no dirty pages of the previous one
		t0 := time.Now()
		if _, err := Commit(dir, snap(i)); err != nil {
			b.Fatal(err)
		}
		commit += time.Since(t0)

		p := filepath.Join(dir, "raw")
		syscall.Sync()
		t0 = time.Now()
		f, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		f.Close()
		raw += time.Since(t0)
		os.Remove(p)

		for _, sync := range []bool{false, true} {
			w, err := NewWriter(WriterConfig{OutputDir: dir, SaveTotalLimit: 1, Sync: sync})
			if err != nil {
				b.Fatal(err)
			}
			syscall.Sync()
			t0 = time.Now()
			if err := w.Save(context.Background(), snap(1000+i)); err != nil {
				b.Fatal(err)
			}
			if sync {
				syncBlocked += time.Since(t0)
			} else {
				asyncBlocked += time.Since(t0)
			}
			if err := w.Close(); err != nil {
				b.Fatal(err)
			}
		}
	}
	n := float64(b.N)
	b.ReportMetric(mb*n/raw.Seconds(), "raw_MB/s")
	b.ReportMetric(mb*n/commit.Seconds(), "save_MB/s")
	b.ReportMetric(raw.Seconds()/commit.Seconds(), "save/raw")
	b.ReportMetric(asyncBlocked.Seconds()/n*1e3, "async_blocked_ms")
	b.ReportMetric(syncBlocked.Seconds()/n*1e3, "sync_blocked_ms")
}
