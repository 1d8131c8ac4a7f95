package tokenizer

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// JSONLinesOptions configures EncodeJSONLines and DecodeJSONLines.
type JSONLinesOptions struct {
	// AddSpecialTokens applies the post-processor's special tokens.
	AddSpecialTokens bool
	// Pair encodes "text" together with "text_pair", which every line must
	// then have.
	Pair bool
	// SkipSpecialTokens drops special tokens when decoding.
	SkipSpecialTokens bool
	// BatchSize is how many lines are encoded together (0: 256). Lines are
	// still written in input order.
	BatchSize int
}

// LineError is an error about one input line (numbered from 1).
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

type encodeIn struct {
	Text     *string `json:"text"`
	TextPair *string `json:"text_pair"`
}

type encodeOut struct {
	IDs     []uint32 `json:"ids"`
	Tokens  []string `json:"tokens"`
	Offsets []Offset `json:"offsets"`
}

type decodeIn struct {
	IDs *[]uint32 `json:"ids"`
}

type decodeOut struct {
	Text string `json:"text"`
}

// lineReader yields non-blank lines with their numbers; lines may be of any
// length.
type lineReader struct {
	r    *bufio.Reader
	line int
}

func (lr *lineReader) next() ([]byte, int, error) {
	for {
		b, err := lr.r.ReadBytes('\n')
		if len(b) == 0 && err != nil {
			return nil, 0, err
		}
		lr.line++
		if t := bytes.TrimSpace(b); len(t) > 0 {
			return t, lr.line, nil
		}
		if err != nil {
			return nil, 0, err
		}
	}
}

// batchLines reads up to n non-blank lines.
func (lr *lineReader) batch(n int) (lines [][]byte, nums []int, err error) {
	for len(lines) < n {
		b, num, err := lr.next()
		if errors.Is(err, io.EOF) {
			return lines, nums, io.EOF
		}
		if err != nil {
			return nil, nil, err
		}
		lines, nums = append(lines, b), append(nums, num)
	}
	return lines, nums, nil
}

func newJSONEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // keep "<s>" readable
	return enc
}

// EncodeJSONLines reads lines {"text": ..., "text_pair"?: ...} from r and
// writes one line {"ids": [...], "tokens": [...], "offsets": [[s, e], ...]}
// per input line to w, in order (offsets in code points). Blank lines are
// skipped. Errors name the input line.
func EncodeJSONLines(ctx context.Context, tok Tokenizer, r io.Reader, w io.Writer, opts JSONLinesOptions) error {
	size := opts.BatchSize
	if size <= 0 {
		size = 256
	}
	lr := &lineReader{r: bufio.NewReaderSize(r, 1<<16)}
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := newJSONEncoder(bw)
	for {
		lines, nums, rerr := lr.batch(size)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("reading input: %w", rerr)
		}
		inputs := make([]Input, len(lines))
		for i, b := range lines {
			var in encodeIn
			if err := json.Unmarshal(b, &in); err != nil {
				return &LineError{Line: nums[i], Err: fmt.Errorf("invalid JSON: %w", err)}
			}
			if in.Text == nil {
				return &LineError{Line: nums[i], Err: errors.New(`missing "text"`)}
			}
			inputs[i].Text = *in.Text
			if opts.Pair {
				if in.TextPair == nil {
					return &LineError{Line: nums[i], Err: errors.New(`missing "text_pair" (pair mode)`)}
				}
				inputs[i].Pair = in.TextPair
			}
		}
		if len(inputs) > 0 {
			encs, err := tok.EncodeBatch(ctx, inputs, opts.AddSpecialTokens)
			if err != nil {
				var be *BatchError
				if errors.As(err, &be) {
					return &LineError{Line: nums[be.Index], Err: be.Err}
				}
				return err
			}
			for _, e := range encs {
				out := encodeOut{IDs: nonNil(e.IDs), Tokens: nonNil(e.Tokens), Offsets: nonNil(e.Offsets)}
				if err := enc.Encode(out); err != nil {
					return fmt.Errorf("writing output: %w", err)
				}
			}
		}
		if rerr != nil { // io.EOF
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// DecodeJSONLines reads lines {"ids": [...]} from r and writes
// {"text": ...} lines to w, in order.
func DecodeJSONLines(ctx context.Context, tok Tokenizer, r io.Reader, w io.Writer, opts JSONLinesOptions) error {
	size := opts.BatchSize
	if size <= 0 {
		size = 256
	}
	lr := &lineReader{r: bufio.NewReaderSize(r, 1<<16)}
	bw := bufio.NewWriterSize(w, 1<<16)
	enc := newJSONEncoder(bw)
	for {
		lines, nums, rerr := lr.batch(size)
		if rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("reading input: %w", rerr)
		}
		ids := make([][]uint32, len(lines))
		for i, b := range lines {
			var in decodeIn
			if err := json.Unmarshal(b, &in); err != nil {
				return &LineError{Line: nums[i], Err: fmt.Errorf("invalid JSON: %w", err)}
			}
			if in.IDs == nil {
				return &LineError{Line: nums[i], Err: errors.New(`missing "ids"`)}
			}
			ids[i] = *in.IDs
		}
		if len(ids) > 0 {
			texts, err := tok.DecodeBatch(ctx, ids, opts.SkipSpecialTokens)
			if err != nil {
				var be *BatchError
				if errors.As(err, &be) {
					return &LineError{Line: nums[be.Index], Err: be.Err}
				}
				return err
			}
			for _, s := range texts {
				if err := enc.Encode(decodeOut{Text: s}); err != nil {
					return fmt.Errorf("writing output: %w", err)
				}
			}
		}
		if rerr != nil {
			break
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	return nil
}

// nonNil makes empty results marshal as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
