package tensorboard

import (
	"encoding/hex"
	"errors"
	"math"
	"testing"
	"time"
)

// FuzzParseEvents feeds arbitrary bytes to the reader, both as a file and (so the fuzzer gets
// past the CRCs to the protobuf decoder) as the data of one well-framed record: it must not
// panic, must fail only with ErrCorrupt or ErrTruncated, and whatever it accepts must survive
// re-encoding.
func FuzzParseEvents(f *testing.F) {
	golden, _ := hex.DecodeString(goldenFileVersion + goldenScalar)
	f.Add(golden)
	f.Add(appendRecord(nil, appendEvent(nil, 3, 4, "", appendBytesField(nil, summaryValue, textValue("t", "hello")))))
	f.Add([]byte{})
	f.Add(golden[:20])
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, data)
		checkParse(t, appendRecord(nil, data))
	})
}

func checkParse(t *testing.T, data []byte) {
	t.Helper()
	events, err := ParseEvents(data)
	if err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
		t.Fatalf("unexpected error kind: %v", err)
	}
	for _, e := range events {
		var summary []byte
		if e.Values != nil {
			summary = []byte{}
		}
		known := true
		for _, v := range e.Values {
			switch v.Kind {
			case KindScalar:
				summary = appendBytesField(summary, summaryValue, scalarValue(v.Tag, float64(v.Scalar)))
			case KindText:
				summary = appendBytesField(summary, summaryValue, textValue(v.Tag, v.Text))
			default:
				known = false
			}
			known = known && (v.Kind != KindScalar || v.Plugin == "")
		}
		if !known {
			continue
		}
		again, err := ParseEvents(appendRecord(nil, appendEvent(nil, e.WallTime, e.Step, e.FileVersion, summary)))
		if err != nil || !equalEvents(again, []Event{e}) {
			t.Fatalf("re-encoded %+v read back as %+v (%v)", e, again, err)
		}
	}
}

// FuzzWriteRead encodes fuzzed scalars and text and reads them back.
func FuzzWriteRead(f *testing.F) {
	f.Add(int64(7), 1.5, "train/loss", 2.5, "args", "{}")
	f.Add(int64(-1), 0.0, "", math.Inf(-1), "", "")
	f.Fuzz(func(t *testing.T, step int64, wall float64, tag string, value float64, textTag, text string) {
		if math.IsNaN(wall) || math.IsInf(wall, 0) || math.Abs(wall) > 9e9 {
			return // beyond time.Duration's ±292 years
		}
		when := time.Unix(0, 0).Add(time.Duration(wall * float64(time.Second)))
		summary := appendBytesField(nil, summaryValue, scalarValue(tag, value))
		summary = appendBytesField(summary, summaryValue, textValue(textTag, text))
		data := appendRecord(nil, appendEvent(nil, wallSeconds(when), step, "", summary))
		events, err := ParseEvents(data)
		if err != nil {
			t.Fatal(err)
		}
		want := []Event{{WallTime: wallSeconds(when), Step: step, Values: []Value{
			{Tag: tag, Kind: KindScalar, Scalar: float32(value)},
			{Tag: textTag, Kind: KindText, Text: text, Plugin: "text"},
		}}}
		if !equalEvents(events, want) {
			t.Fatalf("got %+v, want %+v", events, want)
		}
	})
}
