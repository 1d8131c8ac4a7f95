package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"unicode/utf8"
)

type loadOptions struct {
	cacheCapacity int
}

// MaxFileSize bounds a tokenizer.json, read or decompressed: 128 MiB. The
// largest published tokenizer.json files are 10-35 MB (Gemma 3's, a 262k
// vocabulary, is about 33 MB), and parsing takes several times the file's
// size in memory, so a larger file is refused before it is parsed — and a
// gzip bomb (1 MB expanding to 1 GiB) after MaxFileSize+1 decompressed
// bytes, never held whole. Plain and compressed files share the limit.
const MaxFileSize = 128 << 20

// ErrTooLarge is wrapped by the error for a tokenizer larger than
// MaxFileSize.
var ErrTooLarge = errors.New("tokenizer file too large")

// tooLarge is the error for a file (or its decompressed content) over the
// limit.
func tooLarge(file, what string) error {
	return &LoadError{File: file, Err: fmt.Errorf("%w: %s; the limit is %d MiB (tokenizer.MaxFileSize: published tokenizer.json files are under 40 MB)",
		ErrTooLarge, what, MaxFileSize>>20)}
}

// FromFile loads a tokenizer from a tokenizer.json file, a gzip-compressed
// tokenizer.json.gz, or a directory holding either.
func FromFile(path string) (*Pipeline, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, &LoadError{File: path, Err: err}
	}
	if st.IsDir() {
		found := ""
		for _, name := range []string{"tokenizer.json", "tokenizer.json.gz"} {
			p := filepath.Join(path, name)
			if _, err := os.Stat(p); err == nil {
				found = p
				break
			}
		}
		if found == "" {
			return nil, &LoadError{File: path, Err: errors.New("directory has no tokenizer.json or tokenizer.json.gz")}
		}
		path = found
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, &LoadError{File: path, Err: err}
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() && st.Size() > MaxFileSize {
		return nil, tooLarge(path, fmt.Sprintf("%d bytes", st.Size()))
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, &LoadError{File: path, Err: err}
	}
	if len(data) > MaxFileSize {
		return nil, tooLarge(path, "more than the limit")
	}
	if isGzip(data) {
		if data, err = gunzip(path, data); err != nil {
			return nil, err
		}
	}
	return load(filepath.Base(path), data)
}

// FromBytes loads a tokenizer from the contents of a tokenizer.json (or of a
// gzip-compressed one). Errors name the file "tokenizer.json".
func FromBytes(data []byte) (*Pipeline, error) {
	return load("tokenizer.json", data)
}

func isGzip(data []byte) bool { return len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b }

// gunzip decompresses at most MaxFileSize bytes; more is an error naming file.
func gunzip(file string, data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, &LoadError{File: file, Err: fmt.Errorf("gzip: %w", err)}
	}
	// Read in 1 MiB chunks joined once at the end: what is allocated is at most the limit twice
	// over, whatever the compression ratio (io.ReadAll's growth would copy as it grows).
	var chunks [][]byte
	total := 0
	for {
		chunk := make([]byte, 1<<20)
		n, err := io.ReadFull(zr, chunk)
		total += n
		if total > MaxFileSize {
			return nil, tooLarge(file, fmt.Sprintf("decompresses to more than %d bytes", MaxFileSize))
		}
		chunks = append(chunks, chunk[:n])
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, &LoadError{File: file, Err: fmt.Errorf("gzip: %w", err)}
		}
	}
	plain := make([]byte, 0, total)
	for _, c := range chunks {
		plain = append(plain, c...)
	}
	return plain, nil
}

func load(name string, data []byte) (*Pipeline, error) {
	if isGzip(data) {
		var err error
		if data, err = gunzip(name, data); err != nil {
			return nil, err
		}
	}
	if len(data) > MaxFileSize {
		return nil, tooLarge(name, fmt.Sprintf("%d bytes", len(data)))
	}
	p, err := parseTokenizer(data, loadOptions{cacheCapacity: defaultCacheSize})
	if err != nil {
		le := &LoadError{File: name, Err: err}
		var fe *fieldError
		if errors.As(err, &fe) {
			le.Field, le.Err = fe.path, fe.err
		}
		return nil, le
	}
	return p, nil
}

func parseTokenizer(data []byte, opts loadOptions) (*Pipeline, error) {
	if !utf8.Valid(data) {
		off := 0
		for off < len(data) {
			r, size := utf8.DecodeRune(data[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		line, col := lineCol(data, off)
		err := fmt.Errorf("invalid UTF-8 at byte %d (line %d, column %d)", off, line, col)
		if path := pathAtOffset(data, int64(off)); path != "" {
			return nil, &fieldError{path: path, err: err}
		}
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "" {
			return nil, fmt.Errorf("expected a JSON object at the top level, got %s", kind(bytes.TrimSpace(data)))
		}
		return nil, syntaxError(data, err)
	}
	root := jobj{m: top}
	p := &Pipeline{}
	var err error
	if p.normalizer, err = parseNormalizer(root.get("normalizer")); err != nil {
		return nil, err
	}
	if p.pre, err = parsePreTokenizer(root.get("pre_tokenizer")); err != nil {
		return nil, err
	}
	if p.model, err = parseModel(root.get("model"), opts); err != nil {
		return nil, err
	}
	if p.post, err = parsePostProcessor(root.get("post_processor")); err != nil {
		return nil, err
	}
	if p.dec, err = parseDecoder(root.get("decoder")); err != nil {
		return nil, err
	}
	if p.added, err = parseAddedTokens(root.get("added_tokens"), p.model, p.normalizer); err != nil {
		return nil, err
	}
	if p.truncation, err = parseTruncation(root.get("truncation")); err != nil {
		return nil, err
	}
	if p.padding, err = parsePadding(root.get("padding")); err != nil {
		return nil, err
	}
	p.vocabWithAdded = p.model.distinctTokens()
	for content := range p.added.byContent {
		if _, ok := p.model.tokenToID(content); !ok {
			p.vocabWithAdded++
		}
	}
	return p, nil
}
