//go:build !noxla

package xla

// TestAutoShardingMatchesGoMLXExec pins an AutoSharding trace byte for byte to the program GoMLX's
// own context.Exec builds on GoMLX's XLA backend for the same graph function. GoMLX refuses to
// build anything before a PJRT plugin is loaded, so, as trainer/step's hlo_gomlx_test.go does, the
// test marks a zero backend as loaded with reflect and unsafe and reads the builder's unexported
// module after Compile stops at the missing PJRT client; it also fakes the host→device transfers
// that context.Exec does before building (the buffers only carry their shapes).

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/gomlx/go-xla/pkg/pjrt"
	"github.com/gomlx/go-xla/pkg/stablehlo"
	"github.com/gomlx/gomlx/backends"
	gomlxxla "github.com/gomlx/gomlx/backends/xla"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// fakeBuffer stands for a device buffer: context.Exec only reads its shape before compiling.
type fakeBuffer struct {
	shape  shapes.Shape
	device backends.DeviceNum
}

// gomlxExecBackend is GoMLX's XLA backend marked as loaded, with fake transfers, remembering the
// builder its graph asks for.
type gomlxExecBackend struct {
	*gomlxxla.Backend
	last backends.Builder
}

func newGoMLXExecBackend(numDevices int) *gomlxExecBackend {
	be := &gomlxxla.Backend{}
	private(reflect.ValueOf(be).Elem(), "plugin").Set(reflect.ValueOf(&pjrt.Plugin{}))
	private(reflect.ValueOf(be).Elem(), "numDevices").Set(reflect.ValueOf(numDevices))
	return &gomlxExecBackend{Backend: be}
}

func (b *gomlxExecBackend) Builder(name string) backends.Builder {
	b.last = b.Backend.Builder(name)
	return b.last
}

func (b *gomlxExecBackend) BufferFromFlatData(d backends.DeviceNum, _ any, s shapes.Shape) (backends.Buffer, error) {
	return &fakeBuffer{shape: s, device: d}, nil
}

func (b *gomlxExecBackend) BufferShape(buf backends.Buffer) (shapes.Shape, error) {
	return buf.(*fakeBuffer).shape, nil
}

func (b *gomlxExecBackend) BufferDeviceNum(buf backends.Buffer) (backends.DeviceNum, error) {
	return buf.(*fakeBuffer).device, nil
}

func (b *gomlxExecBackend) BufferFinalize(backends.Buffer) error { return nil }

// module returns the text of the module GoMLX's builder wrote.
func (b *gomlxExecBackend) module(t *testing.T) string {
	t.Helper()
	if b.last == nil {
		t.Fatal("GoMLX built no program")
	}
	text, err := private(reflect.ValueOf(b.last).Elem(), "builder").Interface().(*stablehlo.Builder).Build()
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

// private returns an addressable view of an unexported struct field.
func private(v reflect.Value, field string) reflect.Value {
	f := v.FieldByName(field)
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}

func TestAutoShardingMatchesGoMLXExec(t *testing.T) {
	f := newShardedFixture(t)
	f.spec.Name = "fsdp_step#0" // context.Exec names its first graph "<name>#0"
	got, err := StableHLOContext(context.Background(), f.spec, f.c, f.fn)
	if err != nil {
		t.Fatal(err)
	}
	// The trace leaves the variables' specs as they were.
	if f.b.ShardingSpec() != nil || f.cnt.ShardingSpec() != nil || f.w.ShardingSpec() != f.byFSDP {
		t.Errorf("specs after the trace: b %s, count %s, w %s", f.b.ShardingSpec(), f.cnt.ShardingSpec(), f.w.ShardingSpec())
	}

	// GoMLX's context.Exec for the same function: AutoSharding over the mesh, the input's spec, and
	// output specs for the updated variables (w, m, count in context order) then y and the loss.
	be := newGoMLXExecBackend(f.mesh.NumDevices())
	e, err := mlctx.NewExec(be, f.c, f.fn)
	if err != nil {
		t.Fatal(err)
	}
	replicated := distributed.NewReplicatedShardingSpec(f.mesh)
	var varSpecs []*distributed.ShardingSpec
	for v := range f.c.IterVariables() {
		if v == f.w || v == f.m || v == f.cnt {
			varSpecs = append(varSpecs, cmp.Or(v.ShardingSpec(), replicated))
		}
	}
	e.WithName("fsdp_step").AutoSharding(f.mesh).WithInputShardingSpecs(f.byData).
		WithOutputShardingSpecs(append(varSpecs, f.byData, replicated)...)
	shards := make([]any, f.mesh.NumDevices()) // one [2, 8] shard of x per device
	for i := range shards {
		shards[i] = tensors.FromShape(f32(2, 8))
	}
	if err := e.PreCompile(shards...); err == nil {
		t.Fatal("GoMLX compiled without a PJRT client?")
	}
	want := be.module(t)
	if got != want {
		t.Errorf("the AutoSharding trace differs from GoMLX's context.Exec program at %s\ngotpu:\n%s\nGoMLX:\n%s",
			firstLineDiff(got, want), got, want)
	}
	if !strings.Contains(want, `sdy.sharding = #sdy.sharding<@mesh, [{"fsdp"}, {}]>`) {
		t.Errorf("GoMLX's program lacks the sharded w:\n%s", want)
	}
}

// firstLineDiff shows where two texts part.
func firstLineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range min(len(al), len(bl)) {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  gotpu: %s\n  GoMLX: %s", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("lengths differ: %d vs %d lines", len(al), len(bl))
}
