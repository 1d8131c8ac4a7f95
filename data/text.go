package data

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gotpu/gotpu/data/table"
	"github.com/gotpu/gotpu/data/tokenizer"
)

// Documents reads a text source as documents, streaming (never the whole file at once unless
// WholeFile). Sources: plain text files, one document per line (HF's "text" dataset; empty lines
// are documents too, as HF keeps them) or per file; JSON lines with a text field.
type Documents iter.Seq2[string, error]

// TextLines yields each line of path (without the newline; HF's text loader with
// keep_linebreaks=False).
func TextLines(path string) Documents {
	return func(yield func(string, error) bool) {
		f, err := os.Open(path)
		if err != nil {
			yield("", fmt.Errorf("data: %w", err))
			return
		}
		defer f.Close()
		scanLines(f, path, yield)
	}
}

// TextFiles yields each file whole, in the given order.
func TextFiles(paths []string) Documents {
	return func(yield func(string, error) bool) {
		for _, p := range paths {
			b, err := readFileLimit(p, maxLine)
			if err != nil {
				yield("", err)
				return
			}
			if !yield(string(b), nil) {
				return
			}
		}
	}
}

// JSONLTextField yields field of each line of a JSON-lines file; errors name the file, line and
// field.
func JSONLTextField(path, field string) Documents {
	return func(yield func(string, error) bool) {
		err := forEachJSONLine(path, func(lineNo int, obj map[string]json.RawMessage) error {
			raw, ok := obj[field]
			if !ok {
				return fmt.Errorf("data: %s:%d: no field %q (the line's fields: %s); name the text column with --text_column_name",
					path, lineNo, field, strings.Join(slices.Sorted(maps.Keys(obj)), ", "))
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("data: %s:%d: field %q holds %s, not text: %w", path, lineNo, field, jsonKind(raw), err)
			}
			if !yield(s, nil) {
				return errStop
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStop) {
			yield("", err)
		}
	}
}

var errStop = errors.New("stop")

// jsonKind names the kind of a JSON value for an error: "a number", "null", "an object", ...
func jsonKind(raw json.RawMessage) string {
	b := trimSpace(raw)
	if len(b) == 0 {
		return "nothing"
	}
	switch b[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "a list"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

func forEachJSONLine(path string, fn func(lineNo int, obj map[string]json.RawMessage) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(r, maxLine)
		if errors.Is(err, errLineTooLong) {
			return fmt.Errorf("data: %s:%d: line longer than %d bytes", path, lineNo, maxLine)
		}
		if len(line) > 0 && len(trimSpace(line)) > 0 {
			// Bounded before decoding: a map entry and a key copy per key, and encoding/json
			// nests 10,000 levels deep (a 54 MB line of 5M keys took 660 MB).
			if cerr := table.CheckJSONRecord(line, 0); cerr != nil {
				return fmt.Errorf("data: %s:%d: %w", path, lineNo, cerr)
			}
			var obj map[string]json.RawMessage
			if jerr := json.Unmarshal(line, &obj); jerr != nil {
				return fmt.Errorf("data: %s:%d: %w", path, lineNo, jerr)
			}
			if ferr := fn(lineNo, obj); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("data: %s:%d: %w", path, lineNo, err)
		}
	}
}

var errLineTooLong = errors.New("line too long")

// readLine reads one line (with its '\n') of at most limit bytes; a longer one is errLineTooLong,
// found before more than limit bytes of it are held.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > limit {
			return nil, errLineTooLong
		}
		if len(line)+len(chunk) > cap(line) {
			// Doubling: append grows a large slice by a quarter, allocating five times a long
			// line's size on the way to holding it.
			grown := make([]byte, len(line), min(max(2*cap(line), len(line)+len(chunk)), limit))
			copy(grown, line)
			line = grown
		}
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// readFileLimit reads a whole file of at most limit bytes; a larger one is an error naming it,
// found from its size before it is read.
func readFileLimit(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > limit {
		return nil, fmt.Errorf("data: %s: %d bytes, more than the %d a document may hold", path, st.Size(), limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("data: %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("data: %s: more than the %d bytes a document may hold", path, limit)
	}
	return b, nil
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

// TokenBlocks is a causal-LM dataset of fixed-length token blocks (HF run_clm's group_texts
// output): one flat token stream, block i its tokens [i*BlockSize, (i+1)*BlockSize), held in
// memory or, past GroupOptions.MaxMemoryTokens, in a spill file read with ReadAt (blockspill.go).
// Get may be called concurrently; Close removes a spill file.
type TokenBlocks struct {
	BlockSize int
	tokens    []int32     // the stream, while it is in memory
	spill     *blockSpill // the stream, once spilled (tokens is then nil)
}

// Len implements Dataset.
func (b *TokenBlocks) Len() int { return b.Tokens() / b.BlockSize }

// Get implements Dataset: block i as input_ids (labels are the input ids). In memory the ids
// share the blocks' array (read-only); spilled they are read into a new one.
func (b *TokenBlocks) Get(i int) (Example, error) {
	if i < 0 || i >= b.Len() {
		return Example{}, fmt.Errorf("data: block %d out of range [0,%d)", i, b.Len())
	}
	if b.spill != nil {
		ids := make([]int32, b.BlockSize)
		if err := b.spill.read(ids, int64(i)*int64(b.BlockSize)); err != nil {
			return Example{}, fmt.Errorf("data: block %d: %w", i, err)
		}
		return Example{InputIDs: ids}, nil
	}
	return Example{InputIDs: b.tokens[i*b.BlockSize : (i+1)*b.BlockSize : (i+1)*b.BlockSize]}, nil
}

// Tokens is the number of tokens in all blocks.
func (b *TokenBlocks) Tokens() int {
	if b.spill != nil {
		return int(b.spill.tokens)
	}
	return len(b.tokens)
}

// groupTextsBatch is the number of documents HF's run_clm groups at a time (datasets.map's
// default batch_size 1000): the remainder shorter than a block is dropped per group, as HF does.
const groupTextsBatch = 1000

// groupTextsChunkBytes is how much text GroupTexts gives the tokenizer at a time (a longer
// document goes alone): enough documents for every core, few enough encodings held at once.
const groupTextsChunkBytes = 256 << 10

// groupTextsKeepTokens is how many of a chunk's tokens may wait before its full blocks are kept.
const groupTextsKeepTokens = 1 << 20

// GroupTexts tokenizes documents (with the tokenizer's special tokens unless
// opts.NoSpecialTokens, as HF's add_special_tokens=True default) and concatenates and splits them
// into blocks of blockSize tokens, exactly as HF run_clm.py's tokenize_function + group_texts do:
// per group of 1000 documents, the concatenated tokens are cut to a multiple of blockSize and
// split. Documents are encoded on all cores. GroupOptions{} is HF's behaviour.
//
// The memory it holds is bounded by opts: once the kept tokens would exceed opts.MaxMemoryTokens
// (8 Mi by default) they are appended, in the same order, to a file in opts.Dir (os.TempDir()),
// and Get reads blocks from it; the blocks are the same bit for bit. Memory then holds the
// encodings of one chunk of text (groupTextsChunkBytes, or one longer document) at a time,
// however long a group's documents. Close the result to remove the file.
func GroupTexts(ctx context.Context, tok tokenizer.Tokenizer, docs Documents, blockSize int, opts GroupOptions) (_ *TokenBlocks, err error) {
	addSpecialTokens := !opts.NoSpecialTokens
	if blockSize <= 0 {
		return nil, fmt.Errorf("data: block_size %d is not positive", blockSize)
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	out := &TokenBlocks{BlockSize: blockSize}
	defer func() {
		if err != nil {
			_ = out.Close() // the error is the one to report; the spill file goes either way
		}
	}()
	// A group of 1000 documents is tokenized a chunk at a time (groupTextsChunkBytes of text, or
	// one longer document) and its full blocks kept as they fill: only the group's last partial
	// block is dropped, as when the whole group is concatenated first, but the encodings held at
	// once are a chunk's, not the group's (1000 rows of 1 MiB held gigabytes of encodings).
	var (
		chunk      []tokenizer.Input
		chunkBytes int
		inGroup    int
		pending    []int32 // the group's tokens not kept yet: fewer than blockSize between chunks
	)
	encode := func() error {
		if len(chunk) == 0 {
			return nil
		}
		encs, err := tok.EncodeBatch(ctx, chunk, addSpecialTokens)
		if err != nil {
			return fmt.Errorf("data: tokenizing: %w", err)
		}
		clear(chunk) // the documents may be large: let them go now
		chunk, chunkBytes = chunk[:0], 0
		for i, e := range encs {
			for _, id := range e.IDs {
				pending = append(pending, int32(id))
			}
			encs[i] = nil
			if full := len(pending) / blockSize * blockSize; full >= groupTextsKeepTokens {
				if err := out.keep(pending[:full], opts); err != nil {
					return err
				}
				pending = append(pending[:0], pending[full:]...)
			}
		}
		full := len(pending) / blockSize * blockSize
		if err := out.keep(pending[:full], opts); err != nil {
			return err
		}
		pending = append(pending[:0], pending[full:]...)
		return nil
	}
	endGroup := func() error {
		if err := encode(); err != nil {
			return err
		}
		pending, inGroup = pending[:0], 0
		return nil
	}
	for doc, err := range docs {
		if err != nil {
			return nil, err
		}
		chunk = append(chunk, tokenizer.Single(doc))
		chunkBytes += len(doc)
		inGroup++
		if chunkBytes >= groupTextsChunkBytes {
			if err := encode(); err != nil {
				return nil, err
			}
		}
		if inGroup == groupTextsBatch {
			if err := endGroup(); err != nil {
				return nil, err
			}
		}
	}
	if err := endGroup(); err != nil {
		return nil, err
	}
	if out.spill != nil {
		if err := out.spill.finish(); err != nil {
			return nil, err
		}
	}
	if out.Len() == 0 {
		return nil, fmt.Errorf("data: the texts hold fewer than block_size = %d tokens per group of %d documents", blockSize, groupTextsBatch)
	}
	return out, nil
}

// LabeledText is one classification record.
type LabeledText struct {
	Text  string
	Pair  *string
	Label string // as written in the file; mapped to an id by Labels
}

// ReadLabeledJSONL reads records with a text column, an optional second text column and a label
// column (HF run_glue's sentence1/sentence2/label).
func ReadLabeledJSONL(path, textField, pairField, labelField string) ([]LabeledText, error) {
	var recs []LabeledText
	err := forEachJSONLine(path, func(lineNo int, obj map[string]json.RawMessage) error {
		var r LabeledText
		if err := jsonString(obj, textField, &r.Text); err != nil {
			return fmt.Errorf("data: %s:%d: %w", path, lineNo, err)
		}
		if pairField != "" {
			var p string
			if err := jsonString(obj, pairField, &p); err != nil {
				return fmt.Errorf("data: %s:%d: %w", path, lineNo, err)
			}
			r.Pair = &p
		}
		raw, ok := obj[labelField]
		if !ok {
			return fmt.Errorf("data: %s:%d: no field %q", path, lineNo, labelField)
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			r.Label = s
		} else {
			var n json.Number
			if err := json.Unmarshal(raw, &n); err != nil {
				return fmt.Errorf("data: %s:%d: field %q: want a string or a number", path, lineNo, labelField)
			}
			r.Label = n.String()
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, fmt.Errorf("data: %s: no records", path)
	}
	return recs, nil
}

func jsonString(obj map[string]json.RawMessage, field string, dst *string) error {
	raw, ok := obj[field]
	if !ok {
		return fmt.Errorf("no field %q", field)
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("field %q: %w", field, err)
	}
	return nil
}

// Labels maps label strings to ids as HF run_glue does for string labels: the sorted unique
// values of the training set, numbered from 0. Integer labels map to themselves.
func Labels(recs []LabeledText) (map[string]int32, []string) {
	seen := map[string]bool{}
	var names []string
	allInts := true
	for _, r := range recs {
		if !seen[r.Label] {
			seen[r.Label] = true
			names = append(names, r.Label)
			if _, err := strconv.Atoi(r.Label); err != nil {
				allInts = false
			}
		}
	}
	ids := map[string]int32{}
	if allInts {
		sort.Slice(names, func(i, j int) bool { a, _ := strconv.Atoi(names[i]); b, _ := strconv.Atoi(names[j]); return a < b })
		for _, n := range names {
			v, _ := strconv.Atoi(n)
			ids[n] = int32(v)
		}
		return ids, names
	}
	sort.Strings(names)
	for i, n := range names {
		ids[n] = int32(i)
	}
	return ids, names
}

// TokenizeLabeled encodes classification records with special tokens into examples. tok must
// truncate to maxLen (HF's max_seq_length: tokenizer.Pipeline.WithTruncation), so that the
// special tokens survive; a longer encoding is an error, never cut here.
func TokenizeLabeled(ctx context.Context, tok tokenizer.Tokenizer, recs []LabeledText, labels map[string]int32, maxLen int) (SliceDataset, error) {
	inputs := make([]tokenizer.Input, len(recs))
	for i, r := range recs {
		inputs[i] = tokenizer.Input{Text: r.Text, Pair: r.Pair}
	}
	encs, err := tok.EncodeBatch(ctx, inputs, true)
	if err != nil {
		return nil, fmt.Errorf("data: tokenizing: %w", err)
	}
	out := make(SliceDataset, len(recs))
	for i, e := range encs {
		id, ok := labels[recs[i].Label]
		if !ok {
			return nil, fmt.Errorf("data: record %d: label %q is not one of the training labels", i, recs[i].Label)
		}
		if len(e.IDs) > maxLen {
			return nil, fmt.Errorf("data: record %d: %d tokens, more than max_seq_length %d: set the tokenizer's truncation", i, len(e.IDs), maxLen)
		}
		n := len(e.IDs)
		ex := Example{InputIDs: make([]int32, n), TokenTypeIDs: make([]int32, n), Label: id, HasLabel: true}
		for j := range n {
			ex.InputIDs[j] = int32(e.IDs[j])
			if j < len(e.TypeIDs) {
				ex.TokenTypeIDs[j] = int32(e.TypeIDs[j])
			}
		}
		out[i] = ex
	}
	return out, nil
}
