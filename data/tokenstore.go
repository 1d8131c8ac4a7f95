package data

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
)

// A token store file (format version 1, all integers little-endian):
//
//	header  "GOTPUTOK" (8 bytes), uint32 version, uint32 reserved (0)
//	record  uint32 n (tokens), uint32 flags, int32 label, uint32 CRC-32C (Castagnoli) of the
//	        record's first 12 bytes and its payload; then the payload: n int32 input_ids, then
//	        n int32 attention_mask, token_type_ids, labels and position_ids, each present when its
//	        flag is set
//
// Flags: storeMask, storeTypes, storeLabels, storePositions (which arrays follow),
// storeHasLabel (label is a sequence label). storePositions came after the first files: a file
// without it reads as before. The records follow one another; the store keeps where each starts in memory,
// so a record is read with one ReadAt and its length is known before it is read.
const (
	storeMagic      = "GOTPUTOK"
	storeVersion    = 1
	storeHeaderSize = 16
	recordHeaderLen = 16

	storeMask     = 1 << 0
	storeTypes    = 1 << 1
	storeLabels   = 1 << 2
	storeHasLabel = 1 << 3
	// storePositions: packed examples' position_ids (PackBFD), which must not be lost on the way
	// through a store (the model would attend across the packed examples).
	storePositions = 1 << 4
	storeFlags     = storeMask | storeTypes | storeLabels | storeHasLabel | storePositions

	// maxStoreTokens bounds one example (far beyond any model's n_positions), so that reading a
	// record never allocates more than 5 arrays of it, whatever the file holds.
	maxStoreTokens = 1 << 24
	maxRecordBytes = recordHeaderLen + 5*4*maxStoreTokens
)

// castagnoli is the CRC-32C table (hardware-accelerated on amd64 and arm64); never written after
// initialisation.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// StoreOptions configure a TokenStoreBuilder.
type StoreOptions struct {
	// Dir is where the store's file is created ("" = os.TempDir()). The file is unlinked as soon
	// as it is created where the OS allows (so a crash leaves nothing behind) and removed by
	// Close (or Abort) otherwise.
	Dir string
	// MaxSeqLength > 0 refuses an example with more tokens (the model's n_positions), naming the
	// row, before anything of it is stored. 0: no limit but the store's own (16 Mi tokens).
	MaxSeqLength int
	// Source names the data in errors ("train.parquet"); "" reads "token store".
	Source string
}

// Validate names the first bad field.
func (o StoreOptions) Validate() error {
	if o.MaxSeqLength < 0 {
		return fmt.Errorf("data.StoreOptions.MaxSeqLength: %d is negative", o.MaxSeqLength)
	}
	return checkSpillDir("data.StoreOptions.Dir", o.Dir)
}

// checkSpillDir checks an options' Dir field: "" (the system's temporary directory) or an
// existing directory.
func checkSpillDir(field, dir string) error {
	if dir == "" {
		return nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s: %s is not a directory", field, dir)
	}
	return nil
}

func (o StoreOptions) source() string {
	if o.Source == "" {
		return "token store"
	}
	return o.Source
}

// TokenStoreBuilder writes examples, one after another, to a TokenStore's file. It holds the
// write buffer and 8 bytes per example added, never the examples. Not safe for concurrent use.
type TokenStoreBuilder struct {
	opts    StoreOptions
	f       *os.File
	path    string // the file's name while it still has one (the OS refused to unlink it open)
	w       *bufio.Writer
	rec     []byte  // one encoded record, reused
	offsets []int64 // where each record starts, then where the next one would
	tokens  int64
	err     error // sticky: a failed write leaves the file in an unknown state
	done    bool
}

