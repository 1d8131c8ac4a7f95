package safetensors

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gotpu/gotpu/internal/atomicfile"
)

// Tensor is one tensor to write. Give Data; or Load, which is called once while writing (so a
// caller can fetch a tensor from a device just before it is written and drop it right after); or
// Stream, which must write exactly Size() bytes (for a tensor too large to hold at once).
type Tensor struct {
	Name   string
	DType  DType
	Shape  []int
	Data   []byte
	Load   func() ([]byte, error)
	Stream func(w io.Writer) error
}

// Size is the tensor's byte size, prod(Shape) * DType.Size().
func (t Tensor) Size() int64 {
	n, _ := byteSize(t.Shape, t.DType)
	return n
}

// validateForWrite checks names, dtypes and (when Data is given) sizes before anything is written.
func validateForWrite(tensors []Tensor, metadata map[string]string) error {
	seen := make(map[string]bool, len(tensors))
	for _, t := range tensors {
		switch {
		case t.Name == "":
			return fmt.Errorf("%w: empty tensor name", ErrInvalid)
		case t.Name == metadataKey:
			return fmt.Errorf("%w: tensor name %q is reserved", ErrInvalid, metadataKey)
		case !utf8.ValidString(t.Name):
			return fmt.Errorf("%w: tensor name %q is not valid UTF-8", ErrInvalid, t.Name)
		case seen[t.Name]:
			return fmt.Errorf("%w: duplicate tensor name %q", ErrInvalid, t.Name)
		case !t.DType.Known():
			return fmt.Errorf("tensor %q: %w %q", t.Name, ErrUnknownDType, string(t.DType))
		}
		seen[t.Name] = true
		for _, d := range t.Shape {
			if d < 0 {
				return fmt.Errorf("%w: tensor %q: negative dimension in shape %v", ErrInvalid, t.Name, t.Shape)
			}
		}
		size, ok := byteSize(t.Shape, t.DType)
		if !ok {
			return fmt.Errorf("%w: tensor %q: shape %v overflows", ErrInvalid, t.Name, t.Shape)
		}
		if t.Load == nil && t.Stream == nil && int64(len(t.Data)) != size {
			return fmt.Errorf("%w: tensor %q: %d bytes of data for shape %v of %s (%d bytes)",
				ErrInvalid, t.Name, len(t.Data), t.Shape, t.DType, size)
		}
	}
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("%w: %s entry %q is not valid UTF-8", ErrInvalid, metadataKey, k)
		}
	}
	return nil
}

// writeOrder returns the tensors sorted as the Rust serializer sorts them: descending dtype
// alignment (enum order), then ascending name.
func writeOrder(tensors []Tensor) []Tensor {
	out := slices.Clone(tensors)
	slices.SortStableFunc(out, func(a, b Tensor) int {
		if oa, ob := a.DType.order(), b.DType.order(); oa != ob {
			return ob - oa
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// EncodeHeader returns the padded JSON header (without the 8-byte length) for tensors written in
// writeOrder, exactly as the Rust library lays it out.
func EncodeHeader(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	if err := validateForWrite(tensors, metadata); err != nil {
		return nil, err
	}
	return encodeHeader(writeOrder(tensors), metadata), nil
}

func encodeHeader(ordered []Tensor, metadata map[string]string) []byte {
	var b []byte
	b = append(b, '{')
	first := true
	if metadata != nil {
		b = appendJSONString(b, metadataKey)
		b = append(b, ':', '{')
		keys := make([]string, 0, len(metadata))
		for k := range metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, metadata[k])
		}
		b = append(b, '}')
		first = false
	}
	var off int64
	for _, t := range ordered {
		if !first {
			b = append(b, ',')
		}
		first = false
		size := t.Size()
		b = appendJSONString(b, t.Name)
		b = append(b, `:{"dtype":`...)
		b = appendJSONString(b, string(t.DType))
		b = append(b, `,"shape":[`...)
		for i, d := range t.Shape {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(d), 10)
		}
		b = append(b, `],"data_offsets":[`...)
		b = strconv.AppendInt(b, off, 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, off+size, 10)
		b = append(b, ']', '}')
		off += size
	}
	b = append(b, '}')
	// The Rust writer pads with spaces so the data buffer starts 8-byte aligned.
	for len(b)%8 != 0 {
		b = append(b, ' ')
	}
	return b
}

// appendJSONString quotes s the way serde_json does: only '"', '\\' and control characters are
// escaped (\b \f \n \r \t, else \u00xx in lowercase hex); everything else, including non-ASCII and
// '<', '>', '&' (which encoding/json would escape), is written as is.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b = append(b, '\\', '"')
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\b':
			b = append(b, '\\', 'b')
		case c == '\f':
			b = append(b, '\\', 'f')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '\r':
			b = append(b, '\\', 'r')
		case c == '\t':
			b = append(b, '\\', 't')
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// Write writes a safetensors file to w. A nil metadata map writes no "__metadata__" key; a non-nil
// empty one writes "__metadata__":{} (as the Rust library does for Some(empty)).
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	if err := validateForWrite(tensors, metadata); err != nil {
		return err
	}
	ordered := writeOrder(tensors)
	hdr := encodeHeader(ordered, metadata)
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(hdr)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(hdr); err != nil {
		return err
	}
	for _, t := range ordered {
		if t.Stream != nil {
			cw := &countingWriter{w: w}
			if err := t.Stream(cw); err != nil {
				return fmt.Errorf("tensor %q: %w", t.Name, err)
			}
			if cw.n != t.Size() {
				return fmt.Errorf("%w: tensor %q: streamed %d bytes for shape %v of %s (%d bytes)",
					ErrInvalid, t.Name, cw.n, t.Shape, t.DType, t.Size())
			}
			continue
		}
		data := t.Data
		if t.Load != nil {
			var err error
			if data, err = t.Load(); err != nil {
				return fmt.Errorf("tensor %q: %w", t.Name, err)
			}
		}
		if int64(len(data)) != t.Size() {
			return fmt.Errorf("%w: tensor %q: %d bytes of data for shape %v of %s (%d bytes)",
				ErrInvalid, t.Name, len(data), t.Shape, t.DType, t.Size())
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}

// WriteFile writes a safetensors file atomically and durably with internal/atomicfile's policy
// (mode 0666 less the umask; written to a temporary file in the same directory, fsynced, renamed
// over path, the directory fsynced), so a crash never leaves a half-written file under the final
// name.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	if err := validateForWrite(tensors, metadata); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	// atomicfile's errors name path.
	return atomicfile.WriteFile(path, func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		if err := Write(bw, tensors, metadata); err != nil {
			return err
		}
		return bw.Flush()
	})
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
