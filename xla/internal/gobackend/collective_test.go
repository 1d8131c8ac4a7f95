package gobackend

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// randomFlat returns n random values of dt as a flat slice (integers small enough that products of
// 4 do not overflow).
func randomFlat(rng *rand.Rand, dt dtypes.DType, n int) any {
	switch dt {
	case dtypes.Float32:
		x := make([]float32, n)
		for i := range x {
			x[i] = rng.Float32()*4 - 2
		}
		return x
	case dtypes.Float64:
		x := make([]float64, n)
		for i := range x {
			x[i] = rng.Float64()*4 - 2
		}
		return x
	case dtypes.BFloat16:
		x := make([]bfloat16.BFloat16, n)
		for i := range x {
			x[i] = bfloat16.FromFloat32(rng.Float32()*4 - 2)
		}
		return x
	case dtypes.Int32:
		x := make([]int32, n)
		for i := range x {
			x[i] = int32(rng.IntN(41) - 20)
		}
		return x
	case dtypes.Int64:
		x := make([]int64, n)
		for i := range x {
			x[i] = int64(rng.IntN(41) - 20)
		}
		return x
	}
	panic(dt)
}

// at returns element i of a flat slice as float64.
func at(flat any, i int) float64 {
	switch f := flat.(type) {
	case []float32:
		return float64(f[i])
	case []float64:
		return f[i]
	case []bfloat16.BFloat16:
		return float64(f[i].Float32())
	case []int32:
		return float64(f[i])
	case []int64:
		return float64(f[i])
	}
	panic(fmt.Sprintf("%T", flat))
}

// referenceReduce reduces element i over the members' inputs in member order, in the operand's
// own arithmetic (float32 for bfloat16, rounded at the end), as the all-reduce must.
func referenceReduce(red backends.ReduceOpType, dt dtypes.DType, ins []any, members []int, i int) float64 {
	f := func(a, b float64) float64 {
		switch red {
		case backends.ReduceOpSum:
			return a + b
		case backends.ReduceOpProduct:
			return a * b
		case backends.ReduceOpMax:
			return math.Max(a, b)
		}
		return math.Min(a, b)
	}
	acc := at(ins[members[0]], i)
	for _, r := range members[1:] {
		acc = f(acc, at(ins[r], i))
		if dt == dtypes.Float32 || dt == dtypes.BFloat16 {
			acc = float64(float32(acc))
		}
	}
	if dt == dtypes.BFloat16 {
		acc = float64(bfloat16.FromFloat32(float32(acc)).Float32())
	}
	return acc
}

