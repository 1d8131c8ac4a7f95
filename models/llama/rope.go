package llama

import (
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive

	"github.com/gotpu/gotpu/models/internal/core"
)

// InvFreq returns the rotary inverse frequencies (head_dim/2 of them) for the config's rope type, as
// transformers' ROPE_INIT_FUNCTIONS compute them (in float64 here, rounded once to float32).
func InvFreq(cfg *Config) []float64 {
	d := cfg.HeadDim
	inv := make([]float64, d/2)
	for i := range inv {
		inv[i] = 1 / math.Pow(cfg.Rope.Theta, float64(2*i)/float64(d))
	}
	r := cfg.Rope
	switch r.Type {
	case "linear":
		for i := range inv {
			inv[i] /= r.Factor
		}
	case "llama3":
		// _compute_llama3_parameters: long wavelengths are divided by factor, short ones kept, and the
		// band between is interpolated.
		old := float64(r.OriginalMaxPositions)
		lowWavelen := old / r.LowFreqFactor
		highWavelen := old / r.HighFreqFactor
		for i, f := range inv {
			wavelen := 2 * math.Pi / f
			scaled := f
			if wavelen > lowWavelen {
				scaled = f / r.Factor
			}
			if !(wavelen < highWavelen) && !(wavelen > lowWavelen) {
				smooth := (old/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
				scaled = (1-smooth)*scaled/r.Factor + smooth*scaled
			}
			inv[i] = scaled
		}
	}
	return inv
}

// rotary returns cos and sin [b, T, 1, head_dim] for positions pos [b, T] (core.Positions: b is 1
// unless the batch is packed): angles in float32 as HF computes them (position * inv_freq,
// duplicated), cast to dt.
func rotary(g *Graph, cfg *Config, pos *Node, dt dtypes.DType) (cos, sin *Node) {
	inv := InvFreq(cfg)
	inv32 := make([]float32, len(inv))
	for i, v := range inv {
		inv32[i] = float32(v)
	}
	pd := pos.Shape().Dimensions
	b, T := pd[0], pd[1]
	freqs := Mul(ConvertDType(Reshape(pos, b, T, 1), dtypes.Float32), Reshape(Const(g, inv32), 1, 1, len(inv32))) // [b, T, d/2]
	emb := Concatenate([]*Node{freqs, freqs}, -1)
	d := cfg.HeadDim
	cos = ConvertDType(Reshape(Cos(emb), b, T, 1, d), dt)
	sin = ConvertDType(Reshape(Sin(emb), b, T, 1, d), dt)
	return cos, sin
}

// applyRotary is q*cos + rotate_half(q)*sin with HF's rotate_half: cat(-x[d/2:], x[:d/2]).
func applyRotary(x, cos, sin *Node) *Node {
	halves := core.SplitLast(x, 2)
	rot := Concatenate([]*Node{Neg(halves[1]), halves[0]}, -1)
	return Add(Mul(x, cos), Mul(rot, sin))
}
