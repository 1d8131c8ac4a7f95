package xla

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// dotCase is one DotGeneral axis layout used by the models or by their gradients.
type dotCase struct {
	name                         string
	lhsDims, rhsDims             []int
	lhsContract, lhsBatch        []int
	rhsContract, rhsBatch        []int
	viaMatMul, viaDot, viaEinsum bool
	einsum                       string
}

var dotCases = []dotCase{
	{name: "matmul [m,k]x[k,n]", lhsDims: []int{3, 4}, rhsDims: []int{4, 5}, lhsContract: []int{1}, rhsContract: []int{0}},
	{name: "dense [b,s,k]x[k,n]", lhsDims: []int{2, 3, 4}, rhsDims: []int{4, 5}, lhsContract: []int{2}, rhsContract: []int{0}},
	{name: "transposed lhs [k,m]x[k,n]", lhsDims: []int{4, 3}, rhsDims: []int{4, 5}, lhsContract: []int{0}, rhsContract: []int{0}},
	{name: "transposed rhs (tied lm_head) [b,s,k]x[v,k]", lhsDims: []int{2, 3, 4}, rhsDims: []int{7, 4}, lhsContract: []int{2}, rhsContract: []int{1}},
	{name: "batched [b,m,k]x[b,k,n]", lhsDims: []int{2, 3, 4}, rhsDims: []int{2, 4, 5}, lhsContract: []int{2}, lhsBatch: []int{0}, rhsContract: []int{1}, rhsBatch: []int{0}},
	{name: "attention scores bhqd,bhkd->bhqk", lhsDims: []int{2, 3, 4, 5}, rhsDims: []int{2, 3, 6, 5}, lhsContract: []int{3}, lhsBatch: []int{0, 1}, rhsContract: []int{3}, rhsBatch: []int{0, 1}},
	{name: "attention values bhqk,bhkd->bhqd", lhsDims: []int{2, 3, 4, 6}, rhsDims: []int{2, 3, 6, 5}, lhsContract: []int{3}, lhsBatch: []int{0, 1}, rhsContract: []int{2}, rhsBatch: []int{0, 1}},
	{name: "batch axes not leading bqhd,bkhd->bhqk", lhsDims: []int{2, 4, 3, 5}, rhsDims: []int{2, 6, 3, 5}, lhsContract: []int{3}, lhsBatch: []int{0, 2}, rhsContract: []int{3}, rhsBatch: []int{0, 2}},
	{name: "two contracting axes [b,s,h,d]x[h,d,n]", lhsDims: []int{2, 3, 4, 5}, rhsDims: []int{4, 5, 6}, lhsContract: []int{2, 3}, rhsContract: []int{0, 1}},
	{name: "contracting axes in swapped order", lhsDims: []int{3, 4, 5}, rhsDims: []int{5, 4, 2}, lhsContract: []int{1, 2}, rhsContract: []int{1, 0}},
	{name: "weight gradient layout [b,s,k]x[b,s,n] contracting b,s", lhsDims: []int{2, 3, 4}, rhsDims: []int{2, 3, 5}, lhsContract: []int{0, 1}, rhsContract: []int{0, 1}},
	{name: "outer product (no contraction)", lhsDims: []int{3}, rhsDims: []int{4}},
	{name: "Dot vector.vector", lhsDims: []int{5}, rhsDims: []int{5}, viaDot: true},
	{name: "Dot matrix.vector", lhsDims: []int{3, 5}, rhsDims: []int{5}, viaDot: true},
	{name: "Dot matrix.matrix", lhsDims: []int{3, 5}, rhsDims: []int{5, 2}, viaDot: true},
	{name: "MatMul broadcast [b,m,k]x[k,n]", lhsDims: []int{2, 3, 4}, rhsDims: []int{4, 5}, viaMatMul: true},
	{name: "Einsum bshd,hdn->bsn", lhsDims: []int{2, 3, 4, 5}, rhsDims: []int{4, 5, 6}, viaEinsum: true, einsum: "bshd,hdn->bsn"},
}