// TestAllReduce runs an SPMD computation over 4 virtual devices that all-reduces two operands (of
// awkward sizes) with every reduction and dtype, over all replicas and over two groups, and
// compares every replica's results with a direct reduction in member order: bitwise equal.
func TestAllReduce(t *testing.T) {
	const replicas = 4
	gb := newGotpu(t, Config{NumDevices: replicas})
	rng := rand.New(rand.NewPCG(7, 7))
	for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.Float64, dtypes.BFloat16, dtypes.Int32, dtypes.Int64} {
		for red := range reduceOps {
			for _, groups := range [][][]int{nil, {{0, 2}, {3, 1}}} {
				name := fmt.Sprintf("%s/%s/groups%v", dt, reduceOps[red], groups)
				t.Run(name, func(t *testing.T) {
					sizes := []int{1, 7 * 129}
					bld := gb.Builder(name)
					if err := bld.DistributedSPMD(replicas); err != nil {
						t.Fatal(err)
					}
					var params []backends.Op
					for k, n := range sizes {
						p, err := bld.Parameter(fmt.Sprintf("x%d", k), shapes.Make(dt, n), nil)
						if err != nil {
							t.Fatal(err)
						}
						params = append(params, p)
					}
					outs, err := bld.AllReduce(params, red, groups)
					if err != nil {
						t.Fatal(err)
					}
					exec, err := bld.Compile(outs, nil)
					if err != nil {
						t.Fatal(err)
					}
					defer exec.Finalize()
					if st := exec.(*Executable).Stats(); st.AllReduces != 1 || st.Segments != 0 {
						t.Fatalf("split %+v, want one native all-reduce", st)
					}
					ins := make([][]any, len(sizes)) // [operand][replica]
					var bufs []backends.Buffer
					for r := range replicas {
						for k, n := range sizes {
							flat := randomFlat(rng, dt, n)
							ins[k] = append(ins[k], flat)
							buf, err := gb.BufferFromFlatData(backends.DeviceNum(r), flat, shapes.Make(dt, n))
							if err != nil {
								t.Fatal(err)
							}
							bufs = append(bufs, buf)
						}
					}
					got, err := exec.Execute(bufs, nil, 0)
					if err != nil {
						t.Fatal(err)
					}
					groupOf := map[int][]int{}
					for _, g := range groups {
						for _, r := range g {
							groupOf[r] = g
						}
					}
					for r := range replicas {
						members := groupOf[r]
						if groups == nil {
							members = []int{0, 1, 2, 3}
						}
						for k, n := range sizes {
							buf := got[r*len(sizes)+k]
							if d, _ := gb.BufferDeviceNum(buf); d != backends.DeviceNum(r) {
								t.Fatalf("replica %d output on device %d", r, d)
							}
							flat, err := gb.BufferData(buf)
							if err != nil {
								t.Fatal(err)
							}
							for i := range n {
								if g, w := at(flat, i), referenceReduce(red, dt, ins[k], members, i); g != w {
									t.Fatalf("replica %d operand %d [%d] = %v, want %v", r, k, i, g, w)
								}
							}
						}
					}
					for _, b := range append(bufs, got...) {
						if err := gb.BufferFinalize(b); err != nil {
							t.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// TestSPMDThroughGoMLX runs a GoMLX SPMD graph over 8 virtual devices: each replica computes
// tanh(x·w) on its own x, the results are all-reduced (sum) in-graph and used again per
// replica. It checks against the same computation on simplego, replica by replica, and that the
// all-reduced value is bitwise the same on every replica.
func TestSPMDThroughGoMLX(t *testing.T) {
	const replicas = 8
	gb := newGotpu(t, Config{NumDevices: replicas})
	sg := newSimpleGo(t)
	mesh, err := distributed.NewDeviceMesh([]int{replicas}, []string{"replica"})
	if err != nil {
		t.Fatal(err)
	}
	fn := func(x, w *graph.Node) (*graph.Node, *graph.Node) {
		h := graph.Tanh(graph.Dot(x, w))
		sum := x.Graph().Distributed().AllReduceOne(h, backends.ReduceOpSum)
		return sum, graph.Add(graph.Mul(sum, h), x.Graph().Distributed().AllReduceOne(graph.ReduceAllMax(x), backends.ReduceOpMax))
	}
	exec, err := graph.NewExec(gb, fn)
	if err != nil {
		t.Fatal(err)
	}
	exec.SPMD(mesh)
	defer exec.Finalize()
	rng := rand.New(rand.NewPCG(8, 8))
	w := randomTensor(rng, dtypes.Float32, 129, 7)
	xs := make([]*tensors.Tensor, replicas)
	args := make([]any, 0, 2*replicas)
	for r := range xs {
		xs[r] = randomTensor(rng, dtypes.Float32, 5, 129)
		args = append(args, mustClone(t, xs[r]), mustClone(t, w))
	}
	for round := range 3 {
		outs, err := exec.Exec(args...)
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) != 2*replicas {
			t.Fatalf("%d outputs, want %d", len(outs), 2*replicas)
		}
		// Reference: the per-replica parts on simplego, reduced in replica order in Go.
		hs := make([][]float32, replicas)
		maxes := make([]float32, replicas)
		for r := range replicas {
			o := run(t, sg, func(in []*graph.Node) []*graph.Node {
				return []*graph.Node{graph.Tanh(graph.Dot(in[0], in[1])), graph.ReduceAllMax(in[0])}
			}, xs[r], w)
			hs[r] = tensors.MustCopyFlatData[float32](o[0])
			maxes[r] = tensors.MustCopyFlatData[float32](o[1])[0]
		}
		sum := append([]float32(nil), hs[0]...)
		mx := maxes[0]
		for r := 1; r < replicas; r++ {
			for i := range sum {
				sum[i] += hs[r][i]
			}
			mx = max(mx, maxes[r])
		}
		first := tensors.MustCopyFlatData[float32](outs[0])
		for r := range replicas {
			got := tensors.MustCopyFlatData[float32](outs[2*r])
			for i := range got {
				if got[i] != first[i] {
					t.Fatalf("round %d: all-reduced value differs between replica 0 and %d at %d", round, r, i)
				}
				if d := math.Abs(float64(got[i] - sum[i])); d > 1e-5*(1+math.Abs(float64(sum[i]))) {
					t.Fatalf("round %d replica %d: sum[%d] = %g, want %g", round, r, i, got[i], sum[i])
				}
			}
			y := tensors.MustCopyFlatData[float32](outs[2*r+1])
			for i := range y {
				want := sum[i]*hs[r][i] + mx
				if d := math.Abs(float64(y[i] - want)); d > 1e-4*(1+math.Abs(float64(want))) {
					t.Fatalf("round %d replica %d: y[%d] = %g, want %g", round, r, i, y[i], want)
				}
			}
		}
		for _, o := range outs {
			o.FinalizeAll()
		}
	}
}

func mustClone(t *testing.T, x *tensors.Tensor) *tensors.Tensor {
	t.Helper()
	c, err := x.LocalClone()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestSPMDErrors: bad devices, replica groups and operand types are refused with the field
// named, at the call that is wrong.
func TestSPMDErrors(t *testing.T) {
	gb := newGotpu(t, Config{NumDevices: 4})
	check := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one mentioning %q", what, err, want)
		}
	}
	_, err := New(Config{NumDevices: -1})
	check("negative devices", err, "NumDevices")
	_, err = gb.BufferFromFlatData(4, []float32{1}, shapes.Make(dtypes.Float32, 1))
	check("buffer on device 4", err, "device 4 does not exist")
	check("SPMD over 5", gb.Builder("five").DistributedSPMD(5), "SPMD over 5 devices")
	check("assignment of 3 for 4", func() error {
		b := gb.Builder("assign")
		_ = b.DistributedSPMD(4)
		return b.DeviceAssignment(0, 1, 2)
	}(), "device assignment")
	check("assignment twice", func() error {
		b := gb.Builder("assign2")
		_ = b.DistributedSPMD(2)
		return b.DeviceAssignment(1, 1)
	}(), "twice")

	compile := func(groups [][]int, dt dtypes.DType) error {
		b := gb.Builder("groups")
		if err := b.DistributedSPMD(4); err != nil {
			return err
		}
		x, err := b.Parameter("x", shapes.Make(dt, 3), nil)
		if err != nil {
			return err
		}
		outs, err := b.AllReduce([]backends.Op{x}, backends.ReduceOpSum, groups)
		if err != nil {
			return err
		}
		e, err := b.Compile(outs, nil)
		if err == nil {
			e.Finalize()
		}
		return err
	}
	check("group leaving out a replica", compile([][]int{{0, 1}, {2}}, dtypes.Float32), "leave out replica 3")
	check("group naming replica 4", compile([][]int{{0, 1, 2, 3, 4}}, dtypes.Float32), "replica 4 of 4")
	check("replica in two groups", compile([][]int{{0, 1}, {1, 2, 3}}, dtypes.Float32), "in two groups")
	check("bool operand", compile(nil, dtypes.Bool), "supported are")
	if err := compile([][]int{{3, 1}, {0, 2}}, dtypes.Int32); err != nil {
		t.Errorf("valid groups: %v", err)
	}

	// An input on the wrong device is refused before anything runs or is consumed.
	b := gb.Builder("wrongdev")
	_ = b.DistributedSPMD(2)
	x, _ := b.Parameter("x", shapes.Make(dtypes.Float32, 2), nil)
	outs, _ := b.AllReduce([]backends.Op{x}, backends.ReduceOpSum, nil)
	e, err := b.Compile(outs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Finalize()
	b0, _ := gb.BufferFromFlatData(0, []float32{1, 2}, shapes.Make(dtypes.Float32, 2))
	b0again, _ := gb.BufferFromFlatData(0, []float32{3, 4}, shapes.Make(dtypes.Float32, 2))
	_, err = e.Execute([]backends.Buffer{b0, b0again}, []bool{true, true}, 0)
	check("input of replica 1 on device 0", err, "replica 1 is on device 0")
	if _, err := gb.BufferShape(b0); err != nil {
		t.Errorf("a refused execution consumed a donated input: %v", err)
	}
}

// TestBarrierAbort: replicas waiting at a collective are released with errReplicaFailed when
// another replica fails, instead of waiting forever.
func TestBarrierAbort(t *testing.T) {
	c := newCollectives(4)
	bar := newBarrier(4, c.abort)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() { errs[i] = bar.wait() })
	}
	c.fail()
	c.fail() // idempotent
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, errReplicaFailed) {
			t.Errorf("waiter %d: %v", i, err)
		}
	}
	// A full barrier round completes, repeatedly.
	ok := newBarrier(3, make(chan struct{}))
	for range 5 {
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := ok.wait(); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
}

// TestSPMDSharedSteps: a data-parallel update over 4 virtual devices — g = all-reduce of each
// replica's x·w, w' = w - 0.1·g — run three times, feeding w' back donated. The first run gets
// w as 4 separate copies: every replica computes the update of w, and the identical results are
// stored once (every replica's output references the same storage). From the second run w is
// one shared input, so the update of w runs once for all replicas too. The results equal a direct
// computation in every run.
func TestSPMDSharedSteps(t *testing.T) {
	const replicas = 4
	gb := newGotpu(t, Config{NumDevices: replicas})
	bld := gb.Builder("update")
	if err := bld.DistributedSPMD(replicas); err != nil {
		t.Fatal(err)
	}
	must := mustOp(t)
	x := must(bld.Parameter("x", shapes.Make(dtypes.Float32, 3, 5), nil))
	w := must(bld.Parameter("w", shapes.Make(dtypes.Float32, 5, 7), nil))
	y := must(bld.Dot(x, must(bld.Tanh(w))))
	gs, err := bld.AllReduce([]backends.Op{must(bld.ReduceSum(y, 0))}, backends.ReduceOpSum, nil)
	if err != nil {
		t.Fatal(err)
	}
	step := must(bld.Mul(must(bld.Constant([]float32{0.1})), gs[0]))
	bcast := must(bld.BroadcastInDim(step, shapes.Make(dtypes.Float32, 5, 7), []int{1}))
	w2 := must(bld.Sub(w, bcast))
	exec, err := bld.Compile([]backends.Op{w2, y}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	e := exec.(*Executable)

	rng := rand.New(rand.NewPCG(4, 4))
	xs := make([][]float32, replicas)
	for r := range xs {
		xs[r] = randomFlat(rng, dtypes.Float32, 15).([]float32)
	}
	wv := randomFlat(rng, dtypes.Float32, 35).([]float32)
	// Reference in float64, then compared within float32 tolerance.
	reference := func(w []float32) []float32 {
		g := make([]float64, 7)
		for r := range replicas {
			for j := range 7 {
				for i := range 3 {
					var acc float64
					for k := range 5 {
						acc += float64(xs[r][i*5+k]) * math.Tanh(float64(w[k*7+j]))
					}
					g[j] += acc
				}
			}
		}
		out := make([]float32, 35)
		for k := range 5 {
			for j := range 7 {
				out[k*7+j] = float32(float64(w[k*7+j]) - 0.1*g[j])
			}
		}
		return out
	}
	var ws []backends.Buffer // w on every replica: separate copies at first
	for r := range replicas {
		buf, err := gb.BufferFromFlatData(backends.DeviceNum(r), wv, shapes.Make(dtypes.Float32, 5, 7))
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, buf)
	}
	var counts []int64
	for round := range 3 {
		before := e.sharedSteps.Load()
		var ins []backends.Buffer
		for r := range replicas {
			xb, err := gb.BufferFromFlatData(backends.DeviceNum(r), xs[r], shapes.Make(dtypes.Float32, 3, 5))
			if err != nil {
				t.Fatal(err)
			}
			ins = append(ins, xb, ws[r])
		}
		outs, err := exec.Execute(ins, []bool{true, true, true, true, true, true, true, true}, 0)
		if err != nil {
			t.Fatal(err)
		}
		shared := e.sharedSteps.Load() - before
		counts = append(counts, shared)
		if round > 0 && shared <= counts[0] {
			// Round 0 can share only what depends on the all-reduce alone (0.1·g); the update of
			// w itself needs w shared.
			t.Errorf("round %d: %d steps shared, no more than round 0's %d although w is now one shared input", round, shared, counts[0])
		}
		want := reference(wv)
		for r := range replicas {
			got := flat(t, gb, outs[2*r])
			for i := range got {
				if math.Abs(float64(got[i]-want[i])) > 1e-5 {
					t.Fatalf("round %d replica %d: w'[%d] = %g, want %g", round, r, i, got[i], want[i])
				}
			}
			if outs[2*r].(*buffer).st != outs[0].(*buffer).st {
				t.Errorf("round %d: replica %d's w' is not stored once with replica 0's", round, r)
			}
			if r > 0 && outs[2*r+1].(*buffer).st == outs[1].(*buffer).st {
				t.Errorf("round %d: replica %d's own y shares replica 0's storage", round, r)
			}
			if d, _ := gb.BufferDeviceNum(outs[2*r]); d != backends.DeviceNum(r) {
				t.Errorf("replica %d's output is on device %d", r, d)
			}
		}
		t.Logf("round %d: %d steps run once for all %d replicas", round, shared, replicas)
		wv = want
		ws = ws[:0]
		for r := range replicas {
			ws = append(ws, outs[2*r])
			if err := gb.BufferFinalize(outs[2*r+1]); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Finalizing the last shared w' on every replica releases it once; a second finalize is a no-op.
	for _, b := range ws {
		if err := gb.BufferFinalize(b); err != nil {
			t.Fatal(err)
		}
		if err := gb.BufferFinalize(b); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSPMDReplicaFailure: replica 1 fails inside a fallback segment (an int32 division by zero,
// which panics in simplego) while replica 0 waits for it at the all-reduce. Execute returns an
// error naming replica 1 — neither a crash nor a hang — and the executable still runs after.
func TestSPMDReplicaFailure(t *testing.T) {
	gb := newGotpu(t, Config{NumDevices: 2})
	bld := gb.Builder("divide")
	if err := bld.DistributedSPMD(2); err != nil {
		t.Fatal(err)
	}
	must := mustOp(t)
	x := must(bld.Parameter("x", shapes.Make(dtypes.Int32, 3), nil))
	d := must(bld.Parameter("d", shapes.Make(dtypes.Int32, 3), nil))
	outs, err := bld.AllReduce([]backends.Op{must(bld.Div(x, d))}, backends.ReduceOpSum, nil)
	if err != nil {
		t.Fatal(err)
	}
	exec, err := bld.Compile(outs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	inputs := func(divisor1 int32) []backends.Buffer {
		var bufs []backends.Buffer
		for r, div := range []int32{1, divisor1} {
			for _, v := range [][]int32{{6, 8, 10}, {div, div, div}} {
				b, err := gb.BufferFromFlatData(backends.DeviceNum(r), v, shapes.Make(dtypes.Int32, 3))
				if err != nil {
					t.Fatal(err)
				}
				bufs = append(bufs, b)
			}
		}
		return bufs
	}
	done := make(chan error, 1)
	go func() {
		_, err := exec.Execute(inputs(0), nil, 0)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "replica 1") {
			t.Fatalf("division by zero on replica 1: %v, want an error naming replica 1", err)
		}
		t.Logf("error: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("Execute hangs after a replica failed")
	}
	got, err := exec.Execute(inputs(2), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 2 {
		flat, _ := gb.BufferData(got[r])
		if want := []int32{6 + 3, 8 + 4, 10 + 5}; !slices.Equal(flat.([]int32), want) {
			t.Errorf("replica %d: %v, want %v", r, flat, want)
		}
	}
}
