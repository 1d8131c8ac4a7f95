package hub

import (
	"fmt"
	"os"
	"sync"
)

// Limits bound what a Client hands out. huggingface_hub has no such bound: it downloads whatever
// the Hub announces. A process that fetches repos named by others (a service taking repo ids from
// requests) needs one, because a repo's config may imply a model of kilobytes while its weights
// are gigabytes, or a dataset card of a kilobyte may be 64 MiB: the caller knows how large a file
// may be before it asks for it, and the bytes are refused before any is written.
type Limits struct {
	// File is the largest size, in bytes, of any one file; 0 means no limit.
	File int64
	// Total bounds the sum of the sizes of the distinct files (snapshot paths) the limited
	// client returns, cached or downloaded; 0 means no limit. It bounds what a list of files
	// chosen by the repo (a shard index, a snapshot) may add up to.
	Total int64
}

// WithLimits returns a client that shares c's configuration, connections and cache but refuses,
// with ErrTooLarge, a file above l.File or one that would take the files it returned above
// l.Total. The size is the one the Hub announces in its metadata answer (X-Linked-Size, else
// Content-Length, as huggingface_hub reads them), checked before anything is written; the
// download then stops at that size (a server that sends more is ErrCorrupt), so a server that
// lies cannot write more than the limit either. A file answered from the cache is checked at its
// size on disk. The returned client's Total is counted from zero, and only by that client.
func (c *Client) WithLimits(l Limits) (*Client, error) {
	if l.File < 0 || l.Total < 0 {
		return nil, fmt.Errorf("hub: Limits{File: %d, Total: %d}: a limit must not be negative", l.File, l.Total)
	}
	lc := *c
	lc.limits = &sizeBudget{Limits: l, seen: map[string]int64{}}
	return &lc, nil
}

// sizeBudget is a limited client's account of the sizes of the files it has returned.
type sizeBudget struct {
	Limits
	mu   sync.Mutex
	used int64
	seen map[string]int64 // snapshot path → size counted
}

// admit checks a file of size bytes, to be returned as the snapshot path pointer, against the
// limits and counts it; what names the repo, revision and file, and has says where the size
// comes from ("the Hub announces 5 bytes (...)"). A nil budget admits everything.
func (b *sizeBudget) admit(what, has, pointer string, size int64) error {
	if b == nil {
		return nil
	}
	if b.File > 0 && size > b.File {
		return fmt.Errorf("%w: %s: %s, over the limit of %d bytes", ErrTooLarge, what, has, b.File)
	}
	if b.Total == 0 {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.seen[pointer]; ok {
		if old == size {
			return nil
		}
		b.used -= old // the same path at another size: count the new one
		delete(b.seen, pointer)
	}
	if b.used+size > b.Total {
		return fmt.Errorf("%w: %s: %s, which with the %d bytes of the %d files before it is over the limit of %d bytes for them all",
			ErrTooLarge, what, has, b.used, len(b.seen), b.Total)
	}
	b.used += size
	b.seen[pointer] = size
	return nil
}

// admitAnnounced checks a file at the size the Hub's metadata announces, before it is fetched.
func (b *sizeBudget) admitAnnounced(what, pointer string, size int64) error {
	if b == nil {
		return nil
	}
	return b.admit(what, fmt.Sprintf("the Hub announces %d bytes (X-Linked-Size or Content-Length)", size), pointer, size)
}

// admitCached checks a file the cache answers with at its size on disk.
func (b *sizeBudget) admitCached(what, pointer string) error {
	if b == nil {
		return nil
	}
	st, err := os.Stat(pointer)
	if err != nil {
		return fmt.Errorf("hub: %s: %w", what, err)
	}
	return b.admit(what, fmt.Sprintf("the cached file %s has %d bytes", pointer, st.Size()), pointer, st.Size())
}
