package core

import (
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// KVCache is a decoder's key/value cache inside a graph: per layer, keys and values of shape
// [batch, maxLen, kvHeads, headDim]. Entries past the current position hold zeros or stale values;
// the causal mask hides them.
type KVCache struct {
	K, V []*Node
}

// CacheDims describes the cache of a causal LM.
type CacheDims struct {
	Layers, KVHeads, HeadDim int
}

// UpdateCache writes k and v ([B, T, KV, D]) at positions offset..offset+T-1 of layer i's cache and
// returns the full cached keys and values.
func (c *KVCache) UpdateCache(i int, k, v, offset *Node) (*Node, *Node) {
	c.K[i] = writeAt(c.K[i], k, offset)
	c.V[i] = writeAt(c.V[i], v, offset)
	return c.K[i], c.V[i]
}

// writeAt places x [B, T, KV, D] into cache [B, L, KV, D] at position offset. The pure-Go backend
// has no DynamicUpdateSlice, so the rows are placed with a one-hot [L, T] contraction (exact: each
// output row is 1*x plus zeros) and selected with Where.
func writeAt(cache, x, offset *Node) *Node {
	g := x.Graph()
	dims := cache.Shape().Dimensions
	B, L, KV, D := dims[0], dims[1], dims[2], dims[3]
	T := x.Shape().Dim(1)
	x = ConvertDType(x, cache.DType())
	lpos := Iota(g, shapes.Make(dtypes.Int32, L, T), 0)
	tpos := Add(Iota(g, shapes.Make(dtypes.Int32, L, T), 1), ConvertDType(offset, dtypes.Int32))
	hit := Equal(lpos, tpos)                                                                // [L, T]
	placed := DotGeneral(ConvertDType(hit, cache.DType()), []int{1}, nil, x, []int{1}, nil) // [L, B, KV, D]
	placed = TransposeAllAxes(placed, 1, 0, 2, 3)
	written := ReduceLogicalOr(hit, 1) // [L]
	mask := BroadcastToDims(Reshape(written, 1, L, 1, 1), B, L, KV, D)
	return Where(mask, placed, cache)
}
