package core

import (
	"math"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// NEFTune's noise, on a zero embedding output [B, T, E] so the output is the noise itself: in
// training, bounded by alpha/sqrt(T·E) (HF's mag_norm, padding included) and filling that range,
// centred, different per seed; none in evaluation or with alpha 0.
func TestNEFTuneNoise(t *testing.T) {
	rt := openGo(t)
	const B, T, E, alpha = 3, 16, 32, 5.0
	bound := alpha / math.Sqrt(T*E)
	noise := func(seed int64, a float64, training bool) []float32 {
		c := mlctx.New()
		c.SetParam(mlctx.ParamInitialSeed, seed)
		e, err := mlctx.NewExec(rt.Backend(), c, func(c *mlctx.Context, g *Graph) *Node {
			return NEFTune(c, Zeros(g, shapes.Make(dtypes.Float32, B, T, E)), a, training)
		})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Finalize()
		out, err := e.Exec()
		if err != nil {
			t.Fatal(err)
		}
		return tensors.MustCopyFlatData[float32](out[0])
	}
	got := noise(1, alpha, true)
	maxAbs, sum := 0.0, 0.0
	for _, v := range got {
		maxAbs = math.Max(maxAbs, math.Abs(float64(v)))
		sum += float64(v)
	}
	mean := sum / float64(len(got))
	t.Logf("alpha %g, T·E %d: max |noise| %.6f, bound alpha/sqrt(T·E) %.6f, mean %.2g", alpha, T*E, maxAbs, bound, mean)
	if maxAbs > bound*(1+1e-6) {
		t.Errorf("max |noise| %.7f exceeds alpha/sqrt(T·E) = %.7f", maxAbs, bound)
	}
	if maxAbs < 0.95*bound {
		t.Errorf("max |noise| %.7f of %d draws does not reach near the bound %.7f: not U(-m, m)", maxAbs, len(got), bound)
	}
	if math.Abs(mean) > 0.05*bound {
		t.Errorf("mean noise %.3g is not centred (bound %.3g)", mean, bound)
	}
	other := noise(2, alpha, true)
	same := 0
	for i := range got {
		if got[i] == other[i] {
			same++
		}
	}
	if same > len(got)/100 {
		t.Errorf("seeds 1 and 2 gave %d of %d equal values", same, len(got))
	}
	for name, vals := range map[string][]float32{"evaluation": noise(1, alpha, false), "alpha 0": noise(1, 0, true)} {
		for _, v := range vals {
			if v != 0 {
				t.Fatalf("%s: noise %g, want none", name, v)
			}
		}
	}
}
