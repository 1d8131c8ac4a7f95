package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// MaxHeaderSize is the largest JSON header accepted, in bytes: the Rust library's limit, kept so
// that every file it writes and reads is readable here. Real headers are far smaller (about 150
// bytes a tensor: a 1000-tensor checkpoint has a 150 KB header).
const MaxHeaderSize = 100_000_000

// MaxTensors is the most tensors a file may hold: 131072, above the largest published
// checkpoints even unsharded (DeepSeek-V3's ~91k tensors over 163 shards). The Rust library has
// no such limit; without one a maximal header of empty tensors (1.3M of them in 91 MB) takes a
// gigabyte and seconds to parse. The header's members are counted by a byte scan, allocating
// nothing, before it is decoded, so parsing any accepted header takes memory proportional to
// its size: the header itself plus at most MaxTensors entries (about 220 bytes each on the
// fast path that writers' headers take, parseFast; about 1.6 KB of garbage each on the general
// path, for headers with escaped strings).
const MaxTensors = 1 << 17

// metadataKey is the reserved header key holding free-form string metadata.
const metadataKey = "__metadata__"

// Sentinel errors wrapped by every error this package returns.
var (
	// ErrInvalid: the file does not follow the safetensors format.
	ErrInvalid = errors.New("invalid safetensors file")
	// ErrUnknownDType: a tensor has a dtype this package does not know.
	ErrUnknownDType = errors.New("unknown safetensors dtype")
	// ErrTruncated: the file is shorter than its header says.
	ErrTruncated = errors.New("truncated safetensors file")
)

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name  string
	DType DType
	Shape []int
	// Begin and End are byte offsets into the data buffer (after the header), End exclusive.
	Begin, End int64
}

// NumElements is the product of the shape (1 for a scalar).
func (t TensorInfo) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d)
	}
	return n
}

// Header is a parsed and validated safetensors header.
type Header struct {
	// Tensors in data-offset order.
	Tensors []TensorInfo
	// Metadata is the "__metadata__" object, nil when absent or null.
	Metadata map[string]string
	// HeaderSize is N, the JSON length in bytes; data starts at 8+N.
	HeaderSize int64

	index map[string]int
}

// Lookup returns the tensor called name.
func (h *Header) Lookup(name string) (TensorInfo, bool) {
	i, ok := h.index[name]
	if !ok {
		return TensorInfo{}, false
	}
	return h.Tensors[i], true
}

// DataSize is the size of the data buffer the header describes.
func (h *Header) DataSize() int64 {
	if len(h.Tensors) == 0 {
		return 0
	}
	return h.Tensors[len(h.Tensors)-1].End
}

// readHeaderLength decodes and bounds-checks the 8-byte prefix against the file size.
func readHeaderLength(prefix []byte, fileSize int64) (int64, error) {
	if fileSize < 8 || len(prefix) < 8 {
		return 0, fmt.Errorf("%w: %d bytes, shorter than the 8-byte header length", ErrTruncated, fileSize)
	}
	n := binary.LittleEndian.Uint64(prefix)
	if n > MaxHeaderSize {
		return 0, fmt.Errorf("%w: header length %d is over the %d-byte limit", ErrInvalid, n, MaxHeaderSize)
	}
	if int64(n) > fileSize-8 {
		return 0, fmt.Errorf("%w: header length %d but only %d bytes follow", ErrTruncated, n, fileSize-8)
	}
	return int64(n), nil
}

// Parse validates a whole safetensors file held in memory and returns its header.
func Parse(buf []byte) (*Header, error) {
	n, err := readHeaderLength(buf, int64(len(buf)))
	if err != nil {
		return nil, err
	}
	return parseHeader(buf[8:8+n], int64(len(buf))-8-n)
}

// parseHeader decodes the JSON header and validates it against a data buffer of dataSize bytes.
func parseHeader(js []byte, dataSize int64) (*Header, error) {
	// encoding/json replaces invalid UTF-8 with U+FFFD instead of failing, so check first: two
	// different byte strings must never decode to the same tensor name.
	if !utf8.Valid(js) {
		return nil, fmt.Errorf("%w: header is not valid UTF-8", ErrInvalid)
	}
	// One more member than MaxTensors may be __metadata__.
	members := countMembers(js, MaxTensors+2)
	if members > MaxTensors+1 {
		return nil, fmt.Errorf("%w: header: more than %d tensors (MaxTensors)", ErrInvalid, MaxTensors)
	}
	if h, ok := parseFast(js, members); ok {
		if err := h.validateOffsets(dataSize); err != nil {
			return nil, err
		}
		return h, nil
	}
	return parseDecoder(js, dataSize)
}

