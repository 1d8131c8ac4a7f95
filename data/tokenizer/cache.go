package tokenizer

import (
	"hash/maphash"
	"strings"
	"sync"
)

// wordCache memoises the model's result for short words, like the cache of
// Hugging Face's BPE and Unigram models (10,000 entries, words under 256
// bytes). It never evicts: once full it stops inserting, which keeps the
// hit path lock-light and the memory bounded. Sharded so that EncodeBatch
// goroutines rarely contend.
type wordCache struct {
	seed     maphash.Seed
	perShard int
	shards   [cacheShards]cacheShard
}

const (
	cacheShards       = 32
	defaultCacheSize  = 10000
	cacheMaxWordBytes = 256
)

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]uint32
}

// newWordCache returns nil (no caching) for capacity <= 0.
func newWordCache(capacity int) *wordCache {
	if capacity <= 0 {
		return nil
	}
	c := &wordCache{seed: maphash.MakeSeed(), perShard: (capacity + cacheShards - 1) / cacheShards}
	for i := range c.shards {
		c.shards[i].m = make(map[string][]uint32)
	}
	return c
}

func (c *wordCache) shard(key string) *cacheShard {
	return &c.shards[maphash.String(c.seed, key)%cacheShards]
}

func (c *wordCache) get(key string) ([]uint32, bool) {
	if c == nil || len(key) >= cacheMaxWordBytes {
		return nil, false
	}
	s := c.shard(key)
	s.mu.RLock()
	v, ok := s.m[key]
	s.mu.RUnlock()
	return v, ok
}

// set stores v (which the caller must not modify afterwards).
func (c *wordCache) set(key string, v []uint32) {
	if c == nil || len(key) >= cacheMaxWordBytes {
		return
	}
	s := c.shard(key)
	s.mu.Lock()
	if len(s.m) < c.perShard {
		// Clone: key is usually a substring of a whole document, which the
		// cache must not keep alive.
		s.m[strings.Clone(key)] = v
	}
	s.mu.Unlock()
}
