package xla

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

func TestGoBackendSelection(t *testing.T) {
	for _, c := range []struct {
		cfg       Config
		want      string // substring of the backend's name
		goBackend string // what Runtime.GoBackend and Info.GoBackend report
	}{
		{Config{Device: DeviceGo}, "gotpu", GoBackendGotpu}, // the default
		{Config{Device: DeviceAuto}, "gotpu", GoBackendGotpu},
		{Config{Device: DeviceGo, GoBackend: GoBackendSimpleGo}, "SimpleGo", GoBackendSimpleGo},
		{Config{Device: DeviceGo, GoBackend: " SimpleGo "}, "SimpleGo", GoBackendSimpleGo},
		{Config{Device: DeviceGo, GoBackend: GoBackendGotpu}, "gotpu", GoBackendGotpu},
	} {
		if c.cfg.Device == DeviceAuto {
			if p, err := choosePlugin(c.cfg, osSearchEnv()); err != nil || p != nil {
				continue // auto opens this machine's accelerator, not a pure-Go backend
			}
		}
		rt := openTestRuntime(t, c.cfg)
		if got := rt.Backend().Name(); !strings.Contains(got, c.want) {
			t.Errorf("%+v: backend %q, want %q", c.cfg, got, c.want)
		}
		if rt.Kind() != DeviceGo {
			t.Errorf("%+v: kind %q, want %q", c.cfg, rt.Kind(), DeviceGo)
		}
		if got, info := rt.GoBackend(), rt.Info().GoBackend; got != c.goBackend || info != c.goBackend {
			t.Errorf("%+v: GoBackend() %q, Info().GoBackend %q, want %q", c.cfg, got, info, c.goBackend)
		}
	}
	for _, c := range []Config{
		{Device: DeviceGo, GoBackend: "fast"},
		{Device: DeviceTPU, GoBackend: GoBackendGotpu},
	} {
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "GoBackend") {
			t.Errorf("%+v: Validate() = %v, want an error naming GoBackend", c, err)
		}
	}
	// Virtual devices: gotpu's backend exposes them to GoMLX; simplego has one device and no
	// collectives, so more than one is refused at Open, naming the field and the way out.
	rt := openTestRuntime(t, Config{Device: DeviceGo, NumDevices: 8})
	if n := rt.Backend().NumDevices(); n != 8 {
		t.Errorf("gotpu backend with NumDevices 8 exposes %d devices", n)
	}
	if _, err := Open(context.Background(), Config{Device: DeviceGo, GoBackend: GoBackendSimpleGo, NumDevices: 2}); err == nil ||
		!strings.Contains(err.Error(), "NumDevices") || !strings.Contains(err.Error(), "gotpu") {
		t.Errorf("simplego with 2 devices: %v, want an error naming NumDevices and gotpu's backend", err)
	}
}

// TestGotpuBackendDotGradients runs every DotGeneral layout of the gradient tests in float32 on
// gotpu's backend (native products, forward and both gradients) and on simplego, and compares the
// loss and both gradients.
func TestGotpuBackendDotGradients(t *testing.T) {
	sg := openTestRuntime(t, Config{Device: DeviceGo, GoBackend: GoBackendSimpleGo})
	gb := openTestRuntime(t, Config{Device: DeviceGo, GoBackend: GoBackendGotpu})
	for i, c := range dotCases {
		t.Run(c.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 9))
			lhs, rhs := randomOperand(rng, c.lhsDims), randomOperand(rng, c.rhsDims)
			w := randomOperand(rng, c.outputDims(t, sg))
			fn := func(l, r, w *graph.Node) []*graph.Node {
				loss := graph.ReduceAllSum(graph.Mul(c.build(l, r), w))
				g := graph.Gradient(loss, l, r)
				return []*graph.Node{loss, g[0], g[1]}
			}
			results := make([][][]float32, 2)
			for k, rt := range []*Runtime{sg, gb} {
				exec, err := graph.NewExec(rt.Backend(), fn)
				if err != nil {
					t.Fatal(err)
				}
				out, err := exec.Exec(f32Tensor(lhs), f32Tensor(rhs), f32Tensor(w))
				exec.Finalize()
				if err != nil {
					t.Fatalf("%s: %v", rt.Backend().Name(), err)
				}
				for _, o := range out {
					results[k] = append(results[k], tensors.MustCopyFlatData[float32](o))
				}
			}
			for j, name := range []string{"loss", "lhs gradient", "rhs gradient"} {
				want, got := results[0][j], results[1][j]
				for e := range want {
					if d := math.Abs(float64(got[e] - want[e])); d > 1e-5*(1+math.Abs(float64(want[e]))) {
						t.Fatalf("%s[%d] = %g, simplego %g", name, e, got[e], want[e])
					}
				}
			}
		})
	}
}

func f32Tensor(o operand) *tensors.Tensor {
	x := make([]float32, len(o.data))
	for i, v := range o.data {
		x[i] = float32(v)
	}
	return tensors.FromFlatDataAndDimensions(x, o.dims...)
}

// TestGotpuBackendExecutionPanicIsError: on gotpu's backend, fallback segments run on the
// caller's goroutine too, so a kernel panic is an error naming the program, as on simplego.
func TestGotpuBackendExecutionPanicIsError(t *testing.T) {
	rt := openTestRuntime(t, Config{Device: DeviceGo, GoBackend: GoBackendGotpu})
	prog, err := rt.Compile("max-int8", maxInt8)
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	_, err = prog.Run([]int8{1, 2, 3})
	if err == nil || !strings.Contains(err.Error(), "max-int8") {
		t.Fatalf("Run = %v; want the kernel's failure as an error naming the program", err)
	}
}
