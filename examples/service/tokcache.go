package main

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/gotpu/gotpu/data/tokenizer"
)

// tokenizerCache shares loaded tokenizers between the jobs and generation requests that use the
// same file. A GPT-2 tokenizer is ~9 MB in memory and takes ~0.45 s to load on a small machine:
// loaded per request, 60 queued jobs held 60 copies. Entries are reference counted and dropped
// when the last holder releases them, so memory follows the jobs that are alive, not every job
// ever posted.
type tokenizerCache struct {
	load func(path string) (tokenizer.Tokenizer, error)

	mu      sync.Mutex
	entries map[tokKey]*tokEntry
	loads   int // loads started, for /metrics and the tests
}

// tokKey identifies a tokenizer file by path, size and modification time, so that a file
// replaced on disk is loaded anew rather than served stale.
type tokKey struct {
	path    string
	size    int64
	modNano int64
}

type tokEntry struct {
	ready chan struct{} // closed once tok/err are set
	tok   tokenizer.Tokenizer
	err   error
	refs  int
}

// newTokenizerCache returns a cache loading with load (nil: tokenizer.FromFile).
func newTokenizerCache(load func(string) (tokenizer.Tokenizer, error)) *tokenizerCache {
	if load == nil {
		load = func(path string) (tokenizer.Tokenizer, error) { return tokenizer.FromFile(path) }
	}
	return &tokenizerCache{load: load, entries: map[tokKey]*tokEntry{}}
}

// acquire returns the tokenizer at path and the function that releases it (call it once; later
// calls do nothing). The first caller for a file loads it, synchronously; concurrent callers for
// the same file wait for that load (or for their ctx) instead of loading it again.
func (c *tokenizerCache) acquire(ctx context.Context, path string) (tokenizer.Tokenizer, func(), error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, nil, err
	}
	key := tokKey{path: path, size: st.Size(), modNano: st.ModTime().UnixNano()}
	c.mu.Lock()
	e, ok := c.entries[key]
	if !ok {
		e = &tokEntry{ready: make(chan struct{})}
		c.entries[key] = e
		c.loads++
	}
	e.refs++
	c.mu.Unlock()
	var once sync.Once
	release := func() { once.Do(func() { c.release(key, e) }) }
	if !ok {
		e.tok, e.err = c.load(path)
		close(e.ready)
	} else {
		select {
		case <-e.ready:
		case <-ctx.Done():
			release()
			return nil, nil, ctx.Err()
		}
	}
	if e.err != nil {
		release() // the failed entry goes with its last holder; the next acquire tries again
		return nil, nil, e.err
	}
	return e.tok, release, nil
}

func (c *tokenizerCache) release(key tokKey, e *tokEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e.refs--
	if e.refs < 0 {
		panic(fmt.Sprintf("tokenizer cache: %s released more often than acquired", key.path))
	}
	if e.refs == 0 && c.entries[key] == e {
		delete(c.entries, key)
	}
}

// stats returns the loads started so far and the tokenizers held now.
func (c *tokenizerCache) stats() (loads, held int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.loads, len(c.entries)
}
