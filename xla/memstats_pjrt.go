//go:build !noxla

package xla

import (
	"fmt"
	"reflect"
	"unsafe"

	"github.com/gomlx/go-xla/pkg/pjrt"
	"github.com/gomlx/gomlx/backends"
	gomlxxla "github.com/gomlx/gomlx/backends/xla"
	"github.com/gomlx/gomlx/pkg/core/graph"
)

// graphMemoryStats reaches the go-xla executable behind a compiled graph. GoMLX v0.26.0 keeps it
// two unexported fields deep — graph.Graph.executable (a backends.Executable) holds, for the XLA
// backend, a *backends/xla.Executable whose exec is the *pjrt.LoadedExecutable — and go-xla reads
// PJRT_Executable_GetCompiledMemoryStats once at load time into the LoadedExecutable's exported
// OnDeviceMemoryUsageStats. This is the one place gotpu reads unexported GoMLX state: each hop
// checks the field's name and exact type first, so a GoMLX upgrade that moves them yields
// ErrMemoryStatsUnavailable, never a panic or a misread. (The pure-Go backend's executables are
// another type: not available.)
func graphMemoryStats(g *graph.Graph) (MemoryStats, error) {
	exe, ok := unexportedField(reflect.ValueOf(g), "executable", reflect.TypeFor[backends.Executable]())
	if !ok {
		return MemoryStats{}, fmt.Errorf("%w: GoMLX's graph.Graph no longer keeps its executable in the field gotpu reads",
			ErrMemoryStatsUnavailable)
	}
	be, _ := exe.Interface().(backends.Executable)
	xe, ok := be.(*gomlxxla.Executable)
	if !ok || xe == nil {
		return MemoryStats{}, fmt.Errorf("%w: the program was not compiled by a PJRT plugin (backend executable %T)",
			ErrMemoryStatsUnavailable, be)
	}
	le, ok := unexportedField(reflect.ValueOf(xe), "exec", reflect.TypeFor[*pjrt.LoadedExecutable]())
	if !ok {
		return MemoryStats{}, fmt.Errorf("%w: GoMLX's XLA executable no longer keeps its PJRT executable in the field gotpu reads",
			ErrMemoryStatsUnavailable)
	}
	l, _ := le.Interface().(*pjrt.LoadedExecutable)
	if l == nil {
		return MemoryStats{}, fmt.Errorf("%w: the PJRT executable was released", ErrMemoryStatsUnavailable)
	}
	d := l.OnDeviceMemoryUsageStats
	return MemoryStats{Argument: d.Inputs, Output: d.Outputs, Alias: d.Aliases, Temp: d.Temporary,
		GeneratedCode: d.GeneratedCode}, nil
}

// unexportedField returns the field name of the struct ptr points to, readable, if ptr is a
// non-nil pointer to a struct with such a field of exactly type want.
func unexportedField(ptr reflect.Value, name string, want reflect.Type) (reflect.Value, bool) {
	if ptr.Kind() != reflect.Pointer || ptr.IsNil() || ptr.Elem().Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	f := ptr.Elem().FieldByName(name)
	if !f.IsValid() || f.Type() != want || !f.CanAddr() {
		return reflect.Value{}, false
	}
	return reflect.NewAt(want, unsafe.Pointer(f.UnsafeAddr())).Elem(), true
}