// parseDecoder is parseHeader's general path: encoding/json's token stream, which handles any
// valid JSON and reports what is wrong with any other, at about 1.5 KB of garbage a tensor.
func parseDecoder(js []byte, dataSize int64) (*Header, error) {
	h := &Header{HeaderSize: int64(len(js)), index: map[string]int{}}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	if err := expectDelim(dec, '{', "header"); err != nil {
		return nil, err
	}
	sawMetadata := false
	for dec.More() {
		if len(h.Tensors) == MaxTensors { // countMembers is not a parser: check again
			return nil, fmt.Errorf("%w: header: more than %d tensors (MaxTensors)", ErrInvalid, MaxTensors)
		}
		key, err := readKey(dec, "header")
		if err != nil {
			return nil, err
		}
		if key == metadataKey {
			if sawMetadata {
				return nil, fmt.Errorf("%w: duplicate %q", ErrInvalid, metadataKey)
			}
			sawMetadata = true
			if h.Metadata, err = readMetadata(dec); err != nil {
				return nil, err
			}
			continue
		}
		if key == "" {
			return nil, fmt.Errorf("%w: empty tensor name", ErrInvalid)
		}
		if _, dup := h.index[key]; dup {
			return nil, fmt.Errorf("%w: duplicate tensor name %q", ErrInvalid, key)
		}
		info, err := readTensorInfo(dec, key)
		if err != nil {
			return nil, err
		}
		h.index[key] = len(h.Tensors)
		h.Tensors = append(h.Tensors, info)
	}
	if err := expectDelim(dec, '}', "header"); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the header's JSON object", ErrInvalid)
	}
	if err := h.validateOffsets(dataSize); err != nil {
		return nil, err
	}
	return h, nil
}

// countMembers counts the members of the top-level JSON object in js (its colons at depth one,
// outside strings), stopping at limit. It allocates nothing and does not validate: the decoder
// does that afterwards.
func countMembers(js []byte, limit int) int {
	n, depth := 0, 0
	inString, escape := false, false
	for _, c := range js {
		if inString {
			switch {
			case escape:
				escape = false
			case c == '\\':
				escape = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ':':
			if depth == 1 {
				if n++; n >= limit {
					return n
				}
			}
		}
	}
	return n
}

// validateOffsets sorts the tensors by offset and checks that they tile [0, dataSize) exactly.
func (h *Header) validateOffsets(dataSize int64) error {
	slices.SortStableFunc(h.Tensors, func(a, b TensorInfo) int {
		if a.Begin != b.Begin {
			return cmpInt64(a.Begin, b.Begin)
		}
		return cmpInt64(a.End, b.End)
	})
	var pos int64
	for i, t := range h.Tensors {
		h.index[t.Name] = i
		if t.Begin != pos {
			if t.Begin < pos {
				return fmt.Errorf("%w: tensor %q: data_offsets [%d, %d] overlap the previous tensor (ends at %d)",
					ErrInvalid, t.Name, t.Begin, t.End, pos)
			}
			return fmt.Errorf("%w: tensor %q: data_offsets [%d, %d] leave a gap after offset %d",
				ErrInvalid, t.Name, t.Begin, t.End, pos)
		}
		if t.End > dataSize {
			return fmt.Errorf("%w: tensor %q: data_offsets [%d, %d] past the end of the data (%d bytes)",
				ErrTruncated, t.Name, t.Begin, t.End, dataSize)
		}
		pos = t.End
	}
	if pos != dataSize {
		return fmt.Errorf("%w: tensors cover %d bytes of data but the file holds %d after the header",
			ErrInvalid, pos, dataSize)
	}
	return nil
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func expectDelim(dec *json.Decoder, want json.Delim, what string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("%w: %s: expected %q, found %s", ErrInvalid, what, string(want), describeToken(tok))
	}
	return nil
}

func describeToken(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		return strconv.Quote(string(v))
	case string:
		return "string " + strconv.Quote(v)
	case json.Number:
		return "number " + v.String()
	case bool:
		return "boolean " + strconv.FormatBool(v)
	}
	return fmt.Sprintf("%v", tok)
}

func readKey(dec *json.Decoder, what string) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrInvalid, what, err)
	}
	key, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("%w: %s: expected a key, found %s", ErrInvalid, what, describeToken(tok))
	}
	return key, nil
}

// readMetadata reads the "__metadata__" value: an object of strings, or null.
func readMetadata(dec *json.Decoder) (map[string]string, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, metadataKey, err)
	}
	if tok == nil {
		return nil, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%w: %s: expected an object, found %s", ErrInvalid, metadataKey, describeToken(tok))
	}
	md := map[string]string{}
	for dec.More() {
		k, err := readKey(dec, metadataKey)
		if err != nil {
			return nil, err
		}
		if _, dup := md[k]; dup {
			return nil, fmt.Errorf("%w: %s: duplicate key %q", ErrInvalid, metadataKey, k)
		}
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %s[%q]: %v", ErrInvalid, metadataKey, k, err)
		}
		v, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("%w: %s[%q]: expected a string, found %s", ErrInvalid, metadataKey, k, describeToken(tok))
		}
		md[k] = v
	}
	if err := expectDelim(dec, '}', metadataKey); err != nil {
		return nil, err
	}
	return md, nil
}