// NewTokenStoreBuilder creates the store's file in opts.Dir.
func NewTokenStoreBuilder(opts StoreOptions) (*TokenStoreBuilder, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	f, path, err := createUnlinked(opts.Dir, "gotpu-tokenstore-*")
	if err != nil {
		return nil, fmt.Errorf("data: %s: creating the token store: %w", opts.source(), err)
	}
	b := &TokenStoreBuilder{opts: opts, f: f, path: path, w: bufio.NewWriterSize(f, 1<<20)}
	var hdr [storeHeaderSize]byte
	copy(hdr[:], storeMagic)
	binary.LittleEndian.PutUint32(hdr[8:], storeVersion)
	if _, err := b.w.Write(hdr[:]); err != nil {
		b.Abort()
		return nil, fmt.Errorf("data: %s: writing the token store: %w", opts.source(), err)
	}
	b.offsets = append(b.offsets, storeHeaderSize)
	return b, nil
}

// Add appends a copy of ex as the next row (rows count from 0 in the order added). The example is
// checked before anything is written: input_ids non-empty and within MaxSeqLength, the optional
// arrays as long as input_ids, attention_mask all 0 or 1; an error names the source, the row and
// the field, and leaves the builder usable (the row is not stored).
func (b *TokenStoreBuilder) Add(ex Example) error {
	if b.done {
		return fmt.Errorf("data: %s: Add after Finish or Abort", b.opts.source())
	}
	if b.err != nil {
		return b.err
	}
	row := len(b.offsets) - 1
	if err := b.check(ex); err != nil {
		return fmt.Errorf("data: %s: row %d: %w", b.opts.source(), row, err)
	}
	b.rec = encodeRecord(b.rec[:0], ex)
	if _, err := b.w.Write(b.rec); err != nil {
		b.err = fmt.Errorf("data: %s: writing the token store at row %d: %w", b.opts.source(), row, err)
		return b.err
	}
	b.offsets = append(b.offsets, b.offsets[row]+int64(len(b.rec)))
	b.tokens += int64(len(ex.InputIDs))
	if cap(b.rec) > 4<<20 { // one outsized example must not pin its buffer for the whole build
		b.rec = nil
	}
	return nil
}

func (b *TokenStoreBuilder) check(ex Example) error {
	n := len(ex.InputIDs)
	switch {
	case n == 0:
		return errors.New("input_ids: empty")
	case b.opts.MaxSeqLength > 0 && n > b.opts.MaxSeqLength:
		return fmt.Errorf("input_ids: %d tokens, more than max_seq_length %d (n_positions / max_position_embeddings): %w",
			n, b.opts.MaxSeqLength, ErrSequenceTooLong)
	case n > maxStoreTokens:
		return fmt.Errorf("input_ids: %d tokens, more than the %d a stored example may hold: %w", n, maxStoreTokens, ErrSequenceTooLong)
	}
	for _, c := range []struct {
		name string
		v    []int32
	}{{"attention_mask", ex.AttentionMask}, {"token_type_ids", ex.TokenTypeIDs}, {"labels", ex.Labels}, {"position_ids", ex.PositionIDs}} {
		if c.v != nil && len(c.v) != n {
			return fmt.Errorf("%s: %d values, input_ids has %d", c.name, len(c.v), n)
		}
	}
	if err := CheckPositionIDs(ex.PositionIDs); err != nil {
		return fmt.Errorf("position_ids: %w", err)
	}
	for i, m := range ex.AttentionMask {
		if m != 0 && m != 1 {
			return fmt.Errorf("attention_mask[%d]: %d is not 0 or 1", i, m)
		}
	}
	return nil
}

// Finish flushes the file and returns the store; the builder is done. A store needs at least one
// example (a Sampler needs one): an empty one is an error, and the file is removed.
func (b *TokenStoreBuilder) Finish() (*TokenStore, error) {
	if b.done {
		return nil, fmt.Errorf("data: %s: Finish after Finish or Abort", b.opts.source())
	}
	if b.err != nil {
		err := b.err
		b.Abort()
		return nil, err
	}
	if err := b.w.Flush(); err != nil {
		b.Abort()
		return nil, fmt.Errorf("data: %s: writing the token store: %w", b.opts.source(), err)
	}
	if len(b.offsets) == 1 {
		b.Abort()
		return nil, fmt.Errorf("data: %s: no examples", b.opts.source())
	}
	s := &TokenStore{source: b.opts.source(), f: b.f, path: b.path, offsets: b.offsets, tokens: b.tokens}
	*b = TokenStoreBuilder{opts: b.opts, done: true} // the store owns the file now
	return s, nil
}

