package tokenizer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func jsonLine(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEncodeJSONLines streams the corpus through EncodeJSONLines (in small
// batches, with blank lines mixed in) and compares every output line with
// the reference vectors.
func TestEncodeJSONLines(t *testing.T) {
	for _, name := range []string{"gpt2", "bert-base-uncased"} {
		for _, add := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/special=%v", name, add), func(t *testing.T) {
				tok := loadTestTokenizer(t, name)
				recs := readRecords(t, readMaybeGz(t, filepath.Join(tokDir, "expected", name+".jsonl.gz")))
				var in strings.Builder
				for i, r := range recs {
					in.WriteString(jsonLine(t, map[string]string{"text": r.Text}) + "\n")
					if i%50 == 0 {
						in.WriteString("\n   \n")
					}
				}
				var out bytes.Buffer
				err := EncodeJSONLines(context.Background(), tok, strings.NewReader(in.String()), &out, JSONLinesOptions{AddSpecialTokens: add, BatchSize: 7})
				if err != nil {
					t.Fatal(err)
				}
				sc := bufio.NewScanner(&out)
				sc.Buffer(nil, 1<<24)
				i := 0
				for ; sc.Scan(); i++ {
					var got encodeOut
					if err := json.Unmarshal(sc.Bytes(), &got); err != nil {
						t.Fatalf("output line %d: %v", i+1, err)
					}
					if i >= len(recs) {
						continue
					}
					want := recs[i].Encode
					if add {
						want = recs[i].EncodeSpecial
					}
					if !reflect.DeepEqual(nonNil(got.IDs), nonNil(want.IDs)) || !reflect.DeepEqual(nonNil(got.Tokens), nonNil(want.Tokens)) ||
						!reflect.DeepEqual(nonNil(got.Offsets), nonNil(want.Offsets)) {
						t.Errorf("%s: got %v %q %v, want %v %q %v", recs[i].ID, got.IDs, got.Tokens, got.Offsets, want.IDs, want.Tokens, want.Offsets)
					}
				}
				if i != len(recs) {
					t.Errorf("%d output lines for %d inputs", i, len(recs))
				}
			})
		}
	}
}

func TestEncodeJSONLinesPairsAndDecode(t *testing.T) {
	tok := loadTestTokenizer(t, "bert-base-uncased")
	pairs := readRecords(t, readMaybeGz(t, filepath.Join(tokDir, "expected", "bert-base-uncased.pairs.jsonl")))
	var in, dec strings.Builder
	for _, r := range pairs {
		in.WriteString(jsonLine(t, map[string]string{"text": r.Text, "text_pair": r.TextPair}) + "\n")
		dec.WriteString(jsonLine(t, map[string]any{"ids": r.EncodeSpecial.IDs}) + "\n")
	}
	var out bytes.Buffer
	if err := EncodeJSONLines(context.Background(), tok, strings.NewReader(in.String()), &out, JSONLinesOptions{AddSpecialTokens: true, Pair: true}); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var got encodeOut
		if err := json.Unmarshal([]byte(line), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got.IDs, pairs[i].EncodeSpecial.IDs) || !reflect.DeepEqual(got.Offsets, pairs[i].EncodeSpecial.Offsets) {
			t.Errorf("pair %s: got %v %v, want %v %v", pairs[i].ID, got.IDs, got.Offsets, pairs[i].EncodeSpecial.IDs, pairs[i].EncodeSpecial.Offsets)
		}
	}
	for _, skip := range []bool{false, true} {
		out.Reset()
		if err := DecodeJSONLines(context.Background(), tok, strings.NewReader(dec.String()), &out, JSONLinesOptions{SkipSpecialTokens: skip, BatchSize: 5}); err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var got decodeOut
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatal(err)
			}
			want := pairs[i].DecodeSpecial
			if skip {
				want = pairs[i].DecodeSpecialSkip
			}
			if got.Text != want {
				t.Errorf("decode %s (skip=%v): %q, want %q", pairs[i].ID, skip, got.Text, want)
			}
		}
	}
}

func TestJSONLinesErrors(t *testing.T) {
	tok := loadTestTokenizer(t, "gpt2")
	cases := []struct {
		name   string
		decode bool
		opts   JSONLinesOptions
		input  string
		line   int
		msg    string
	}{
		{"invalid JSON", false, JSONLinesOptions{}, "{\"text\": \"a\"}\n\n{\"text\": \n", 3, "invalid JSON"},
		{"missing text", false, JSONLinesOptions{}, "{\"text\": \"a\"}\n{\"txt\": \"b\"}\n", 2, `missing "text"`},
		{"text is not a string", false, JSONLinesOptions{}, "{\"text\": 5}\n", 1, "invalid JSON"},
		{"missing pair", false, JSONLinesOptions{Pair: true}, "{\"text\": \"a\", \"text_pair\": \"b\"}\n{\"text\": \"a\"}\n", 2, `missing "text_pair"`},
		{"missing ids", true, JSONLinesOptions{}, "{\"ids\": [1, 2]}\n{\"text\": \"x\"}\n", 2, `missing "ids"`},
		{"id out of range", true, JSONLinesOptions{}, "{\"ids\": [4294967296]}\n", 1, "invalid JSON"},
		{"error in a later batch", false, JSONLinesOptions{BatchSize: 2}, strings.Repeat("{\"text\": \"a\"}\n", 5) + "nope\n", 6, "invalid JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var err error
			if c.decode {
				err = DecodeJSONLines(context.Background(), tok, strings.NewReader(c.input), &bytes.Buffer{}, c.opts)
			} else {
				err = EncodeJSONLines(context.Background(), tok, strings.NewReader(c.input), &bytes.Buffer{}, c.opts)
			}
			var le *LineError
			if !errors.As(err, &le) || le.Line != c.line || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("error %v, want line %d saying %q", err, c.line, c.msg)
			}
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("line %d: ", c.line)) {
				t.Errorf("error %q does not start with the line number", err)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := EncodeJSONLines(ctx, tok, strings.NewReader("{\"text\": \"a\"}\n"), &bytes.Buffer{}, JSONLinesOptions{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}
