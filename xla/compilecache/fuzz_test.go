package compilecache

import (
	"bytes"
	"testing"
	"time"
)

// validEntry is a whole entry file as Put writes it.
func validEntry(t testing.TB, k Key, payload []byte) []byte {
	hdr, err := encodeHeader(k, payload, Meta{Name: "step", CompileSeconds: 1.5}, time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := writeEntry(&b, hdr, payload); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// FuzzDecodeEntry: the decoder returns an error, never panics, for any bytes — as they are and
// with the trailing checksum made right, so that the fuzzer gets past the checksum to the
// header's parsing and consistency checks. What it accepts is consistent.
func FuzzDecodeEntry(f *testing.F) {
	good := validEntry(f, testKey("aa", "8"), []byte("serialized executable"))
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte(magic))
	f.Add(good[:len(good)/2])
	f.Add(validEntry(f, Key{Fields: []KeyField{{"a", ""}}}, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, fixChecksum(b)} {
			h, payload, err := decodeEntry(in)
			if err != nil {
				continue
			}
			if int64(len(payload)) != h.PayloadBytes || len(h.Key) == 0 ||
				int64(len(in)) != overheadLen+h.PayloadBytes+int64(headerLen(in)) {
				t.Fatalf("accepted an inconsistent entry: header %+v, %d payload bytes, %d in all", h, len(payload), len(in))
			}
		}
	})
}

// TestDecodeRoundTrip: the decoder accepts what the encoder writes, and its checks are what the
// fuzz test relies on.
func TestDecodeRoundTrip(t *testing.T) {
	k := testKey("aa", "8")
	b := validEntry(t, k, []byte("payload"))
	h, p, err := decodeEntry(b)
	if err != nil || string(p) != "payload" || (Key{h.Key}).diff(k) != "" || h.Name != "step" || h.CompileSeconds != 1.5 ||
		!h.Created.Equal(time.Unix(1700000000, 0)) {
		t.Fatalf("decode: %+v, %q, %v", h, p, err)
	}
}
