//go:build !noxla

package step

import (
	"context"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/gomlx/go-xla/pkg/pjrt"
	"github.com/gomlx/go-xla/pkg/stablehlo"
	"github.com/gomlx/gomlx/backends"
	gomlxxla "github.com/gomlx/gomlx/backends/xla"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/xla"
)

// fakeXLA is GoMLX's XLA backend marked as loaded, with transfers that only record shapes, so that
// GoMLX's own context.Exec builds a program up to the missing PJRT client (the hack of
// hlo_gomlx_test.go; it exists only in tests).
type fakeXLA struct {
	*gomlxxla.Backend
	last backends.Builder
}

type fakeXLABuffer struct {
	shape  shapes.Shape
	device backends.DeviceNum
}

func newFakeXLA(numDevices int) *fakeXLA {
	be := &gomlxxla.Backend{}
	field := func(name string) reflect.Value {
		f := reflect.ValueOf(be).Elem().FieldByName(name)
		return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	}
	field("plugin").Set(reflect.ValueOf(&pjrt.Plugin{}))
	field("numDevices").Set(reflect.ValueOf(numDevices))
	return &fakeXLA{Backend: be}
}

func (b *fakeXLA) Builder(name string) backends.Builder {
	b.last = b.Backend.Builder(name)
	return b.last
}
func (b *fakeXLA) BufferFromFlatData(d backends.DeviceNum, _ any, s shapes.Shape) (backends.Buffer, error) {
	return &fakeXLABuffer{shape: s, device: d}, nil
}
func (b *fakeXLA) BufferShape(buf backends.Buffer) (shapes.Shape, error) {
	return buf.(*fakeXLABuffer).shape, nil
}
func (b *fakeXLA) BufferDeviceNum(buf backends.Buffer) (backends.DeviceNum, error) {
	return buf.(*fakeXLABuffer).device, nil
}
func (b *fakeXLA) BufferFinalize(backends.Buffer) error { return nil }

