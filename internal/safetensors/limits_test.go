package safetensors

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"
)

// emptyTensorsFile is a valid safetensors file of n empty tensors (shape [0], no data): about 60
// bytes of header each, the cheapest way to a huge tensor count.
func emptyTensorsFile(t *testing.T, n int) (string, int) {
	t.Helper()
	var js bytes.Buffer
	js.WriteByte('{')
	for i := range n {
		if i > 0 {
			js.WriteByte(',')
		}
		fmt.Fprintf(&js, `"t%07d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`, i)
	}
	js.WriteByte('}')
	var file bytes.Buffer
	binary.Write(&file, binary.LittleEndian, uint64(js.Len()))
	file.Write(js.Bytes())
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := os.WriteFile(path, file.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, js.Len()
}

func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestTooManyTensorsRefused (issue 16, row 5): a 91 MB header of 1.3M empty tensors took 1.0 GB
// and 11.8 s to accept; it is refused by a count of the header's members, before decoding, with
// an error naming the file, allocating little beyond the header itself.
func TestTooManyTensorsRefused(t *testing.T) {
	path, size := emptyTensorsFile(t, 1_300_000)
	t.Logf("header: %d MB", size/1e6)
	var err error
	alloc := allocatedBy(func() {
		var f *File
		if f, err = Open(path); err == nil {
			f.Close()
		}
	})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "more than 131072 tensors") {
		t.Fatalf("Open(1.3M tensors) = %v", err)
	}
	if bound := uint64(size) + 1<<20; alloc > bound {
		t.Errorf("allocated %d MB refusing it, want under %d MB (the header and 1 MiB)", alloc>>20, bound>>20)
	}
	t.Logf("allocated %d MB", alloc>>20)
}

// TestMaximalHeaderBounded: a header of MaxTensors tensors is accepted, and parsing it allocates
// a bounded amount per tensor.
func TestMaximalHeaderBounded(t *testing.T) {
	path, size := emptyTensorsFile(t, MaxTensors)
	var err error
	var n int
	alloc := allocatedBy(func() {
		var f *File
		if f, err = Open(path); err == nil {
			n = len(f.Names())
			f.Close()
		}
	})
	if err != nil || n != MaxTensors {
		t.Fatalf("Open(MaxTensors tensors) = %d tensors, %v", n, err)
	}
	const perTensor = 384 // measured: about 220 (parseFast)
	if bound := uint64(size) + perTensor*MaxTensors; alloc > bound {
		t.Errorf("allocated %d MB for a %d MB header, want under %d MB", alloc>>20, size>>20, bound>>20)
	}
	t.Logf("%d MB header: allocated %d MB (%d bytes a tensor beyond the header)", size>>20, alloc>>20, (int(alloc)-size)/MaxTensors)
}

// FuzzFastHeader: whatever header parseFast accepts, the decoder path accepts too, with the same
// tensors and metadata (or rejects both ways with the same error once the offsets are checked).
//
//	go test -fuzz=FuzzFastHeader -fuzztime=30s ./internal/safetensors/
func FuzzFastHeader(f *testing.F) {
	f.Add([]byte(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`))
	f.Add([]byte(`{"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]},"c":{"dtype":"U8","shape":[],"data_offsets":[4,5]}}`))
	f.Add([]byte(` { "__metadata__" : null , "x" : { "shape" : [ ] , "data_offsets" : [ 0 , 4 ] , "dtype" : "I32" } } `))
	f.Add([]byte(`{"a":{"dtype":"F32","shape":[01],"data_offsets":[0,4]},"a":{}}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, js []byte) {
		if !utf8.Valid(js) {
			return
		}
		fast, ok := parseFast(js, countMembers(js, MaxTensors+2))
		if !ok {
			return
		}
		var dataSize int64
		for _, ti := range fast.Tensors {
			dataSize = max(dataSize, ti.End)
		}
		errFast := fast.validateOffsets(dataSize)
		slow, errSlow := parseDecoder(js, dataSize)
		if (errFast == nil) != (errSlow == nil) || (errFast != nil && errFast.Error() != errSlow.Error()) {
			t.Fatalf("fast path: %v; decoder: %v", errFast, errSlow)
		}
		if errSlow != nil {
			return
		}
		if len(fast.Tensors) != len(slow.Tensors) || !reflect.DeepEqual(fast.Metadata, slow.Metadata) || !reflect.DeepEqual(fast.index, slow.index) {
			t.Fatalf("fast %+v\ndecoder %+v", fast, slow)
		}
		for i := range fast.Tensors {
			a, b := fast.Tensors[i], slow.Tensors[i]
			if a.Name != b.Name || a.DType != b.DType || a.Begin != b.Begin || a.End != b.End || fmt.Sprint(a.Shape) != fmt.Sprint(b.Shape) {
				t.Fatalf("tensor %d: fast %+v, decoder %+v", i, a, b)
			}
		}
	})
}
