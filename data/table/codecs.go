package table

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// arrow-go's Parquet page reader decodes a compressed page into a buffer of the page's declared
// uncompressed size, but its snappy and zstd codecs allocate whatever the compressed stream
// itself claims when that is larger: a snappy length header or a zstd frame (content size, or
// run-length blocks) of a few corrupt bytes can ask for gigabytes. The page reader takes codecs
// only from arrow-go's registry, so this package registers, once at init, snappy and zstd codecs
// that decode into the given buffer and refuse a stream that would not fit it. For valid data
// their output is byte for byte the original codecs'; with no buffer given (nil dst, as no Parquet
// read does) they defer to the originals. Encoding and streaming are the originals' own.
func init() {
	for _, c := range []compress.Compression{compress.Codecs.Snappy, compress.Codecs.Zstd} {
		orig, err := compress.GetCodec(c)
		if err != nil {
			continue // not built in: nothing to bound
		}
		compress.RegisterCodec(c, boundedCodec{orig: orig, kind: c, zstd: zstdDecoder})
	}
}

// zstdDecoder decodes at most the capacity it is given (WithDecodeAllCapLimit); DecodeAll is safe
// for concurrent use, and a decoder for DecodeAll only starts no goroutines.
var zstdDecoder = func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderConcurrency(1))
	if err != nil {
		panic(fmt.Sprintf("table: zstd decoder: %v", err)) // options are constant: cannot happen
	}
	return d
}()

type boundedCodec struct {
	orig compress.Codec
	kind compress.Compression
	zstd *zstd.Decoder
}

func (c boundedCodec) Encode(dst, src []byte) []byte { return c.orig.Encode(dst, src) }
func (c boundedCodec) EncodeLevel(dst, src []byte, level int) []byte {
	return c.orig.EncodeLevel(dst, src, level)
}
func (c boundedCodec) CompressBound(n int64) int64 { return c.orig.CompressBound(n) }

func (c boundedCodec) Decode(dst, src []byte) []byte {
	out, err := c.DecodeWithError(dst, src)
	if err != nil {
		panic(err) // the Codec interface's way; compress.Decode prefers DecodeWithError
	}
	return out
}

func (c boundedCodec) DecodeWithError(dst, src []byte) ([]byte, error) {
	if dst == nil {
		return compress.Decode(c.orig, nil, src)
	}
	switch c.kind {
	case compress.Codecs.Snappy:
		// A snappy block starts with its decoded length as a uvarint.
		n, k := binary.Uvarint(src)
		if k <= 0 {
			return nil, fmt.Errorf("snappy: corrupt length header")
		}
		if n > uint64(len(dst)) {
			return nil, fmt.Errorf("snappy: block claims %d bytes, the page %d", n, len(dst))
		}
		return compress.Decode(c.orig, dst, src)
	case compress.Codecs.Zstd:
		out, err := c.zstd.DecodeAll(src, dst[:0:len(dst)])
		if err != nil {
			return nil, fmt.Errorf("zstd: %w (the page holds %d bytes)", err, len(dst))
		}
		return out, nil
	}
	return compress.Decode(c.orig, dst, src)
}

func (c boundedCodec) streaming() compress.StreamingCodec {
	s, ok := c.orig.(compress.StreamingCodec)
	if !ok {
		panic(fmt.Sprintf("table: the %v codec does not stream", c.kind))
	}
	return s
}

func (c boundedCodec) NewReader(r io.Reader) io.ReadCloser  { return c.streaming().NewReader(r) }
func (c boundedCodec) NewWriter(w io.Writer) io.WriteCloser { return c.streaming().NewWriter(w) }
func (c boundedCodec) NewWriterLevel(w io.Writer, level int) (io.WriteCloser, error) {
	return c.streaming().NewWriterLevel(w, level)
}