func (c dotCase) build(lhs, rhs *graph.Node) *graph.Node {
	switch {
	case c.viaDot:
		return graph.Dot(lhs, rhs)
	case c.viaMatMul:
		return graph.MatMul(lhs, rhs)
	case c.viaEinsum:
		return graph.Einsum(c.einsum, lhs, rhs)
	}
	return graph.DotGeneral(lhs, c.lhsContract, c.lhsBatch, rhs, c.rhsContract, c.rhsBatch)
}

// operand is host data for one graph input; each execution gets its own tensor because GoMLX
// tensors cannot move between backend instances.
type operand struct {
	data []float64
	dims []int
}

func randomOperand(rng *rand.Rand, dims []int) operand {
	n := 1
	for _, d := range dims {
		n *= d
	}
	data := make([]float64, n)
	for i := range data {
		data[i] = rng.NormFloat64()
	}
	return operand{data, dims}
}

func (o operand) tensor() *tensors.Tensor {
	return tensors.FromFlatDataAndDimensions(append([]float64(nil), o.data...), o.dims...)
}

func openTestRuntime(t testing.TB, cfg Config) *Runtime {
	t.Helper()
	rt, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Open(%+v): %v", cfg, err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	return rt
}

// gradients returns loss = sum(out * w) and its gradients with respect to lhs and rhs.
func (c dotCase) gradients(t *testing.T, rt *Runtime, lhs, rhs, w operand) (loss float64, gl, gr []float64) {
	t.Helper()
	exec, err := graph.NewExec(rt.Backend(), func(l, r, w *graph.Node) []*graph.Node {
		out := c.build(l, r)
		loss := graph.ReduceAllSum(graph.Mul(out, w))
		grads := graph.Gradient(loss, l, r)
		return []*graph.Node{loss, grads[0], grads[1]}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	outs, err := exec.Exec(lhs.tensor(), rhs.tensor(), w.tensor())
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[float64](outs[0])[0], tensors.MustCopyFlatData[float64](outs[1]),
		tensors.MustCopyFlatData[float64](outs[2])
}

func (c dotCase) outputDims(t *testing.T, rt *Runtime) []int {
	g := graph.NewGraph(rt.Backend(), "shape")
	defer g.Finalize()
	l := graph.Parameter(g, "l", shapes.Make(dtypes.Float64, c.lhsDims...))
	r := graph.Parameter(g, "r", shapes.Make(dtypes.Float64, c.rhsDims...))
	return c.build(l, r).Shape().Dimensions
}

func (c dotCase) lossAt(t *testing.T, rt *Runtime, lhs, rhs, w operand) float64 {
	v, err := graph.ExecOnce(rt.Backend(), func(l, r, w *graph.Node) *graph.Node {
		return graph.ReduceAllSum(graph.Mul(c.build(l, r), w))
	}, lhs.tensor(), rhs.tensor(), w.tensor())
	if err != nil {
		t.Fatal(err)
	}
	return tensors.MustCopyFlatData[float64](v)[0]
}

// TestDotGradients checks gotpu's Dot/DotGeneral VJPs against central finite differences and
// against GoMLX's stock VJPs, for every axis layout the models use, in float64.
func TestDotGradients(t *testing.T) {
	ours := openTestRuntime(t, Config{Device: DeviceGo})
	stock := openTestRuntime(t, Config{Device: DeviceGo, StockDotGradients: true})
	for i, c := range dotCases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			lhs, rhs := randomOperand(rng, c.lhsDims), randomOperand(rng, c.rhsDims)
			w := randomOperand(rng, c.outputDims(t, ours))
			_, gl, gr := c.gradients(t, ours, lhs, rhs, w)
			_, sl, sr := c.gradients(t, stock, lhs, rhs, w)
			assertClose(t, "lhs vs stock", gl, sl, 1e-12)
			assertClose(t, "rhs vs stock", gr, sr, 1e-12)

			// Finite differences: the loss is bilinear, so central differences are exact up to
			// rounding; 1e-6 leaves room for float64 cancellation.
			const h = 1e-3
			for which, pair := range []struct {
				x    operand
				grad []float64
			}{{lhs, gl}, {rhs, gr}} {
				base := pair.x.data
				fd := make([]float64, len(base))
				for j := range base {
					perturbed := func(delta float64) float64 {
						d := append([]float64(nil), base...)
						d[j] += delta
						p := operand{d, pair.x.dims}
						if which == 0 {
							return c.lossAt(t, ours, p, rhs, w)
						}
						return c.lossAt(t, ours, lhs, p, w)
					}
					fd[j] = (perturbed(h) - perturbed(-h)) / (2 * h)
				}
				assertClose(t, fmt.Sprintf("operand %d vs finite differences", which), pair.grad, fd, 1e-6)
			}
		})
	}
}

