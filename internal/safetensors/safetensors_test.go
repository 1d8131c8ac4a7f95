package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func f32Bytes(vals ...float32) []byte {
	b, _ := EncodeFloat32(F32, vals)
	return b
}

func serialize(t *testing.T, tensors []Tensor, md map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, tensors, md); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// The Rust library's own test vectors (safetensors/src/tensor.rs: test_serialization, test_empty,
// test_serialization_forced_alignement), as the shared reference scripts transcribe them.
func TestWriteMatchesRustVectors(t *testing.T) {
	data := f32Bytes(0, 1, 2, 3, 4, 5)
	le := func(n uint64) []byte { b := make([]byte, 8); binary.LittleEndian.PutUint64(b, n); return b }
	cases := []struct {
		name    string
		tensors []Tensor
		md      map[string]string
		want    []byte
	}{
		{"serialization", []Tensor{{Name: "attn.0", DType: F32, Shape: []int{1, 2, 3}, Data: data}}, nil,
			append(append(le(64), `{"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}}`...), data...)},
		{"empty", nil, nil, append(le(8), "{}      "...)},
		{"empty+metadata", nil, map[string]string{"framework": "pt"},
			append(le(40), `{"__metadata__":{"framework":"pt"}}     `...)},
		{"forced alignment", []Tensor{{Name: "attn0", DType: F32, Shape: []int{1, 1, 2, 3}, Data: data}}, nil,
			append(append(le(72), `{"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}}       `...), data...)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := serialize(t, c.tensors, c.md)
			if !bytes.Equal(got, c.want) {
				t.Fatalf("got\n%q\nwant\n%q", got, c.want)
			}
			if _, err := Parse(got); err != nil {
				t.Fatalf("Parse of our own output: %v", err)
			}
		})
	}
}