// Abort removes the file; the builder is done. It may be called after Finish (it then does
// nothing) and more than once.
func (b *TokenStoreBuilder) Abort() {
	if b.f != nil {
		_ = closeAndRemove(b.f, b.path) // nothing of the file is wanted: a failure changes nothing
	}
	*b = TokenStoreBuilder{opts: b.opts, done: true}
}

// encodeRecord appends ex's record (see the format above) to dst.
func encodeRecord(dst []byte, ex Example) []byte {
	n := len(ex.InputIDs)
	var flags uint32
	arrays := [][]int32{ex.InputIDs}
	if ex.AttentionMask != nil {
		flags |= storeMask
		arrays = append(arrays, ex.AttentionMask)
	}
	if ex.TokenTypeIDs != nil {
		flags |= storeTypes
		arrays = append(arrays, ex.TokenTypeIDs)
	}
	if ex.Labels != nil {
		flags |= storeLabels
		arrays = append(arrays, ex.Labels)
	}
	if ex.PositionIDs != nil {
		flags |= storePositions
		arrays = append(arrays, ex.PositionIDs)
	}
	if ex.HasLabel {
		flags |= storeHasLabel
	}
	start := len(dst)
	size := recordHeaderLen + 4*n*len(arrays)
	if cap(dst)-start < size {
		grown := make([]byte, start, start+size)
		copy(grown, dst)
		dst = grown
	}
	dst = dst[:start+size]
	rec := dst[start:]
	binary.LittleEndian.PutUint32(rec[0:], uint32(n))
	binary.LittleEndian.PutUint32(rec[4:], flags)
	binary.LittleEndian.PutUint32(rec[8:], uint32(ex.Label))
	p := recordHeaderLen
	for _, a := range arrays {
		for _, v := range a {
			binary.LittleEndian.PutUint32(rec[p:], uint32(v))
			p += 4
		}
	}
	crc := crc32.Update(crc32.Checksum(rec[:12], castagnoli), castagnoli, rec[recordHeaderLen:])
	binary.LittleEndian.PutUint32(rec[12:], crc)
	return dst
}

// decodeRecord parses one whole record. Every length is checked against len(rec) before
// anything is allocated, so a corrupt record is an error, never a panic or a large allocation.
func decodeRecord(rec []byte) (Example, error) {
	if len(rec) < recordHeaderLen {
		return Example{}, fmt.Errorf("record of %d bytes, shorter than its %d-byte header", len(rec), recordHeaderLen)
	}
	n := uint64(binary.LittleEndian.Uint32(rec[0:]))
	flags := binary.LittleEndian.Uint32(rec[4:])
	if flags&^storeFlags != 0 {
		return Example{}, fmt.Errorf("record flags %#x: unknown bits", flags)
	}
	arrays := uint64(1)
	for _, f := range []uint32{storeMask, storeTypes, storeLabels, storePositions} {
		if flags&f != 0 {
			arrays++
		}
	}
	if n == 0 || n > maxStoreTokens {
		return Example{}, fmt.Errorf("record of %d tokens, outside [1,%d]", n, maxStoreTokens)
	}
	if want := recordHeaderLen + 4*n*arrays; uint64(len(rec)) != want {
		return Example{}, fmt.Errorf("record of %d tokens in %d arrays needs %d bytes, has %d", n, arrays, want, len(rec))
	}
	crc := crc32.Update(crc32.Checksum(rec[:12], castagnoli), castagnoli, rec[recordHeaderLen:])
	if got := binary.LittleEndian.Uint32(rec[12:]); got != crc {
		return Example{}, fmt.Errorf("record checksum %#08x, content sums to %#08x: the file is corrupt", got, crc)
	}
	vals := make([]int32, n*arrays)
	for i := range vals {
		vals[i] = int32(binary.LittleEndian.Uint32(rec[recordHeaderLen+4*i:]))
	}
	next := func() []int32 {
		a := vals[:n:n]
		vals = vals[n:]
		return a
	}
	ex := Example{InputIDs: next(), Label: int32(binary.LittleEndian.Uint32(rec[8:])), HasLabel: flags&storeHasLabel != 0}
	if flags&storeMask != 0 {
		ex.AttentionMask = next()
	}
	if flags&storeTypes != 0 {
		ex.TokenTypeIDs = next()
	}
	if flags&storeLabels != 0 {
		ex.Labels = next()
	}
	if flags&storePositions != 0 {
		ex.PositionIDs = next()
	}
	return ex, nil
}

