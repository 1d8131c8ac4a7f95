package compilecache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// The entry file format; the package comment documents it.
const (
	magic          = "GOTPUXLA"
	formatVersion  = 1
	prefixLen      = 16 // magic, version, header length
	trailerLen     = sha256.Size
	maxHeaderBytes = 1 << 20
	// overheadLen is an entry's size besides its header and payload.
	overheadLen = prefixLen + trailerLen
)

// header is an entry's JSON header.
type header struct {
	Key            []KeyField `json:"key"`
	Name           string     `json:"name"`
	CompileSeconds float64    `json:"compile_seconds"`
	Created        time.Time  `json:"created"`
	PayloadBytes   int64      `json:"payload_bytes"`
	PayloadSHA256  string     `json:"payload_sha256"`
}

// encodeHeader returns the header for payload under k with m, as written in the file.
func encodeHeader(k Key, payload []byte, m Meta, created time.Time) ([]byte, error) {
	sum := sha256.Sum256(payload)
	h := header{
		Key:            k.Fields,
		Name:           m.Name,
		CompileSeconds: m.CompileSeconds,
		Created:        created.UTC(),
		PayloadBytes:   int64(len(payload)),
		PayloadSHA256:  hex.EncodeToString(sum[:]),
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	if len(b) > maxHeaderBytes {
		return nil, fmt.Errorf("the entry's header is %d bytes, more than the format's %d (the key or the name is too long)", len(b), maxHeaderBytes)
	}
	return b, nil
}

// writeEntry writes a whole entry: prefix, header, payload and the trailing checksum.
func writeEntry(w io.Writer, hdr, payload []byte) error {
	sum := sha256.New()
	mw := io.MultiWriter(w, sum)
	var prefix [prefixLen]byte
	copy(prefix[:8], magic)
	binary.BigEndian.PutUint32(prefix[8:12], formatVersion)
	binary.BigEndian.PutUint32(prefix[12:16], uint32(len(hdr)))
	for _, b := range [][]byte{prefix[:], hdr, payload} {
		if _, err := mw.Write(b); err != nil {
			return err
		}
	}
	_, err := w.Write(sum.Sum(nil))
	return err
}

// entrySize is the size of the file writeEntry writes.
func entrySize(hdr, payload []byte) int64 { return int64(overheadLen + len(hdr) + len(payload)) }

// errTruncated marks an entry shorter than its own lengths say.
var errTruncated = errors.New("truncated")

// readEntry reads and checks an entry of exactly size bytes from r (size comes from the file's
// fstat, so it bounds everything allocated here). With keep it returns the payload; without, it
// streams the payload through the checksums and returns nil. Every problem is an error, never a
// panic: r can hold anything. The trailing checksum is checked before the header is interpreted,
// so that a flipped bit anywhere reads as corruption rather than as some odd header.
func readEntry(r io.Reader, size int64, keep bool) (header, []byte, error) {
	var h header
	if size < prefixLen {
		return h, nil, fmt.Errorf("%w: %d bytes, shorter than the %d-byte prefix", errTruncated, size, prefixLen)
	}
	sum := sha256.New()
	tr := io.TeeReader(r, sum)
	var prefix [prefixLen]byte
	if _, err := io.ReadFull(tr, prefix[:]); err != nil {
		return h, nil, readError("the prefix", err)
	}
	if string(prefix[:8]) != magic {
		return h, nil, fmt.Errorf("not a gotpu compilation cache entry (magic %q, want %q)", prefix[:8], magic)
	}
	if v := binary.BigEndian.Uint32(prefix[8:12]); v != formatVersion {
		return h, nil, fmt.Errorf("format version %d, this gotpu reads version %d", v, formatVersion)
	}
	hlen := int64(binary.BigEndian.Uint32(prefix[12:16]))
	if hlen > maxHeaderBytes {
		return h, nil, fmt.Errorf("header length %d is more than the format's %d", hlen, maxHeaderBytes)
	}
	plen := size - overheadLen - hlen
	if plen < 0 {
		return h, nil, fmt.Errorf("%w: %d bytes, shorter than its %d-byte header needs", errTruncated, size, hlen)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(tr, hdr); err != nil {
		return h, nil, readError("the header", err)
	}
	psum := sha256.New()
	var payload []byte
	if keep {
		payload = make([]byte, plen)
		if _, err := io.ReadFull(tr, payload); err != nil {
			return h, nil, readError("the payload", err)
		}
		psum.Write(payload)
	} else if err := copyN(psum, tr, plen); err != nil {
		return h, nil, readError("the payload", err)
	}
	want := sum.Sum(nil)
	var trailer [trailerLen]byte
	if _, err := io.ReadFull(r, trailer[:]); err != nil {
		return h, nil, readError("the checksum", err)
	}
	if !bytes.Equal(trailer[:], want) {
		return h, nil, checksumMismatch(hdr, plen)
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return h, nil, fmt.Errorf("header: %w", err)
	}
	if dec.More() {
		return h, nil, errors.New("header: data after the JSON object")
	}
	if h.PayloadBytes != plen {
		return h, nil, fmt.Errorf("header says %d payload bytes, the file holds %d", h.PayloadBytes, plen)
	}
	if got := hex.EncodeToString(psum.Sum(nil)); got != h.PayloadSHA256 {
		return h, nil, fmt.Errorf("payload checksum %s, header says %q", got, h.PayloadSHA256)
	}
	if len(h.Key) == 0 {
		return h, nil, errors.New("header: the key has no fields")
	}
	return h, payload, nil
}

// checksumMismatch describes a file whose checksum fails: as truncated or extended when its
// header (unauthenticated, so only a hint) says another payload length, else as corrupt.
func checksumMismatch(hdr []byte, plen int64) error {
	var h struct {
		PayloadBytes *int64 `json:"payload_bytes"`
	}
	if json.Unmarshal(hdr, &h) == nil && h.PayloadBytes != nil {
		switch n := *h.PayloadBytes; {
		case n > plen:
			return fmt.Errorf("%w: its header says %d payload bytes, the file holds %d (checksum mismatch)", errTruncated, n, plen)
		case n < plen:
			return fmt.Errorf("%d bytes longer than its header says (checksum mismatch): the file is corrupt", plen-n)
		}
	}
	return errors.New("checksum mismatch: the file is corrupt")
}

// copyN copies exactly n bytes from r to w; a short r is io.ErrUnexpectedEOF.
func copyN(w io.Writer, r io.Reader, n int64) error {
	got, err := io.CopyN(w, r, n)
	if err == io.EOF && got < n {
		return io.ErrUnexpectedEOF
	}
	return err
}

func readError(what string, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: the file ends in %s", errTruncated, what)
	}
	return fmt.Errorf("reading %s: %w", what, err)
}

// decodeEntry checks a whole entry held in memory and returns its header and payload (a copy).
func decodeEntry(b []byte) (header, []byte, error) {
	return readEntry(bytes.NewReader(b), int64(len(b)), true)
}
