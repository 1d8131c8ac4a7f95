//go:build !noxla

package xlatest

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/gomlx/go-xla/pkg/pjrt"
	"github.com/gomlx/go-xla/pkg/stablehlo"
	"github.com/gomlx/gomlx/backends"
	gomlxxla "github.com/gomlx/gomlx/backends/xla"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// GoMLXBackend is GoMLX's XLA backend marked as loaded, with fake transfers, remembering the
// builder its last graph asked for.
type GoMLXBackend struct {
	*gomlxxla.Backend
	last backends.Builder
}

// fakeBuffer stands for a device buffer: GoMLX reads only its shape and device before compiling.
type fakeBuffer struct {
	shape  shapes.Shape
	device backends.DeviceNum
}

// NewGoMLXBackend returns GoMLX's XLA backend with numDevices devices, able to build programs
// (not to run them) without a PJRT plugin.
func NewGoMLXBackend(numDevices int) *GoMLXBackend {
	be := &gomlxxla.Backend{}
	field(reflect.ValueOf(be).Elem(), "plugin").Set(reflect.ValueOf(&pjrt.Plugin{}))
	field(reflect.ValueOf(be).Elem(), "numDevices").Set(reflect.ValueOf(numDevices))
	return &GoMLXBackend{Backend: be}
}

// Builder records the builder it hands out, for Module.
func (b *GoMLXBackend) Builder(name string) backends.Builder {
	b.last = b.Backend.Builder(name)
	return b.last
}

func (b *GoMLXBackend) BufferFromFlatData(d backends.DeviceNum, _ any, s shapes.Shape) (backends.Buffer, error) {
	return &fakeBuffer{shape: s, device: d}, nil
}

func (b *GoMLXBackend) BufferShape(buf backends.Buffer) (shapes.Shape, error) {
	return buf.(*fakeBuffer).shape, nil
}

func (b *GoMLXBackend) BufferDeviceNum(buf backends.Buffer) (backends.DeviceNum, error) {
	return buf.(*fakeBuffer).device, nil
}

func (b *GoMLXBackend) BufferFinalize(backends.Buffer) error { return nil }

// Module returns the StableHLO text the last builder wrote (after Compile stopped at the missing
// PJRT client); it fails the test if there is none.
func (b *GoMLXBackend) Module(t testing.TB) string {
	t.Helper()
	if b.last == nil {
		t.Fatal("xlatest: GoMLX built no program")
	}
	text, err := field(reflect.ValueOf(b.last).Elem(), "builder").Interface().(*stablehlo.Builder).Build()
	if err != nil {
		t.Fatalf("xlatest: GoMLX's XLA backend: %v", err)
	}
	return string(text)
}

// field returns an addressable view of a struct field, exported or not.
func field(v reflect.Value, name string) reflect.Value {
	f := v.FieldByName(name)
	return reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
}