func TestWriteOrderAndRoundTrip(t *testing.T) {
	bf, _ := EncodeFloat32(BF16, []float32{1, -3.5, 0.15625})
	f16, _ := EncodeFloat32(F16, []float32{1.5, -2.25})
	i64 := make([]byte, 16)
	binary.LittleEndian.PutUint64(i64, 1)
	binary.LittleEndian.PutUint64(i64[8:], uint64(math.MaxUint64-1)) // -2
	f64 := make([]byte, 8)
	binary.LittleEndian.PutUint64(f64, math.Float64bits(math.Pi))
	in := []Tensor{
		{Name: "b", DType: I64, Shape: []int{1, 2}, Data: i64},
		{Name: "a", DType: F16, Shape: []int{2}, Data: f16},
		{Name: "c", DType: BOOL, Shape: []int{2}, Data: []byte{1, 0}},
		{Name: "d", DType: BF16, Shape: []int{3}, Data: bf},
		{Name: "e", DType: F64, Shape: []int{1}, Data: f64},
		{Name: "scalar", DType: F32, Shape: []int{}, Data: f32Bytes(7)},
		{Name: "zero", DType: F32, Shape: []int{0, 3}, Data: nil},
		{Name: "ünï<&>\"\\\n", DType: U8, Shape: []int{1}, Data: []byte{9}},
	}
	buf := serialize(t, in, map[string]string{"k": "v", "format": "pt"})
	h, err := Parse(buf)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, ti := range h.Tensors {
		order = append(order, ti.Name)
	}
	// Rust order: I64 > F64 > F32 > BF16 > F16 > U8 > BOOL, then by name.
	want := []string{"b", "e", "scalar", "zero", "d", "a", "ünï<&>\"\\\n", "c"}
	if !reflect.DeepEqual(order, want) {
		t.Fatalf("order %q, want %q", order, want)
	}
	if !reflect.DeepEqual(h.Metadata, map[string]string{"k": "v", "format": "pt"}) {
		t.Fatalf("metadata %v", h.Metadata)
	}
	if !bytes.Contains(buf, []byte(`{"__metadata__":{"format":"pt","k":"v"},"b"`)) {
		t.Fatalf("metadata not first and sorted: %q", buf[8:80])
	}
	if !bytes.Contains(buf, []byte(`"ünï<&>\"\\\n"`)) {
		t.Fatalf("serde_json escaping not reproduced: %q", buf)
	}
	if (8+h.HeaderSize)%8 != 0 {
		t.Fatalf("data starts at %d, not 8-aligned", 8+h.HeaderSize)
	}
	dir := t.TempDir()
	p := filepath.Join(dir, "x.safetensors")
	if err := os.WriteFile(p, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mapped := range []bool{true, false} {
		f, err := open(p, mapped)
		if err != nil {
			t.Fatal(err)
		}
		if f.Mapped() != mapped && mapped {
			t.Logf("mmap unavailable; fallback used")
		}
		for _, ti := range in {
			got, err := f.Bytes(ti.Name)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, ti.Data) {
				t.Errorf("mapped=%v %q: %v want %v", mapped, ti.Name, got, ti.Data)
			}
			info, _ := f.Info(ti.Name)
			if !reflect.DeepEqual(info.Shape, ti.Shape) && !(len(info.Shape) == 0 && len(ti.Shape) == 0) {
				t.Errorf("%q shape %v want %v", ti.Name, info.Shape, ti.Shape)
			}
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Rewriting what was read is byte-identical.
	f, _ := Open(p)
	defer f.Close()
	var again []Tensor
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		data, _ := f.Bytes(n)
		again = append(again, Tensor{Name: n, DType: info.DType, Shape: info.Shape, Data: data})
	}
	if out := serialize(t, again, f.Metadata()); !bytes.Equal(out, buf) {
		t.Fatal("rewrite differs")
	}
}

func TestConvert(t *testing.T) {
	vals := []float32{0, -0, 1, -3.5, 0.15625, 1e-3, 65504, float32(math.Inf(1)), 3.1415927, 1.00390625}
	for _, d := range []DType{F32, BF16, F16} {
		raw, err := EncodeFloat32(d, vals)
		if err != nil {
			t.Fatal(err)
		}
		back := make([]float32, len(vals))
		if err := DecodeFloat32(d, raw, back); err != nil {
			t.Fatal(err)
		}
		tol := map[DType]float64{F32: 0, BF16: 1.0 / 256, F16: 1.0 / 2048}[d]
		for i := range vals {
			if diff := math.Abs(float64(back[i] - vals[i])); diff > tol*math.Abs(float64(vals[i])) {
				t.Errorf("%s: %g -> %g", d, vals[i], back[i])
			}
		}
		// Decoding then encoding is the identity on the narrow type (bit-exact round trips).
		raw2, _ := EncodeFloat32(d, back)
		if !bytes.Equal(raw, raw2) {
			t.Errorf("%s: re-encode differs", d)
		}
	}
	// Ties to even: 1 + 2^-8 is halfway between bf16 1 and 1+2^-7; even is 1.
	if got := Float32ToBF16Bits(1.00390625); got != 0x3f80 {
		t.Errorf("bf16(1+2^-8) = %#x, want 0x3f80", got)
	}
	if got := Float32ToBF16Bits(float32(math.NaN())); got&0x7f80 != 0x7f80 || got&0x7f == 0 {
		t.Errorf("bf16(NaN) = %#x is not a NaN", got)
	}
}

// header builds a file from a raw JSON header and data.
func header(js string, data []byte) []byte {
	b := make([]byte, 8, 8+len(js)+len(data))
	binary.LittleEndian.PutUint64(b, uint64(len(js)))
	return append(append(b, js...), data...)
}

func TestParseRejects(t *testing.T) {
	eight := make([]byte, 8)
	tooBig := make([]byte, 8)
	binary.LittleEndian.PutUint64(tooBig, MaxHeaderSize+1)
	cases := []struct {
		name, want string
		buf        []byte
		is         error
	}{
		{"short file", "shorter than the 8-byte", []byte{1, 2}, ErrTruncated},
		{"header over cap", "over the", append(tooBig, "{}"...), ErrInvalid},
		{"header past end", "only", header("{}", nil)[:9], ErrTruncated},
		{"null header", "found null", header("null", nil), ErrInvalid},
		{"array header", `expected "{"`, header("[]", nil), ErrInvalid},
		{"not json", "invalid", header("{x}", nil), ErrInvalid},
		{"invalid utf8", "UTF-8", header("{\"a\xff\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}", []byte{1}), ErrInvalid},
		{"duplicate tensor", `duplicate tensor name "a"`, header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, []byte{1, 2}), ErrInvalid},
		{"duplicate metadata", `duplicate "__metadata__"`, header(`{"__metadata__":{},"__metadata__":{}}`, nil), ErrInvalid},
		{"duplicate metadata key", `duplicate key "k"`, header(`{"__metadata__":{"k":"1","k":"2"}}`, nil), ErrInvalid},
		{"metadata not string", `expected a string`, header(`{"__metadata__":{"k":1}}`, nil), ErrInvalid},
		{"empty name", "empty tensor name", header(`{"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{1}), ErrInvalid},
		{"unknown dtype", `tensor "a": unknown safetensors dtype "F128"`, header(`{"a":{"dtype":"F128","shape":[1],"data_offsets":[0,16]}}`, make([]byte, 16)), ErrUnknownDType},
		{"unknown field", `unknown field "extra"`, header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":1}}`, []byte{1}), ErrInvalid},
		{"missing field", `missing field "shape"`, header(`{"a":{"dtype":"U8","data_offsets":[0,1]}}`, []byte{1}), ErrInvalid},
		{"negative dim", "non-negative", header(`{"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}`, []byte{1}), ErrInvalid},
		{"fractional offset", "non-negative", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1.0]}}`, []byte{1}), ErrInvalid},
		{"three offsets", "3 values, want 2", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}}`, []byte{1}), ErrInvalid},
		{"size mismatch", "is 8 bytes but data_offsets [0, 4] span 4", header(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, make([]byte, 4)), ErrInvalid},
		{"overflowing shape", "overflows", header(`{"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, eight), ErrInvalid},
		{"end before begin", "end before they begin", header(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}}`, nil), ErrInvalid},
		{"gap", "leave a gap", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, []byte{1, 2}), ErrInvalid},
		{"overlap", "overlap", header(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, []byte{1, 2}), ErrInvalid},
		{"out of bounds", "past the end", header(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, []byte{1, 2}), ErrTruncated},
		{"trailing bytes", "cover 1 bytes of data but the file holds 2", header(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{1, 2}), ErrInvalid},
		{"data after json", "data after", header(`{} {}`, nil), ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.buf)
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), c.want) || !errors.Is(err, c.is) {
				t.Fatalf("error %q: want it to contain %q and wrap %v", err, c.want, c.is)
			}
		})
	}
}

func TestOpenNamesFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "bad.safetensors")
	good := serialize(t, []Tensor{{Name: "w", DType: F32, Shape: []int{4}, Data: f32Bytes(1, 2, 3, 4)}}, nil)
	if err := os.WriteFile(p, good[:len(good)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(p)
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), `"w"`) || !errors.Is(err, ErrTruncated) {
		t.Fatalf("truncated file: %v", err)
	}
	if _, err := Open(filepath.Join(dir, "missing.safetensors")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: %v", err)
	}
}

func TestWriteRejects(t *testing.T) {
	cases := map[string][]Tensor{
		"duplicate tensor name":     {{Name: "a", DType: U8, Shape: []int{1}, Data: []byte{1}}, {Name: "a", DType: U8, Shape: []int{1}, Data: []byte{1}}},
		"reserved":                  {{Name: "__metadata__", DType: U8, Shape: []int{1}, Data: []byte{1}}},
		"unknown safetensors dtype": {{Name: "a", DType: "X", Shape: []int{1}, Data: []byte{1}}},
		"bytes of data":             {{Name: "a", DType: F32, Shape: []int{2}, Data: []byte{1}}},
		"not valid UTF-8":           {{Name: "a\xff", DType: U8, Shape: []int{1}, Data: []byte{1}}},
	}
	for want, tensors := range cases {
		err := Write(&bytes.Buffer{}, tensors, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v", want, err)
		}
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "m.safetensors")
	calls := 0
	err := WriteFile(p, []Tensor{{Name: "w", DType: F32, Shape: []int{2}, Load: func() ([]byte, error) {
		calls++
		return f32Bytes(1, 2), nil
	}}}, map[string]string{"format": "pt"})
	if err != nil || calls != 1 {
		t.Fatalf("err %v calls %d", err, calls)
	}
	// A streamed tensor must produce exactly its size.
	short := []Tensor{{Name: "w", DType: F32, Shape: []int{2}, Stream: func(w io.Writer) error { _, err := w.Write(f32Bytes(1)); return err }}}
	if err := Write(io.Discard, short, nil); err == nil || !strings.Contains(err.Error(), "streamed 4 bytes") {
		t.Fatalf("short stream: %v", err)
	}
	var buf bytes.Buffer
	streamed := []Tensor{{Name: "w", DType: F32, Shape: []int{2}, Stream: func(w io.Writer) error { _, err := w.Write(f32Bytes(1, 2)); return err }}}
	if err := Write(&buf, streamed, nil); err != nil || !bytes.Equal(buf.Bytes(), serialize(t, []Tensor{{Name: "w", DType: F32, Shape: []int{2}, Data: f32Bytes(1, 2)}}, nil)) {
		t.Fatalf("streamed write: %v", err)
	}
	failing := []Tensor{{Name: "w", DType: F32, Shape: []int{2}, Load: func() ([]byte, error) { return nil, errors.New("device gone") }}}
	if err := WriteFile(p, failing, nil); err == nil || !strings.Contains(err.Error(), "device gone") {
		t.Fatalf("failing load: %v", err)
	}
	// The earlier good file is untouched and no temporary file is left behind.
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("left %d entries", len(entries))
	}
}
