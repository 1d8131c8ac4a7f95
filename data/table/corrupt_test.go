package table

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// corruptOpts keep the limits small so that a corrupt claim is refused quickly.
var corruptOpts = Options{MaxCellBytes: 64 << 10, MaxRecordBytes: 256 << 10}

// readEverything opens path and runs every scan its columns allow, returning the rows of the
// first scan and the first error.
func readEverything(path string, opts Options) (rows int64, err error) {
	tb, err := Open(path, opts)
	if err != nil {
		return 0, err
	}
	defer tb.Close()
	ctx := context.Background()
	first := true
	for _, c := range tb.Columns() {
		var n int64
		switch {
		case c.Type == "string" || c.Type == "null":
			err = tb.ScanStrings(ctx, c.Name, func(int64, string, bool) error { n++; return nil })
		case isIntListType(c.Type):
			err = tb.ScanIntLists(ctx, []string{c.Name}, nil, func(int64, [][]int32) error { n++; return nil })
		default:
			continue
		}
		if tb.Format() == FormatCSV && err == nil && c.Name == "input_ids" {
			err = tb.ScanIntLists(ctx, []string{c.Name}, nil, func(int64, [][]int32) error { return nil })
		}
		if err != nil {
			return rows, err
		}
		if first {
			rows, first = n, false
		}
	}
	return rows, nil
}

// mutations returns corrupt variants of b: truncations at many points (the ends included), bytes
// flipped, and 4-byte runs overwritten with huge or negative lengths, from a seeded PRNG.
func mutations(b []byte, seed uint64) map[string][]byte {
	out := map[string][]byte{}
	n := len(b)
	for _, at := range []int{0, 1, 4, 6, 8, 12, 16, n / 4, n / 3, n / 2, 2 * n / 3, 3 * n / 4, n - 100, n - 16, n - 12, n - 10, n - 8, n - 6, n - 4, n - 1} {
		if at >= 0 && at < n {
			out[fmt.Sprintf("truncated at %d", at)] = b[:at]
		}
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	for range 40 {
		at := rng.IntN(n)
		c := append([]byte(nil), b...)
		c[at] ^= byte(1 + rng.IntN(255))
		out[fmt.Sprintf("byte %d flipped", at)] = c
	}
	for _, v := range []uint32{0x7FFFFFFF, 0xFFFFFFF0, 0x00FFFFFF} {
		for range 8 {
			at := rng.IntN(n - 4)
			c := append([]byte(nil), b...)
			binary.LittleEndian.PutUint32(c[at:], v)
			out[fmt.Sprintf("%#x at %d", v, at)] = c
		}
	}
	// The last bytes hold the Parquet footer length and the IPC file footer length.
	for _, v := range []uint32{0x7FFFFFFF, 0xFFFFFFFF, uint32(n), uint32(n - 8)} {
		for _, back := range []int{8, 10} {
			c := append([]byte(nil), b...)
			binary.LittleEndian.PutUint32(c[n-back:], v)
			out[fmt.Sprintf("%#x at end-%d", v, back)] = c
		}
	}
	return out
}

// TestCorruptFiles mutates every binary fixture: each variant either reads or fails with an
// error naming the file; none panics out of the package or hangs or allocates more than
// maxAllocPerRead; every truncation of a Parquet
// or IPC-file fixture fails, and a truncated IPC stream fails or reads fewer rows.
// Arrow-go itself recovers most of its panics on bad IPC; those it does not are recovered at this
// package's edge (counted in the log).
func TestCorruptFiles(t *testing.T) {
	files := []string{"corpus.parquet", "corpus-zstd.parquet", "nulls.parquet", "corpus-gzip.parquet", "corpus.arrow", "corpus.file.arrow", "nulls.arrow"}
	recovered, failed, total := 0, 0, 0
	for fi, f := range files {
		orig, err := os.ReadFile(fixture(f))
		if err != nil {
			t.Fatal(err)
		}
		full, err := readEverything(fixture(f), corruptOpts)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		for name, b := range mutations(orig, uint64(fi)) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+"_"+f)
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
			total++
			var rows int64
			checkAlloc(t, f+", "+name, func() { rows, err = readEverything(p, corruptOpts) })
			if err != nil {
				failed++
				if !strings.Contains(err.Error(), p) {
					t.Errorf("%s, %s: error does not name the file: %v", f, name, err)
				}
				if strings.Contains(err.Error(), "reading failed (") {
					recovered++
				}
				continue
			}
			truncated := strings.HasPrefix(name, "truncated")
			if truncated && (!strings.HasSuffix(f, ".arrow") || strings.HasSuffix(f, ".file.arrow")) {
				t.Errorf("%s, %s: read %d rows without an error", f, name, rows)
			}
			// A stream cut just before its end-of-stream marker (8 bytes) is a valid stream.
			if truncated && rows >= full && len(b) < len(orig)-8 {
				t.Errorf("%s, %s: read all %d rows of a truncated stream", f, name, rows)
			}
		}
	}
	t.Logf("%d corrupt variants: %d failed with an error naming the file (%d of them arrow-go panics recovered), %d still read", total, failed, recovered, total-failed)
}