// TestFSDPAutoShardingExecMatchesTrace: the program an FSDP stepper builds on a PJRT plugin — the
// train Exec configured as Dispatch configures it on such a runtime (AutoSharding over the mesh,
// the batch's and the window's input shardings, the output shardings set by autoOutputs), given
// each of the 8 devices its shard of a global batch — is, as GoMLX's own XLA backend builds it,
// byte for byte the program FSDPStableHLO prints (and the golden file pins). No plugin runs it
// here: this checks everything up to XLA's compiler.
func TestFSDPAutoShardingExecMatchesTrace(t *testing.T) {
	s := fsdpGoldenStepper(t)
	want, err := s.FSDPStableHLO(context.Background(), goldenBatch)
	if err != nil {
		t.Fatal(err)
	}
	s.auto = true
	be := newFakeXLA(goldenReplicas)
	var e *mlctx.Exec
	e, err = mlctx.NewExec(be, s.model.Context(), s.autoOutputs(&e, s.trainGraph, s.trainOutputSpecs))
	if err != nil {
		t.Fatal(err)
	}
	s.autoExec(e)
	specs, err := s.autoInputSpecs([]int{2, 2, 2}, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	e.WithInputShardingSpecs(specs...)
	if err := e.PreCompile(goldenArgs(goldenReplicas)...); err == nil {
		t.Fatal("GoMLX compiled without a PJRT client?")
	}
	text := fakeModule(t, be)
	name := regexp.MustCompile(`^module @\S+`)
	got := name.ReplaceAllString(text, "module @m")
	if w := name.ReplaceAllString(want, "module @m"); got != w {
		t.Errorf("GoMLX's program for the PJRT FSDP step differs from FSDPStableHLO's at %s", firstLineDiffStep(got, w))
	}
}

func firstLineDiffStep(a, b string) string {
	for i, al := 0, splitLines(a); i < len(al); i++ {
		bl := splitLines(b)
		if i >= len(bl) || al[i] != bl[i] {
			if i < len(bl) {
				return "line " + itoa(i+1) + ":\n  GoMLX: " + trunc(al[i]) + "\n  trace: " + trunc(bl[i])
			}
			return "line " + itoa(i+1)
		}
	}
	return "the end"
}

func splitLines(s string) []string { return regexp.MustCompile("\n").Split(s, -1) }
func itoa(i int) string            { return strconv.Itoa(i) }
func trunc(s string) string {
	if len(s) > 400 {
		return s[:400] + "…"
	}
	return s
}

// fakeModule returns the StableHLO GoMLX's builder wrote on be.
func fakeModule(t *testing.T, be *fakeXLA) string {
	t.Helper()
	if be.last == nil {
		t.Fatal("GoMLX built no program")
	}
	f := reflect.ValueOf(be.last).Elem().FieldByName("builder")
	text, err := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(*stablehlo.Builder).Build()
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

// goldenArgs are per-device train-program arguments for goldenBatch (three batch tensors, the
// window table and the counter), for n devices.
func goldenArgs(n int) []any {
	var args []any
	for range n {
		for range 3 {
			args = append(args, tensors.FromShape(shapes.Make(dtypes.Int32, goldenBatch.Size, goldenBatch.SeqLen)))
		}
		args = append(args, tensors.FromShape(shapes.Make(dtypes.Float32, 1, replicatedScalars)), tensors.FromShape(shapes.Make(dtypes.Int32, 3)))
	}
	return args
}

// TestDataParallelOnPJRTIsAutoSharding: GoMLX v0.26.0's XLA backend cannot build the SPMD form of
// the data-parallel step (context.Exec.SPMD gives every variable a replicated sharding spec, and
// the builder resolves specs against AutoSharding meshes only), so on a PJRT plugin New makes
// data parallelism the AutoSharding program with an fsdp axis of 1: the batch split over the
// data axis, every parameter and optimizer variable replicated. Both shown with GoMLX's own
// backend, up to the missing PJRT client.
func TestDataParallelOnPJRTIsAutoSharding(t *testing.T) {
	spmd := goldenStepper(t)
	mesh, err := distributed.NewDeviceMesh([]int{goldenReplicas}, []string{xla.ReplicaAxis})
	if err != nil {
		t.Fatal(err)
	}
	e, err := mlctx.NewExec(newFakeXLA(goldenReplicas), spmd.model.Context(), spmd.trainGraph)
	if err != nil {
		t.Fatal(err)
	}
	e.SPMD(mesh)
	if err := e.PreCompile(goldenArgs(goldenReplicas)...); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("GoMLX's XLA backend and the SPMD data-parallel step: %v; want its \"mesh not found\" refusal", err)
	}

	s := goldenStepper(t)
	if s.fsdp, err = s.newFSDPPlan(FSDP{Data: goldenReplicas, Shard: 1}); err != nil {
		t.Fatal(err)
	}
	s.auto = true
	be := newFakeXLA(goldenReplicas)
	var ae *mlctx.Exec
	if ae, err = mlctx.NewExec(be, s.model.Context(), s.autoOutputs(&ae, s.trainGraph, s.trainOutputSpecs)); err != nil {
		t.Fatal(err)
	}
	s.autoExec(ae)
	if err := s.shardVariables(); err != nil {
		t.Fatal(err)
	}
	specs, err := s.autoInputSpecs([]int{2, 2, 2}, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	ae.WithInputShardingSpecs(specs...)
	if err := ae.PreCompile(goldenArgs(goldenReplicas)...); err == nil {
		t.Fatal("GoMLX compiled without a PJRT client?")
	}
	m, err := xla.ParseStableHLO(fakeModule(t, be))
	if err != nil {
		t.Fatal(err)
	}
	if m.NumPartitions != goldenReplicas {
		t.Errorf("num_partitions %d, want %d", m.NumPartitions, goldenReplicas)
	}
	for i := range 3 {
		if sh := m.ArgShardings[i]; sh == nil || !slices.Equal(sh.Axes(0), []string{DataAxis, FSDPAxis}) {
			t.Errorf("batch argument %d: sharding %v, want the rows over the devices", i, sh)
		}
	}
	vars := 0
	for i, name := range m.Args {
		if strings.HasPrefix(name, "%var__") {
			vars++
			if sh := m.ArgShardings[i]; sh == nil || !sh.IsReplicated() {
				t.Errorf("%s: sharding %v, want replicated", name, sh)
			}
		}
	}
	if want := len(s.params) * 3; vars < want {
		t.Errorf("%d variable arguments, want at least %d (parameters and AdamW moments)", vars, want)
	}
}
