package core

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/pkg/core/shapes"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// NEFTune is transformers' neftune_post_forward_hook (HF Trainer's neftune_noise_alpha), applied
// to the output x [B, T, E] of the model's input-embedding module — the token embedding only, never
// position embeddings, after any scaling that module does itself (Gemma 3's sqrt(hidden)): in
// training, x + U(-m, m) with m = alpha / sqrt(T·E), T the padded sequence length as HF's
// output.size(1) is; unchanged in evaluation (the hook checks module.training) or when alpha is 0.
//
// The noise comes from the context's RNG, the state dropout draws from: a run is reproducible from
// its seed and a resumed run continues the saved RNG state. It is drawn in float32 and added in
// x's dtype (bf16 compute rounds the sum, as HF's bf16 embedding output would).
func NEFTune(c *mlctx.Context, x *Node, alpha float64, training bool) *Node {
	if !training || alpha == 0 {
		return x
	}
	if !(alpha > 0) || math.IsInf(alpha, 1) {
		panic(fmt.Errorf("Batch.NEFTuneAlpha (neftune_noise_alpha) %g is not a finite positive number", alpha))
	}
	dims := x.Shape().Dimensions
	if len(dims) != 3 {
		panic(fmt.Errorf("NEFTune: the embedding output must be [batch, seq, hidden], got %s", x.Shape()))
	}
	mag := alpha / math.Sqrt(float64(dims[1]*dims[2]))
	u := c.RandomUniform(x.Graph(), shapes.Make(dtypes.Float32, dims...)) // [0, 1)
	noise := MulScalar(AddScalar(MulScalar(u, 2), -1), mag)               // [-m, m)
	return Add(x, toDType(noise, x.DType()))
}