func assertClose(t *testing.T, what string, got, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > tol*(1+math.Abs(want[i])) {
			t.Fatalf("%s: [%d] = %.15g, want %.15g", what, i, got[i], want[i])
		}
	}
}

// TestDotGradientGraphHasNoBroadcastProduct pins the point of the fix: the gradient graph of a
// matmul must not contain a node as large as batch x lhsCross x rhsCross x contracting.
func TestDotGradientGraphHasNoBroadcastProduct(t *testing.T) {
	for _, stockGrads := range []bool{false, true} {
		rt := openTestRuntime(t, Config{Device: DeviceGo, StockDotGradients: stockGrads})
		g := graph.NewGraph(rt.Backend(), "grad")
		x := graph.Parameter(g, "x", shapes.Make(dtypes.Float32, 8, 16, 32)) // [batch, seq, in]
		w := graph.Parameter(g, "w", shapes.Make(dtypes.Float32, 32, 64))    // [in, out]
		loss := graph.ReduceAllSum(graph.Einsum("bsi,io->bso", x, w))
		graph.Gradient(loss, x, w)
		largest := 0
		for _, n := range g.Nodes() {
			if s := n.Shape(); s.Ok() && s.Size() > largest {
				largest = s.Size()
			}
		}
		g.Finalize()
		broadcast := 8 * 16 * 32 * 64
		if !stockGrads && largest >= broadcast {
			t.Errorf("gotpu gradient graph has a node of %d elements (the 4-D broadcast is %d)", largest, broadcast)
		}
		if stockGrads && largest < broadcast {
			t.Errorf("stock gradient graph's largest node is %d elements: GoMLX changed, revisit the VJP fix", largest)
		}
	}
}

func TestDotGeneralAxesOf(t *testing.T) {
	rt := openTestRuntime(t, Config{Device: DeviceGo})
	g := graph.NewGraph(rt.Backend(), "axes")
	defer g.Finalize()
	l := graph.Parameter(g, "l", shapes.Make(dtypes.Float32, 2, 4, 3, 5))
	r := graph.Parameter(g, "r", shapes.Make(dtypes.Float32, 2, 6, 3, 5))
	out := graph.DotGeneral(l, []int{3}, []int{0, 2}, r, []int{3}, []int{0, 2}).WithAlias(`DotGeneral(lhs=[#0], lhsContractingAxes=[9]`)
	ax, err := dotGeneralAxesOf(out)
	if err != nil {
		t.Fatal(err)
	}
	want := DotGeneralAxes{LHSContracting: []int{3}, LHSBatch: []int{0, 2}, RHSContracting: []int{3}, RHSBatch: []int{0, 2}}
	if fmt.Sprint(ax) != fmt.Sprint(want) {
		t.Fatalf("axes = %+v, want %+v", ax, want)
	}
	if _, err := dotGeneralAxesOf(graph.Add(l, l)); err == nil {
		t.Fatal("dotGeneralAxesOf(Add) succeeded")
	}
}