// TokenStore is a random-access Dataset of pre-tokenized examples kept in a file, as Hugging
// Face datasets keeps its Arrow cache on disk: memory holds 8 bytes per example (where its
// record starts), so a dataset far larger than RAM trains with memory bounded by the batches in
// flight. Get reads one record with one ReadAt and may be called concurrently.
type TokenStore struct {
	source  string
	f       *os.File
	path    string
	offsets []int64 // record i is [offsets[i], offsets[i+1])
	tokens  int64

	mu     sync.Mutex
	closed bool
}

// Len implements Dataset.
func (s *TokenStore) Len() int { return len(s.offsets) - 1 }

// Tokens is the number of input_ids of all examples.
func (s *TokenStore) Tokens() int64 { return s.tokens }

// Get implements Dataset: row i as it was added (its own copy). A short or corrupt file is an
// error naming the source and the row.
func (s *TokenStore) Get(i int) (Example, error) {
	if i < 0 || i >= s.Len() {
		return Example{}, fmt.Errorf("data: %s: row %d out of range [0,%d)", s.source, i, s.Len())
	}
	off, size := s.offsets[i], s.offsets[i+1]-s.offsets[i]
	if size < recordHeaderLen || size > maxRecordBytes { // the builder wrote no such record
		return Example{}, fmt.Errorf("data: %s: row %d: record of %d bytes in the store's index", s.source, i, size)
	}
	rec := make([]byte, size)
	if _, err := s.f.ReadAt(rec, off); err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("the store file ends before the record's %d bytes at offset %d (truncated): %w", size, off, io.ErrUnexpectedEOF)
		}
		return Example{}, fmt.Errorf("data: %s: row %d: reading the token store: %w", s.source, i, err)
	}
	ex, err := decodeRecord(rec)
	if err != nil {
		return Example{}, fmt.Errorf("data: %s: row %d: token store: %w", s.source, i, err)
	}
	return ex, nil
}

// Close closes and removes the store's file; Get fails afterwards. It is idempotent.
func (s *TokenStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := closeAndRemove(s.f, s.path); err != nil {
		return fmt.Errorf("data: %s: closing the token store: %w", s.source, err)
	}
	return nil
}

// createUnlinked creates a temporary file in dir ("" = os.TempDir()) and unlinks it at once
// where the OS allows (Unix: the open file lives on, a crash leaves nothing). It returns the path
// still to be removed on close: "" when the file was unlinked.
func createUnlinked(dir, pattern string) (*os.File, string, error) {
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, "", err
	}
	if os.Remove(f.Name()) == nil {
		return f, "", nil
	}
	return f, f.Name(), nil // e.g. Windows, which will not remove an open file: Close removes it
}

// closeAndRemove closes f and removes path when it is not "".
func closeAndRemove(f *os.File, path string) error {
	err := f.Close()
	if path != "" {
		if rerr := os.Remove(path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
	}
	return err
}
