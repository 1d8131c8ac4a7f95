//go:build !noxla

package step

import (
	"context"
	"reflect"
	"regexp"
	"strconv"
	"testing"
	"unsafe"

	"github.com/gomlx/go-xla/pkg/pjrt"
	"github.com/gomlx/go-xla/pkg/stablehlo"
	"github.com/gomlx/gomlx/backends"
	gomlxxla "github.com/gomlx/gomlx/backends/xla"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
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
	var args []any
	for range goldenReplicas {
		for range 3 {
			args = append(args, tensors.FromShape(shapes.Make(dtypes.Int32, goldenBatch.Size, goldenBatch.SeqLen)))
		}
		args = append(args, tensors.FromShape(shapes.Make(dtypes.Float32, 1, replicatedScalars)), tensors.FromShape(shapes.Make(dtypes.Int32, 3)))
	}
	if err := e.PreCompile(args...); err == nil {
		t.Fatal("GoMLX compiled without a PJRT client?")
	}
	if be.last == nil {
		t.Fatal("GoMLX built no program")
	}
	f := reflect.ValueOf(be.last).Elem().FieldByName("builder")
	text, err := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(*stablehlo.Builder).Build()
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile(`^module @\S+`)
	got := name.ReplaceAllString(string(text), "module @m")
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