// TestCorruptShard: a bad shard of a save_to_disk directory is named in the error.
func TestCorruptShard(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"data-00000-of-00002.arrow", "data-00001-of-00002.arrow", "state.json"} {
		b, err := os.ReadFile(fixture("save_to_disk/" + f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "data-00001-of-00002.arrow" {
			b = b[:len(b)/2]
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := readEverything(dir, corruptOpts)
	if err == nil || !strings.Contains(err.Error(), "data-00001-of-00002.arrow") {
		t.Fatalf("truncated shard: %v", err)
	}
}

// TestIPCHeaderWalk: the row count from message headers alone equals the rows the reader gives,
// and bad framings are refused.
func TestIPCHeaderWalk(t *testing.T) {
	for _, f := range []string{"corpus.arrow", "corpus.file.arrow", "nulls.arrow"} {
		tb := open(t, fixture(f))
		n, _ := tb.NumRows()
		rows, err := readEverything(fixture(f), Options{})
		if err != nil || rows != n || n == 0 {
			t.Errorf("%s: headers count %d rows, the scan %d (%v)", f, n, rows, err)
		}
	}
	for name, b := range map[string][]byte{
		"meta longer than file": {0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x10, 0x00, 0x00, 1, 2, 3},
		"stray bytes":           {0xFF, 0xFF},
		"tiny meta":             {0xFF, 0xFF, 0xFF, 0xFF, 4, 0, 0, 0, 0, 0, 0, 0},
	} {
		p := writeFile(t, "x.arrow", string(b))
		if _, err := Open(p, Options{}); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestBoundedCodecs: the snappy and zstd codecs registered for Parquet pages refuse streams that
// claim more than the page's buffer, without allocating what they claim, and decode valid ones.
func TestBoundedCodecs(t *testing.T) {
	for _, kind := range []compress.Compression{compress.Codecs.Snappy, compress.Codecs.Zstd} {
		codec, err := compress.GetCodec(kind)
		if err != nil {
			t.Fatal(err)
		}
		ec, ok := codec.(compress.ErrorCodec)
		if !ok {
			t.Fatalf("%v: the registered codec does not report errors", kind)
		}
		// A snappy block whose length header claims 1 GiB; a zstd frame of 128 MiB of zeros
		// (a few KiB compressed): both beyond maxAllocPerRead if believed.
		src := append(binary.AppendUvarint(nil, 1<<30), 0, 0, 0, 0)
		if kind == compress.Codecs.Zstd {
			// A local encoder: arrow-go's own keeps its buffers for the process's lifetime.
			src = zstdEncode(t, make([]byte, 128<<20))
		}
		checkAlloc(t, kind.String(), func() {
			if _, err := ec.DecodeWithError(make([]byte, 1024), src); err == nil {
				t.Errorf("%v: a %d-byte stream claiming more decoded into 1 KiB", kind, len(src))
			}
		})
		small := []byte(strings.Repeat("token ", 1000))
		var enc []byte
		if kind == compress.Codecs.Zstd {
			enc = zstdEncode(t, small)
		} else {
			enc = codec.Encode(nil, small)
		}
		out, err := ec.DecodeWithError(make([]byte, len(small)), enc)
		if err != nil || string(out) != string(small) {
			t.Errorf("%v: valid page: %v", kind, err)
		}
		t.Logf("%v: a %d-byte stream claiming more than its 1 KiB page is refused", kind, len(src))
	}
}

func zstdEncode(t *testing.T, b []byte) []byte {
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(b, nil)
}
