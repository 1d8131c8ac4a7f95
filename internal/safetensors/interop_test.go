package safetensors

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	nlp "github.com/nlpodyssey/safetensors"
)

// The fixtures were written by the shared reference scripts, whose writer reproduces the Rust
// library's layout. Reading and rewriting them must give the same bytes.
func TestFixturesRewriteByteIdentical(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/models/*/model.safetensors")
	if len(files) == 0 {
		t.Fatal("no fixtures under testdata/models")
	}
	for _, p := range files {
		orig, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f, err := Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var ts []Tensor
		for _, n := range f.Names() {
			info, _ := f.Info(n)
			data, err := f.Bytes(n)
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, Tensor{Name: n, DType: info.DType, Shape: info.Shape, Data: data})
		}
		var buf bytes.Buffer
		if err := Write(&buf, ts, f.Metadata()); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if !bytes.Equal(buf.Bytes(), orig) {
			t.Errorf("%s: rewrite differs from the original", p)
		}
	}
}

// nlpodyssey/safetensors is an independent Go port of the Rust library. Its serializer lays out the
// data exactly as the Rust one does (so the data buffers must be identical), but it writes the header's
// keys in alphabetical order (Go map order) where Rust writes them in offset order, as ours does
// (TestWriteMatchesRustVectors pins that). Each must read the other's output to the same tensors.
func TestInteropWithNLPOdyssey(t *testing.T) {
	bf, _ := EncodeFloat32(BF16, []float32{1, 2, 3, 4})
	ours := []Tensor{
		{Name: "transformer.wte.weight", DType: F32, Shape: []int{2, 3}, Data: f32Bytes(1, 2, 3, 4, 5, 6)},
		{Name: "transformer.h.0.ln_1.bias", DType: BF16, Shape: []int{4}, Data: bf},
		{Name: "ids", DType: I64, Shape: []int{1}, Data: make([]byte, 8)},
		{Name: "flag", DType: BOOL, Shape: []int{3}, Data: []byte{1, 0, 1}},
	}
	md := map[string]string{"format": "pt"}
	var buf bytes.Buffer
	if err := Write(&buf, ours, md); err != nil {
		t.Fatal(err)
	}
	views := map[string]nlp.TensorView{}
	for _, x := range ours {
		dt, err := nlp.ParseDType(string(x.DType))
		if err != nil {
			t.Fatal(err)
		}
		shape := make([]uint64, len(x.Shape))
		for i, d := range x.Shape {
			shape[i] = uint64(d)
		}
		v, err := nlp.NewTensorView(dt, shape, x.Data)
		if err != nil {
			t.Fatal(err)
		}
		views[x.Name] = v
	}
	theirs, err := nlp.Serialize(views, md)
	if err != nil {
		t.Fatal(err)
	}
	hOurs, err := Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	hTheirs, err := Parse(theirs)
	if err != nil {
		t.Fatalf("their output rejected: %v", err)
	}
	if len(theirs) != buf.Len() || !bytes.Equal(theirs[8+hTheirs.HeaderSize:], buf.Bytes()[8+hOurs.HeaderSize:]) {
		t.Fatalf("data layouts disagree:\nours   %q\ntheirs %q", buf.Bytes(), theirs)
	}
	if !reflect.DeepEqual(hOurs.Tensors, hTheirs.Tensors) || !reflect.DeepEqual(hOurs.Metadata, hTheirs.Metadata) {
		t.Fatalf("headers disagree:\nours   %+v\ntheirs %+v", hOurs.Tensors, hTheirs.Tensors)
	}
	st, err := nlp.Deserialize(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ours {
		v, ok := st.Tensor(x.Name)
		if !ok || !bytes.Equal(v.Data(), x.Data) {
			t.Errorf("nlpodyssey reads %q differently", x.Name)
		}
	}
}
