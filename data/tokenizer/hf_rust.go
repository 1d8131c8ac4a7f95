//go:build hftokenizers

package tokenizer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"

	hf "github.com/daulet/tokenizers"
)

// HFRust is the Tokenizer backed by Hugging Face's Rust tokenizers library,
// through the cgo bindings of github.com/daulet/tokenizers. It exists to
// cross-check the pure-Go Pipeline and as a fallback; see the package
// documentation for how to build it.
//
// Differences from *Pipeline, all due to what the bindings expose:
// EncodePair returns an error wrapping ErrUnsupported; WordIDs are nil and
// there are no overflowing windows; EncodeBatch does not pad to the longest
// of the batch (the library pads each encoding as its tokenizer.json says);
// texts containing NUL bytes are rejected (they cross a C string); token
// lookups and VocabSize(false) come from reading the tokenizer.json here.
type HFRust struct {
	mu     sync.RWMutex // Close must not free the library object under a running call
	tk     *hf.Tokenizer
	vocab  map[string]uint32
	ids    map[uint32]string
	model  int
	closed bool
}

var _ Tokenizer = (*HFRust)(nil)

// HFRustFromFile loads a tokenizer.json (or a directory holding one) with the
// Rust library.
func HFRustFromFile(path string) (*HFRust, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, "tokenizer.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &LoadError{File: path, Err: err}
	}
	return hfRustFromBytes(filepath.Base(path), data)
}

// HFRustFromBytes loads the contents of a tokenizer.json with the Rust
// library.
func HFRustFromBytes(data []byte) (*HFRust, error) { return hfRustFromBytes("tokenizer.json", data) }

func hfRustFromBytes(name string, data []byte) (*HFRust, error) {
	r := &HFRust{vocab: map[string]uint32{}, ids: map[uint32]string{}}
	if err := r.readVocab(data); err != nil {
		return nil, &LoadError{File: name, Err: err}
	}
	tk, err := hf.FromBytes(data)
	if err != nil {
		return nil, &LoadError{File: name, Err: err}
	}
	r.tk = tk
	return r, nil
}

// readVocab reads the model vocabulary and the added tokens for the lookup
// methods the bindings do not provide.
func (r *HFRust) readVocab(data []byte) error {
	var doc struct {
		Model struct {
			Vocab json.RawMessage `json:"vocab"`
		} `json:"model"`
		AddedTokens []struct {
			ID      uint32 `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return fmt.Errorf("reading the vocabulary: %w", err)
	}
	var asMap map[string]uint32
	var asList [][2]any
	switch {
	case json.Unmarshal(doc.Model.Vocab, &asMap) == nil:
		for tok, id := range asMap {
			r.vocab[tok], r.ids[id] = id, tok
		}
		r.model = len(asMap)
	case json.Unmarshal(doc.Model.Vocab, &asList) == nil:
		for i, e := range asList {
			if s, ok := e[0].(string); ok && i <= math.MaxUint32 {
				r.vocab[s], r.ids[uint32(i)] = uint32(i), s
			}
		}
		r.model = len(asList)
	default:
		return errors.New("model.vocab: neither a map nor a list")
	}
	for _, t := range doc.AddedTokens {
		r.vocab[t.Content], r.ids[t.ID] = t.ID, t.Content
	}
	return nil
}

func (r *HFRust) encode(text string, add bool) (*Encoding, error) {
	if strings.IndexByte(text, 0) >= 0 {
		return nil, errors.New("hftokenizers backend: text contains a NUL byte, which cannot cross the C API")
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return nil, errors.New("hftokenizers backend: tokenizer is closed")
	}
	res := r.tk.EncodeWithOptions(text, add, hf.WithReturnAllAttributes())
	e := &Encoding{
		IDs:               res.IDs,
		Tokens:            res.Tokens,
		TypeIDs:           res.TypeIDs,
		SpecialTokensMask: res.SpecialTokensMask,
		AttentionMask:     res.AttentionMask,
	}
	// The bindings return byte offsets; convert them as the reference's
	// encode_char_offsets does.
	conv := newCharConverter(text)
	for _, o := range res.Offsets {
		s := span{int(o[0]), int(o[1])}
		e.ByteOffsets = append(e.ByteOffsets, Offset{s.start, s.end})
		if s.start == 0 && s.end == 0 {
			e.Offsets = append(e.Offsets, Offset{})
			continue
		}
		e.Offsets = append(e.Offsets, conv.convert(s))
	}
	return e, nil
}

// Encode implements Tokenizer.
func (r *HFRust) Encode(text string, addSpecialTokens bool) (*Encoding, error) {
	return r.encode(text, addSpecialTokens)
}

// EncodePair implements Tokenizer; the bindings have no pair encoding.
func (r *HFRust) EncodePair(text, pair string, addSpecialTokens bool) (*Encoding, error) {
	return nil, fmt.Errorf("hftokenizers backend: pair encoding: %w", ErrUnsupported)
}

// EncodeBatch implements Tokenizer.
func (r *HFRust) EncodeBatch(ctx context.Context, inputs []Input, addSpecialTokens bool) ([]*Encoding, error) {
	out := make([]*Encoding, len(inputs))
	err := parallel(ctx, len(inputs), func(i int) error {
		if inputs[i].Pair != nil {
			return &BatchError{Index: i, Err: fmt.Errorf("hftokenizers backend: pair encoding: %w", ErrUnsupported)}
		}
		e, err := r.encode(inputs[i].Text, addSpecialTokens)
		if err != nil {
			return &BatchError{Index: i, Err: err}
		}
		out[i] = e
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Decode implements Tokenizer.
func (r *HFRust) Decode(ids []uint32, skipSpecialTokens bool) (string, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return "", errors.New("hftokenizers backend: tokenizer is closed")
	}
	return r.tk.Decode(ids, skipSpecialTokens), nil
}

// DecodeBatch implements Tokenizer.
func (r *HFRust) DecodeBatch(ctx context.Context, ids [][]uint32, skipSpecialTokens bool) ([]string, error) {
	out := make([]string, len(ids))
	err := parallel(ctx, len(ids), func(i int) error {
		s, err := r.Decode(ids[i], skipSpecialTokens)
		out[i] = s
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// TokenToID implements Tokenizer.
func (r *HFRust) TokenToID(token string) (uint32, bool) { id, ok := r.vocab[token]; return id, ok }

// IDToToken implements Tokenizer.
func (r *HFRust) IDToToken(id uint32) (string, bool) { s, ok := r.ids[id]; return s, ok }

// VocabSize implements Tokenizer.
func (r *HFRust) VocabSize(withAddedTokens bool) int {
	if !withAddedTokens {
		return r.model
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.closed {
		return len(r.vocab)
	}
	return int(r.tk.VocabSize())
}

// Close frees the Rust tokenizer. Calls after Close return errors.
func (r *HFRust) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	return r.tk.Close()
}
