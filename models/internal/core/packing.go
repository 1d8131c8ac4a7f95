package core

import (
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph-building code reads far better unqualified.
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// Packed sequences: several examples one after another in a row, told apart by position ids that
// restart at 0 for each (TRL's packing / padding-free layout). A causal model then embeds each
// token at its own example's position and attends block-diagonally, so every example computes
// exactly what it would alone.

// Positions returns the position of every token of ids [B, T] as int32: positionIDs when set
// (it must be an integer [B, T] like ids), else offset..offset+T-1 as [1, T] (offset nil: 0),
// which broadcasts over the batch as before packing existed. positionIDs with a cache offset is
// refused: decoding does not pack.
func Positions(ids, offset, positionIDs *Node) *Node {
	dims := ids.Shape().Dimensions
	T := dims[len(dims)-1]
	if positionIDs == nil {
		pos := Iota(ids.Graph(), shapes.Make(dtypes.Int32, 1, T), 1)
		if offset != nil {
			pos = Add(pos, ConvertDType(offset, dtypes.Int32))
		}
		return pos
	}
	if offset != nil {
		panic(fmt.Errorf("Batch.PositionIDs with a KV-cache offset: cached decoding takes no position ids"))
	}
	if !positionIDs.DType().IsInt() || !slices.Equal(positionIDs.Shape().Dimensions, dims) {
		panic(fmt.Errorf("Batch.PositionIDs must be integer %v like input_ids, got %s", dims, positionIDs.Shape()))
	}
	return ConvertDType(positionIDs, dtypes.Int32)
}

// PackedCausalMask returns [B, T, T] bool for a packed batch: query i may see key j when
// j <= i, key j is not padding (keyMask [B, T] of 0/1, may be nil), i and j belong to the same
// example, and, with window > 0, i - j < window (HF's sliding window). Every query also sees
// itself, so no row of the softmax is empty: a padding query (its output is never in the loss,
// and no real query sees it) otherwise could be masked whole.
//
// Same example, without a cumulative sum. Position ids count up by one along an example and
// restart at 0 where the next starts (data.CheckPositionIDs). If example k starts at index s_k,
// every token i of it has pos[i] = i - s_k, so i - pos[i] = s_k: constant along the example.
// Distinct examples start at distinct indices, so s_k differs between them. Hence i and j are in
// the same example iff i - pos[i] == j - pos[j]. (Padding whose positions continue the last
// example, as data's collators give it, joins that example: a padding query then sees its
// tokens; the key mask still hides padding keys.)
//
// Within an example pos[i] - pos[j] = i - j, so the causal and window tests on indices are the
// tests on positions.
func PackedCausalMask(positionIDs, keyMask *Node, window int) *Node {
	g := positionIDs.Graph()
	dims := positionIDs.Shape().Dimensions
	B, T := dims[0], dims[1]
	pos := ConvertDType(positionIDs, dtypes.Int32)
	start := Sub(Iota(g, shapes.Make(dtypes.Int32, B, T), 1), pos) // s_k of each token's example
	same := Equal(BroadcastToDims(Reshape(start, B, T, 1), B, T, T), BroadcastToDims(Reshape(start, B, 1, T), B, T, T))
	qi := Iota(g, shapes.Make(dtypes.Int32, T, T), 0)
	kj := Iota(g, shapes.Make(dtypes.Int32, T, T), 1)
	causal := LessOrEqual(kj, qi)
	if window > 0 {
		causal = LogicalAnd(causal, LessThan(Sub(qi, kj), Scalar(g, dtypes.Int32, window)))
	}
	allowed := LogicalAnd(BroadcastToDims(Reshape(causal, 1, T, T), B, T, T), same)
	if keyMask != nil {
		allowed = LogicalAnd(allowed, KeyMask(keyMask, T))
	}
	self := BroadcastToDims(Reshape(Equal(qi, kj), 1, T, T), B, T, T)
	return LogicalOr(allowed, self)
}

// AttentionMask is the mask a causal model's layer uses: PackedCausalMask when the batch has
// position ids, else CausalMask (the KV-cache path, with offset and S >= T keys, never packs).
func AttentionMask(g *Graph, B, T, S int, offset, keyMask, positionIDs *Node, window int) *Node {
	if positionIDs != nil {
		return PackedCausalMask(positionIDs, keyMask, window)
	}
	return CausalMask(g, B, T, S, offset, keyMask, window)
}