// readTensorInfo reads one tensor entry: exactly the fields dtype, shape and data_offsets.
func readTensorInfo(dec *json.Decoder, name string) (TensorInfo, error) {
	info := TensorInfo{Name: name}
	where := "tensor " + strconv.Quote(name)
	if err := expectDelim(dec, '{', where); err != nil {
		return info, err
	}
	// The three fields, as bits: a map per tensor cost more than the tensor's entry.
	const sawDType, sawShape, sawOffsets = 1, 2, 4
	seen := 0
	for dec.More() {
		field, err := readKey(dec, where)
		if err != nil {
			return info, err
		}
		bit := 0
		switch field {
		case "dtype":
			bit = sawDType
		case "shape":
			bit = sawShape
		case "data_offsets":
			bit = sawOffsets
		}
		if bit != 0 && seen&bit != 0 {
			return info, fmt.Errorf("%w: %s: duplicate field %q", ErrInvalid, where, field)
		}
		seen |= bit
		switch field {
		case "dtype":
			tok, err := dec.Token()
			if err != nil {
				return info, fmt.Errorf("%w: %s: dtype: %v", ErrInvalid, where, err)
			}
			s, ok := tok.(string)
			if !ok {
				return info, fmt.Errorf("%w: %s: dtype: expected a string, found %s", ErrInvalid, where, describeToken(tok))
			}
			if info.DType, err = ParseDType(s); err != nil {
				return info, fmt.Errorf("%s: %w", where, err)
			}
		case "shape":
			dims, err := readUintArray(dec, where+": shape", -1)
			if err != nil {
				return info, err
			}
			info.Shape = make([]int, len(dims))
			for i, d := range dims {
				if int64(int(d)) != d {
					return info, fmt.Errorf("%w: %s: shape dimension %d is too large", ErrInvalid, where, d)
				}
				info.Shape[i] = int(d)
			}
		case "data_offsets":
			offs, err := readUintArray(dec, where+": data_offsets", 2)
			if err != nil {
				return info, err
			}
			info.Begin, info.End = offs[0], offs[1]
		default:
			return info, fmt.Errorf("%w: %s: unknown field %q", ErrInvalid, where, field)
		}
	}
	if err := expectDelim(dec, '}', where); err != nil {
		return info, err
	}
	for _, f := range []struct {
		name string
		bit  int
	}{{"dtype", sawDType}, {"shape", sawShape}, {"data_offsets", sawOffsets}} {
		if seen&f.bit == 0 {
			return info, fmt.Errorf("%w: %s: missing field %q", ErrInvalid, where, f.name)
		}
	}
	return info, checkTensorInfo(info, where)
}

// checkTensorInfo checks a tensor entry's offsets against its shape and dtype.
func checkTensorInfo(info TensorInfo, where string) error {
	if info.End < info.Begin {
		return fmt.Errorf("%w: %s: data_offsets [%d, %d] end before they begin", ErrInvalid, where, info.Begin, info.End)
	}
	size, ok := byteSize(info.Shape, info.DType)
	if !ok {
		return fmt.Errorf("%w: %s: shape %v of %s overflows", ErrInvalid, where, info.Shape, info.DType)
	}
	if size != info.End-info.Begin {
		return fmt.Errorf("%w: %s: shape %v of %s is %d bytes but data_offsets [%d, %d] span %d",
			ErrInvalid, where, info.Shape, info.DType, size, info.Begin, info.End, info.End-info.Begin)
	}
	return nil
}

// byteSize is prod(shape) * dtype size, with ok=false on overflow of int64.
func byteSize(shape []int, d DType) (int64, bool) {
	n := uint64(d.Size())
	for _, s := range shape {
		hi, lo := bits.Mul64(n, uint64(s))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		n = lo
	}
	return int64(n), true
}

// readUintArray reads a JSON array of non-negative integers; want < 0 accepts any length.
func readUintArray(dec *json.Decoder, where string, want int) ([]int64, error) {
	if err := expectDelim(dec, '[', where); err != nil {
		return nil, err
	}
	var out []int64
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrInvalid, where, err)
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%w: %s: expected an integer, found %s", ErrInvalid, where, describeToken(tok))
		}
		v, err := strconv.ParseInt(num.String(), 10, 64)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%w: %s: %s is not a non-negative 64-bit integer", ErrInvalid, where, num)
		}
		out = append(out, v)
	}
	if err := expectDelim(dec, ']', where); err != nil {
		return nil, err
	}
	if want >= 0 && len(out) != want {
		return nil, fmt.Errorf("%w: %s: %d values, want %d", ErrInvalid, where, len(out), want)
	}
	return out, nil
}
