package gemma3

import (
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive

	"github.com/gotpu/gotpu/models/internal/core"
)

// InvFreq returns the rotary inverse frequencies (headDim/2 of them) of r, as transformers'
// default and linear rope initialisers compute them (in float64 here, rounded once to float32).
func InvFreq(r Rope, headDim int) []float64 {
	inv := make([]float64, headDim/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(r.Theta, float64(2*i)/float64(headDim))
		if r.Type == "linear" {
			inv[i] /= r.Factor
		}
	}
	return inv
}

// rotary returns cos and sin [b, T, 1, headDim] for positions pos [b, T] (core.Positions: b is 1
// unless the batch is packed): angles in float32 as HF computes them (position * inv_freq,
// duplicated), cast to dt.
func rotary(g *Graph, r Rope, headDim int, pos *Node, dt dtypes.DType) (cos, sin *Node) {
	inv := InvFreq(r, headDim)
	inv32 := make([]float32, len(inv))
	for i, v := range inv {
		inv32[i] = float32(v)
	}
	pd := pos.Shape().Dimensions
	b, T := pd[0], pd[1]
	freqs := Mul(ConvertDType(Reshape(pos, b, T, 1), dtypes.Float32), Reshape(Const(g, inv32), 1, 1, len(inv32))) // [b, T, d/2]
	emb := Concatenate([]*Node{freqs, freqs}, -1)
	cos = ConvertDType(Reshape(Cos(emb), b, T, 1, headDim), dt)
	sin = ConvertDType(Reshape(Sin(emb), b, T, 1, headDim), dt)
	return cos, sin
}

// applyRotary is x*cos + rotate_half(x)*sin with HF's rotate_half: cat(-x[d/2:], x[:d/2]).
func applyRotary(x, cos, sin *Node) *Node {
	halves := core.SplitLast(x, 2)
	rot := Concatenate([]*Node{Neg(halves[1]), halves[0]}, -1)
	return Add(Mul(x, cos), Mul(rot, sin))
}
