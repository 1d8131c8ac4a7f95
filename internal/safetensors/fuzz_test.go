package safetensors

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that Parse never panics, and that whatever it accepts is self-consistent: the
// tensors tile the data exactly and rewriting them yields a file Parse accepts with the same tensors.
//
//	go test -fuzz=FuzzParse -fuzztime=30s ./internal/safetensors/
func FuzzParse(f *testing.F) {
	f.Add(header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}}`, make([]byte, 8)))
	f.Add(header(`{"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]},"c":{"dtype":"U8","shape":[],"data_offsets":[4,5]}}`, make([]byte, 5)))
	f.Add(header(`null`, nil))
	f.Add(header(`{}`, nil))
	if files, _ := filepath.Glob("../../testdata/models/gpt2-tiny/model.safetensors"); len(files) == 1 {
		if b, err := os.ReadFile(files[0]); err == nil {
			f.Add(b[:min(len(b), 4096)])
		}
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		h, err := Parse(buf)
		if err != nil {
			return
		}
		data := buf[8+h.HeaderSize:]
		if h.DataSize() != int64(len(data)) {
			t.Fatalf("accepted header covers %d bytes, file has %d", h.DataSize(), len(data))
		}
		var ts []Tensor
		for _, ti := range h.Tensors {
			ts = append(ts, Tensor{Name: ti.Name, DType: ti.DType, Shape: ti.Shape, Data: data[ti.Begin:ti.End]})
		}
		var out bytes.Buffer
		if err := Write(&out, ts, h.Metadata); err != nil {
			t.Fatalf("accepted file cannot be rewritten: %v", err)
		}
		h2, err := Parse(out.Bytes())
		if err != nil {
			t.Fatalf("rewrite rejected: %v", err)
		}
		if len(h2.Tensors) != len(h.Tensors) {
			t.Fatalf("rewrite has %d tensors, want %d", len(h2.Tensors), len(h.Tensors))
		}
		data2 := out.Bytes()[8+h2.HeaderSize:]
		for _, ti := range h.Tensors {
			t2, ok := h2.Lookup(ti.Name)
			if !ok || !bytes.Equal(data2[t2.Begin:t2.End], data[ti.Begin:ti.End]) || t2.DType != ti.DType {
				t.Fatalf("tensor %q changed in the rewrite", ti.Name)
			}
		}
	})
}
