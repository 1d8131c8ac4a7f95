package tokenizer

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// allocatedBy returns the bytes f allocates on the heap (TotalAlloc, which only grows).
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// gzipBomb is a valid tokenizer.json followed by n MiB of spaces (JSON white space), as a
// multi-member gzip of about one kilobyte per MiB: issue 16's "1 MB gzip expanding to 1 GiB".
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	member := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b)
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	spaces := member(bytes.Repeat([]byte{' '}, 1<<20))
	out := member([]byte(baseJSON))
	for range n {
		out = append(out, spaces...)
	}
	return out
}

// TestGzipBombRefused (issue 16, row 4): a 1 MB gzip expanding to 1 GiB of valid tokenizer.json
// was accepted at 2.7 GB RSS; decompression now stops after MaxFileSize (128 MiB), with an error
// naming the file, and what it allocates stays within twice the limit (1 MiB chunks, joined once).
func TestGzipBombRefused(t *testing.T) {
	bomb := gzipBomb(t, 1023)
	path := filepath.Join(t.TempDir(), "tokenizer.json.gz")
	if err := os.WriteFile(path, bomb, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d KB of gzip, %d MiB of JSON", len(bomb)>>10, 1023)
	var err error
	alloc := allocatedBy(func() { _, err = FromFile(path) })
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "tokenizer file too large") ||
		!strings.Contains(err.Error(), "128 MiB") {
		t.Fatalf("FromFile(gzip bomb) = %v", err)
	}
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("%v does not wrap ErrTooLarge", err)
	}
	if bound := uint64(2*MaxFileSize + 16<<20); alloc > bound {
		t.Errorf("allocated %d MiB decompressing, want under %d MiB", alloc>>20, bound>>20)
	}
	t.Logf("allocated %d MiB", alloc>>20)

	// The same bytes from memory (FromBytes) stop at the same limit.
	if _, err := FromBytes(bomb); err == nil || !strings.Contains(err.Error(), "tokenizer.json: ") {
		t.Errorf("FromBytes(gzip bomb) = %v", err)
	}
	// A tokenizer with a little padding is still fine: the limit is on size, not on form.
	small := filepath.Join(t.TempDir(), "tokenizer.json.gz")
	if err := os.WriteFile(small, gzipBomb(t, 3), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := FromFile(small); err != nil {
		t.Errorf("3 MiB tokenizer: %v", err)
	}
}

// TestPlainFileOverLimitRefused: the limit applies to plain files too, decided from the size
// before anything is read.
func TestPlainFileOverLimitRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokenizer.json")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(baseJSON)
	if err := f.Truncate(128<<20 + 1); err != nil { // sparse: NUL bytes, never written
		t.Skipf("no sparse file here: %v", err)
	}
	f.Close()
	alloc := allocatedBy(func() { _, err = FromFile(path) })
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "134217729 bytes") {
		t.Fatalf("FromFile(129 MiB) = %v", err)
	}
	if alloc > 1<<20 {
		t.Errorf("allocated %d KiB refusing a file by its size", alloc>>10)
	}
}
