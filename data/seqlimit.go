package data

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// ErrSequenceTooLong is wrapped by the error for an example with more tokens than a model takes.
var ErrSequenceTooLong = errors.New("sequence longer than the model takes")

// JSONLOptions bound what OpenJSONLWith accepts.
type JSONLOptions struct {
	// MaxSeqLength refuses a line whose input_ids (or attention_mask, token_type_ids, position_ids, labels)
	// array holds more values: the model's n_positions / max_position_embeddings. It is checked
	// while the file is indexed, by counting the array's elements as the bytes stream past,
	// before any line is held in memory or decoded, so a line of 50M ids is refused at the cost
	// of reading it once. 0: no limit.
	MaxSeqLength int
}

// Validate names the first bad field.
func (o JSONLOptions) Validate() error {
	if o.MaxSeqLength < 0 {
		return fmt.Errorf("data.JSONLOptions.MaxSeqLength: %d is negative", o.MaxSeqLength)
	}
	return nil
}

// OpenJSONLWith is OpenJSONL with limits checked while the file is indexed; errors name the
// file, the line and the field.
func OpenJSONLWith(path string, opts JSONLOptions) (*JSONLDataset, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	idx, err := indexLines(path, opts.MaxSeqLength)
	if err != nil {
		return nil, err
	}
	if idx.Len() == 0 {
		idx.Close()
		return nil, fmt.Errorf("data: %s: no examples", path)
	}
	return &JSONLDataset{idx: idx}, nil
}

// seqFields are the columns whose arrays hold one value per token (ParseExample's; encoding/json
// matches keys case-insensitively, so the scanner does too).
var seqFields = []string{"input_ids", "attention_mask", "token_type_ids", "position_ids", "labels", "label"}

// maxKeyBytes bounds the key bytes the scanner keeps: the longest field above, even written with
// \u escapes (6 bytes a character), fits.
const maxKeyBytes = 128

// seqCounter counts, in a stream of bytes holding one JSON object, the elements of each
// top-level array whose key is a sequence column, and stops at the first that has more than
// limit. It never holds the line: only the current key, at most maxKeyBytes of it. It does not
// validate JSON (ParseExample does that when the line is read); on malformed input it may
// count wrongly, never allocate more.
type seqCounter struct {
	limit int

	depth    int
	inString bool
	escape   bool
	// atKey: the next string at depth 1 is a key. keyBuf collects it (keyLong once it overflows).
	atKey   bool
	inKey   bool
	keyBuf  []byte
	keyLong bool
	// pending is the sequence column whose value comes next; counting its array at depth 2.
	pending  string
	counting string
	// collect keeps the top-level keys (FirstRecordKeys), at most maxKeys of them.
	collect bool
	keys    []string
	elems   int // elements seen in the counted array
	inElem  bool

	err error
}

func newSeqCounter(limit int) *seqCounter {
	return &seqCounter{limit: limit, keyBuf: make([]byte, 0, maxKeyBytes)}
}

// reset prepares for the next line.
func (c *seqCounter) reset() {
	*c = seqCounter{limit: c.limit, keyBuf: c.keyBuf[:0], collect: c.collect}
}

// write scans the next bytes of the line; it returns false once a limit is exceeded (err set).
func (c *seqCounter) write(b []byte) bool {
	if c.err != nil {
		return false
	}
	for _, ch := range b {
		if c.inString {
			if c.inKey && !c.keyLong {
				if len(c.keyBuf) < maxKeyBytes {
					c.keyBuf = append(c.keyBuf, ch)
				} else {
					c.keyLong = true
				}
			}
			switch {
			case c.escape:
				c.escape = false
			case ch == '\\':
				c.escape = true
			case ch == '"':
				c.inString = false
				if c.inKey {
					c.inKey = false
					c.endKey()
				}
			}
			continue
		}
		switch ch {
		case ' ', '\t', '\r', '\n':
			continue
		case '"':
			c.inString = true
			if c.depth == 1 && c.atKey {
				c.inKey, c.keyLong = true, false
				c.keyBuf = c.keyBuf[:0]
				continue
			}
		case '{', '[':
			c.depth++
			if ch == '[' && c.depth == 2 && c.pending != "" {
				c.counting, c.elems, c.inElem = c.pending, 0, false
				c.pending = ""
				continue
			}
			if c.depth == 1 {
				c.atKey = true
			}
		case '}', ']':
			if c.depth == 2 && c.counting != "" {
				c.counting = ""
			}
			c.depth--
		case ',':
			if c.depth == 1 {
				c.atKey, c.pending = true, ""
			}
			if c.depth == 2 && c.counting != "" {
				c.inElem = false
			}
			continue
		case ':':
			if c.depth == 1 {
				c.atKey = false
			}
			continue
		}
		if c.depth == 1 && ch != '"' && ch != '{' {
			c.pending = "" // a scalar value: nothing to count
		}
		// A value starts inside the counted array: count it when it starts.
		if c.counting != "" && c.depth >= 2 && !c.inElem {
			c.inElem = true
			c.elems++
			if c.elems > c.limit {
				c.err = fmt.Errorf("field %q: more than %d values, the longest sequence the model takes "+
					"(n_positions / max_position_embeddings): %w", c.counting, c.limit, ErrSequenceTooLong)
				return false
			}
		}
	}
	return true
}

// endKey decides whether the key just read names a sequence column.
func (c *seqCounter) endKey() {
	c.pending = ""
	if c.keyLong || len(c.keyBuf) == 0 {
		return
	}
	key := string(c.keyBuf[:len(c.keyBuf)-1]) // without the closing quote
	if strings.IndexByte(key, '\\') >= 0 {
		var s string
		if json.Unmarshal([]byte(`"`+key+`"`), &s) != nil {
			return
		}
		key = s
	}
	for _, f := range seqFields {
		if strings.EqualFold(key, f) {
			c.pending = f
			break
		}
	}
	if c.collect && len(c.keys) < maxKeys {
		c.keys = append(c.keys, key)
	}
	if c.limit <= 0 {
		c.pending = "" // only collecting keys
	}
}

// maxKeys bounds the keys FirstRecordKeys returns.
const maxKeys = 1024

// FirstRecordKeys returns the top-level keys of the first non-blank line of a JSON-lines file
// (at most 1024, each at most 128 bytes as written), streaming it: however long the line, only
// its keys are held. It does not validate the JSON; reading the records does.
func FirstRecordKeys(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<16)
	c := newSeqCounter(0)
	c.collect = true
	started := false
	for lineNo := 1; ; {
		chunk, err := r.ReadSlice('\n')
		started = started || len(bytes.TrimSpace(chunk)) > 0
		c.write(chunk)
		if err == nil && !started {
			lineNo++
			continue
		}
		if err == nil || err == io.EOF {
			if !started {
				return nil, fmt.Errorf("data: %s: no records", path)
			}
			return c.keys, nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("data: %s:%d: %w", path, lineNo, err)
		}
	}
}
