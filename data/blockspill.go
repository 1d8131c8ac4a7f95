package data

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// DefaultMaxMemoryTokens is how many kept tokens GroupTexts holds in memory (32 MiB of int32,
// up to twice that while the slice grows) before it spills them to a file. Get reads a spilled
// block with one ReadAt from the page cache, so a small bound costs little; a larger one cost a
// run under `ulimit -v 2097152` its life (64 Mi tokens grew the slice past the heap there was).
const DefaultMaxMemoryTokens = 8 << 20

// GroupOptions are GroupTexts' choices; the zero value is HF's run_clm behaviour, with the
// memory it holds for the blocks bounded by DefaultMaxMemoryTokens.
type GroupOptions struct {
	// NoSpecialTokens encodes without the tokenizer's special tokens (HF's
	// add_special_tokens=False); by default they are added, as HF's tokenizer call does.
	NoSpecialTokens bool
	// Dir is where blocks spill ("" = os.TempDir()). The spill file is unlinked as soon as it is
	// created where the OS allows (a crash leaves nothing) and removed by TokenBlocks.Close.
	Dir string
	// MaxMemoryTokens is how many kept tokens stay in memory; once the blocks would hold more,
	// all of them go to a file in Dir and Get reads them from it (0 = DefaultMaxMemoryTokens).
	MaxMemoryTokens int
}

// DefaultGroupOptions is GroupOptions{} with the memory bound spelled out.
func DefaultGroupOptions() GroupOptions {
	return GroupOptions{MaxMemoryTokens: DefaultMaxMemoryTokens}
}

// Validate names the first bad field.
func (o GroupOptions) Validate() error {
	if o.MaxMemoryTokens < 0 {
		return fmt.Errorf("data.GroupOptions.MaxMemoryTokens: %d is negative", o.MaxMemoryTokens)
	}
	return checkSpillDir("data.GroupOptions.Dir", o.Dir)
}

func (o GroupOptions) maxMemoryTokens() int {
	if o.MaxMemoryTokens == 0 {
		return DefaultMaxMemoryTokens
	}
	return o.MaxMemoryTokens
}

// keep appends one group's kept tokens (a multiple of BlockSize) to the blocks: in memory while
// they fit in opts, else to the spill file, which then receives everything kept so far and
// everything after, in order, in one pass. Block i is always tokens [i*BlockSize, (i+1)*BlockSize)
// of the one stream, wherever it lives, so spilling changes no block.
func (b *TokenBlocks) keep(kept []int32, opts GroupOptions) error {
	if b.spill == nil && len(b.tokens)+len(kept) <= opts.maxMemoryTokens() {
		b.tokens = append(b.tokens, kept...)
		return nil
	}
	if b.spill == nil {
		s, err := newBlockSpill(opts.Dir)
		if err != nil {
			return err
		}
		b.spill = s
		if err := s.append(b.tokens); err != nil {
			return err
		}
		b.tokens = nil
	}
	return b.spill.append(kept)
}

// Close removes the spill file, if the blocks spilled (Get fails afterwards); in memory it does
// nothing. It is idempotent.
func (b *TokenBlocks) Close() error {
	if b.spill == nil {
		return nil
	}
	return b.spill.close()
}

// blockSpill is an append-only file of int32 tokens (little-endian), written once through a
// buffer and then read at any offset with ReadAt, concurrently.
type blockSpill struct {
	f       *os.File
	path    string // "" once unlinked
	w       *bufio.Writer
	scratch []byte
	tokens  int64

	mu     sync.Mutex
	closed bool
}

func newBlockSpill(dir string) (*blockSpill, error) {
	f, path, err := createUnlinked(dir, "gotpu-blocks-*")
	if err != nil {
		return nil, fmt.Errorf("data: spilling token blocks: %w", err)
	}
	return &blockSpill{f: f, path: path, w: bufio.NewWriterSize(f, 1<<20), scratch: make([]byte, 64<<10)}, nil
}

// append writes toks after the tokens already written.
func (s *blockSpill) append(toks []int32) error {
	for len(toks) > 0 {
		n := min(len(toks), len(s.scratch)/4)
		for i, v := range toks[:n] {
			binary.LittleEndian.PutUint32(s.scratch[4*i:], uint32(v))
		}
		if _, err := s.w.Write(s.scratch[:4*n]); err != nil {
			return fmt.Errorf("data: spilling token blocks to %s: %w", s.f.Name(), err)
		}
		s.tokens += int64(n)
		toks = toks[n:]
	}
	return nil
}

// finish flushes what was appended; the spill is read-only afterwards.
func (s *blockSpill) finish() error {
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("data: spilling token blocks to %s: %w", s.f.Name(), err)
	}
	s.w, s.scratch = nil, nil
	return nil
}

// read fills dst with the tokens from token offset off.
func (s *blockSpill) read(dst []int32, off int64) error {
	if off < 0 || off+int64(len(dst)) > s.tokens {
		return fmt.Errorf("tokens [%d,%d) outside the %d spilled", off, off+int64(len(dst)), s.tokens)
	}
	buf := make([]byte, 4*len(dst))
	if _, err := s.f.ReadAt(buf, 4*off); err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("the spill file ends before token %d (truncated): %w", off+int64(len(dst)), io.ErrUnexpectedEOF)
		}
		return fmt.Errorf("reading spilled tokens: %w", err)
	}
	for i := range dst {
		dst[i] = int32(binary.LittleEndian.Uint32(buf[4*i:]))
	}
	return nil
}

func (s *blockSpill) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := closeAndRemove(s.f, s.path); err != nil {
		return fmt.Errorf("data: removing the token blocks' spill file: %w", err)
	}
	return nil
}
