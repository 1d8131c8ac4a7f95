package tensorboard

import (
	"bytes"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Published CRC-32C check values: "123456789" (the CRC catalogue's check value) and the iSCSI
// vectors of RFC 3720 appendix B.4.
func TestCRC32CKnownVectors(t *testing.T) {
	asc, desc := make([]byte, 32), make([]byte, 32)
	for i := range asc {
		asc[i], desc[i] = byte(i), byte(31-i)
	}
	for _, c := range []struct {
		name string
		data []byte
		want uint32
	}{
		{"123456789", []byte("123456789"), 0xE3069283},
		{"32 zeros", make([]byte, 32), 0x8A9136AA},
		{"32 0xff", bytes.Repeat([]byte{0xff}, 32), 0x62A8AB43},
		{"0..31", asc, 0x46DD794E},
		{"31..0", desc, 0x113FDB5C},
	} {
		if got := crc32.Checksum(c.data, castagnoli); got != c.want {
			t.Errorf("CRC32C(%s) = %#08x, want %#08x", c.name, got, c.want)
		}
	}
}

// bitwiseCRC32C is an independent, table-free CRC-32C (reflected polynomial 0x82F63B78).
func bitwiseCRC32C(data []byte) uint32 {
	crc := ^uint32(0)
	for _, b := range data {
		crc ^= uint32(b)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

func TestMaskedCRC(t *testing.T) {
	// A masked value published with an independent TFRecord implementation's tests.
	if got := MaskedCRC([]byte("1234567890asdfghjkl")); got != 4134599430 {
		t.Errorf("MaskedCRC = %d, want 4134599430", got)
	}
	for _, s := range []string{"", "a", "brain.Event:2", strings.Repeat("xyz", 1000)} {
		crc := bitwiseCRC32C([]byte(s))
		want := (crc>>15 | crc<<17) + 0xa282ead8
		if got := MaskedCRC([]byte(s)); got != want {
			t.Errorf("MaskedCRC(%.10q) = %#08x, want %#08x", s, got, want)
		}
	}
}

// Golden records built independently (Python: struct.pack and a bitwise CRC-32C that matches
// the published vectors above), not by this package.
const (
	// Event{wall_time: 1.5, file_version: "brain.Event:2"}
	goldenFileVersion = "1800000000000000a37f4b2209000000000000f83f1a0d627261696e2e4576656e743a322a28646c"
	// Event{wall_time: 2.25, step: 7, summary {value {tag: "train/loss", simple_value: 0.5}}}
	goldenScalar = "200000000000000029eda95009000000000000024010072a130a110a0a747261696e2f6c6f7373150000003fed72860f"
)

func TestGoldenRecords(t *testing.T) {
	got := appendRecord(nil, appendEvent(nil, 1.5, 0, FileVersion, nil))
	if hex.EncodeToString(got) != goldenFileVersion {
		t.Errorf("file_version record\n got %x\nwant %s", got, goldenFileVersion)
	}
	summary := appendBytesField(nil, summaryValue, scalarValue("train/loss", 0.5))
	got = appendRecord(nil, appendEvent(nil, 2.25, 7, "", summary))
	if hex.EncodeToString(got) != goldenScalar {
		t.Errorf("scalar record\n got %x\nwant %s", got, goldenScalar)
	}
	data, _ := hex.DecodeString(goldenFileVersion + goldenScalar)
	events, err := ParseEvents(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{WallTime: 1.5, FileVersion: FileVersion},
		{WallTime: 2.25, Step: 7, Values: []Value{{Tag: "train/loss", Kind: KindScalar, Scalar: 0.5}}},
	}
	if !equalEvents(events, want) {
		t.Errorf("parsed %+v\nwant %+v", events, want)
	}
}

func equalEvents(a, b []Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !sameFloat(x.WallTime, y.WallTime) || x.Step != y.Step || x.FileVersion != y.FileVersion || len(x.Values) != len(y.Values) {
			return false
		}
		for j := range x.Values {
			u, v := x.Values[j], y.Values[j]
			if u.Tag != v.Tag || u.Kind != v.Kind || !sameFloat(float64(u.Scalar), float64(v.Scalar)) || u.Text != v.Text || u.Plugin != v.Plugin {
				return false
			}
		}
	}
	return true
}

// sameFloat is bit equality (so -0 ≠ 0), except that any two NaNs are the same.
func sameFloat(a, b float64) bool {
	return math.Float64bits(a) == math.Float64bits(b) || math.IsNaN(a) && math.IsNaN(b)
}

func TestWriterRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs", "x")
	start := time.Unix(1_700_000_000, 250_000_000)
	w, err := newWriter(dir, start, "host1", 4242)
	if err != nil {
		t.Fatal(err)
	}
	if base := filepath.Base(w.Path()); base != "events.out.tfevents.1700000000.host1.4242.0" {
		t.Errorf("file name %q", base)
	}
	t1 := start.Add(time.Second)
	if err := w.AddScalars(10, t1, map[string]float64{"train/loss": 2.5, "train/learning_rate": 5e-5, "train/epoch": 0.25}); err != nil {
		t.Fatal(err)
	}
	if err := w.AddScalars(11, t1, nil); err != nil { // nothing to write
		t.Fatal(err)
	}
	if err := w.AddText(0, t1, "args", `{"learning_rate": 5e-05}`); err != nil {
		t.Fatal(err)
	}
	if err := w.AddScalars(-3, t1, map[string]float64{"eval/loss": math.Inf(1), "eval/nan": math.NaN()}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	events, err := ReadEvents(w.Path())
	if err != nil {
		t.Fatal(err)
	}
	wall := 1_700_000_001.25
	want := []Event{
		{WallTime: 1_700_000_000.25, FileVersion: FileVersion},
		{WallTime: wall, Step: 10, Values: []Value{
			{Tag: "train/epoch", Kind: KindScalar, Scalar: 0.25},
			{Tag: "train/learning_rate", Kind: KindScalar, Scalar: float32(5e-5)},
			{Tag: "train/loss", Kind: KindScalar, Scalar: 2.5},
		}},
		{WallTime: wall, Values: []Value{{Tag: "args/text_summary", Kind: KindText, Text: `{"learning_rate": 5e-05}`, Plugin: "text"}}},
		{WallTime: wall, Step: -3, Values: []Value{
			{Tag: "eval/loss", Kind: KindScalar, Scalar: float32(math.Inf(1))},
			{Tag: "eval/nan", Kind: KindScalar, Scalar: float32(math.NaN())},
		}},
	}
	if !equalEvents(events, want) {
		t.Errorf("read back\n%+v\nwant\n%+v", events, want)
	}
}

func TestWriterNewFileEachTime(t *testing.T) {
	dir := t.TempDir()
	now := time.Unix(1_700_000_000, 0)
	w1, err := newWriter(dir, now, "h", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	w2, err := newWriter(dir, now, "h", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if w1.Path() == w2.Path() || !strings.HasSuffix(w2.Path(), ".1") {
		t.Errorf("second writer in the same second: %s and %s", w1.Path(), w2.Path())
	}
	// The first event is on disk before any Flush: TensorBoard can open the file at once.
	events, err := ReadEvents(w2.Path())
	if err != nil || len(events) != 1 || events[0].FileVersion != FileVersion {
		t.Errorf("fresh file: %+v, %v", events, err)
	}
}

func TestNewWriterPublic(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	if base := filepath.Base(w.Path()); !strings.HasPrefix(base, "events.out.tfevents.") || !strings.Contains(base, "."+host+".") {
		t.Errorf("file name %q", base)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := w.AddScalars(1, time.Now(), map[string]float64{"a": 1}); !errors.Is(err, ErrClosed) {
		t.Errorf("AddScalars after Close: %v", err)
	}
	if err := w.AddScalars(1, time.Now(), nil); !errors.Is(err, ErrClosed) {
		t.Errorf("empty AddScalars after Close: %v", err)
	}
	if err := w.Flush(); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v", err)
	}
	if _, err := NewWriter(filepath.Join(w.Path(), "sub")); err == nil {
		t.Error("NewWriter under a regular file succeeded")
	}
}

func TestDamagedFiles(t *testing.T) {
	good, _ := hex.DecodeString(goldenFileVersion + goldenScalar)
	first := len(goldenFileVersion) / 2
	for _, c := range []struct {
		name   string
		mutate func([]byte) []byte
		want   error
		events int
	}{
		{"data byte flipped", func(b []byte) []byte { b[first+20] ^= 1; return b }, ErrCorrupt, 1},
		{"length byte flipped", func(b []byte) []byte { b[first] ^= 1; return b }, ErrCorrupt, 1},
		{"data CRC flipped", func(b []byte) []byte { b[len(b)-1] ^= 0x80; return b }, ErrCorrupt, 1},
		{"cut in data", func(b []byte) []byte { return b[:len(b)-5] }, ErrTruncated, 1},
		{"cut in header", func(b []byte) []byte { return b[:first+7] }, ErrTruncated, 1},
		{"cut before data CRC", func(b []byte) []byte { return b[:len(b)-4] }, ErrTruncated, 1},
		{"cut in first", func(b []byte) []byte { return b[:10] }, ErrTruncated, 0},
	} {
		b := c.mutate(bytes.Clone(good))
		path := filepath.Join(t.TempDir(), "events.out.tfevents.1.h")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		events, err := ReadEvents(path)
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: error %v, want %v naming the file", c.name, err, c.want)
		}
		if len(events) != c.events {
			t.Errorf("%s: %d events before the damage, want %d", c.name, len(events), c.events)
		}
	}
	if _, err := ReadEvents(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestUndecodableEvent(t *testing.T) {
	for _, bad := range [][]byte{
		{0x0a},                 // key, then nothing: wall_time as bytes with no length
		{0x09, 1, 2},           // short fixed64
		{0x10},                 // step without its varint
		{0x0b},                 // group start: not used by Event
		{0x00, 0x01},           // field number 0
		{0x2a, 0x05, 0x0a, 99}, // summary value whose length runs past the end
		{0x2a, 0x02, 0x08, 1},  // summary value as a varint
	} {
		_, err := ParseEvents(appendRecord(nil, bad))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("event %x: error %v, want ErrCorrupt", bad, err)
		}
	}
	// Unknown fields are skipped, as protobuf readers do.
	ev := appendVarintField(appendBytesField(nil, 4, []byte("graph")), 2, 9)
	events, err := ParseEvents(appendRecord(nil, ev))
	if err != nil || len(events) != 1 || events[0].Step != 9 {
		t.Errorf("unknown fields: %+v, %v", events, err)
	}
}

func TestRewriteTag(t *testing.T) {
	for key, want := range map[string]string{
		"loss":                     "train/loss",
		"learning_rate":            "train/learning_rate",
		"grad_norm":                "train/grad_norm",
		"epoch":                    "train/epoch",
		"eval_loss":                "eval/loss",
		"eval_runtime":             "eval/runtime",
		"test_accuracy":            "test/accuracy",
		"train_runtime":            "train/train_runtime",
		"evaluation":               "train/evaluation",
		"eval_":                    "eval/",
		"train_samples_per_second": "train/train_samples_per_second",
	} {
		if got := RewriteTag(key); got != want {
			t.Errorf("RewriteTag(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestWriterConcurrent writes from several goroutines and closes from another; the race
// detector checks the locking, and every event that was accepted must be readable.
func TestWriterConcurrent(t *testing.T) {
	w, err := newWriter(t.TempDir(), time.Unix(1, 0), "h", 1)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted := 0
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				err := w.AddScalars(int64(g*100+i), time.Unix(2, 0), map[string]float64{"x": float64(i)})
				if err == nil {
					mu.Lock()
					accepted++
					mu.Unlock()
				} else if !errors.Is(err, ErrClosed) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Add(1)
	go func() { defer wg.Done(); time.Sleep(time.Millisecond); w.Close() }()
	wg.Wait()
	w.Close()
	events, err := ReadEvents(w.Path())
	if err != nil || len(events) != accepted+1 {
		t.Fatalf("%d events (err %v), want %d accepted + file_version", len(events), err, accepted)
	}
}
