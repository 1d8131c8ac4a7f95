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

// maxFileSize bounds what FromFile reads or decompresses (the largest
// published tokenizer.json files are a few tens of MB).
const maxFileSize = 1 << 30

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
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, &LoadError{File: path, Err: err}
	}
	return load(filepath.Base(path), data)
}

// FromBytes loads a tokenizer from the contents of a tokenizer.json (or of a
// gzip-compressed one). Errors name the file "tokenizer.json".
func FromBytes(data []byte) (*Pipeline, error) {
	return load("tokenizer.json", data)
}

func load(name string, data []byte) (*Pipeline, error) {
	if len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, &LoadError{File: name, Err: fmt.Errorf("gzip: %w", err)}
		}
		plain, err := io.ReadAll(io.LimitReader(zr, maxFileSize+1))
		if err != nil {
			return nil, &LoadError{File: name, Err: fmt.Errorf("gzip: %w", err)}
		}
		data = plain
	}
	if len(data) > maxFileSize {
		return nil, &LoadError{File: name, Err: fmt.Errorf("larger than %d bytes", maxFileSize)}
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
