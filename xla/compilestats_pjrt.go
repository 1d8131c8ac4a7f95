//go:build !noxla

package xla

import (
	"fmt"
	"reflect"

	"github.com/gomlx/go-xla/pkg/pjrt"
	gomlxxla "github.com/gomlx/gomlx/backends/xla"
)

// compileTextStats compiles text with the PJRT client behind rt's GoMLX backend (GoMLX v0.26.0
// keeps it in the unexported field client of backends/xla.Backend; the hop checks its name and
// type, as graphMemoryStats does) the way GoMLX compiles an AutoSharding program (WithShardy and
// the identity device assignment), reads the figures and frees the executable.
func compileTextStats(rt *Runtime, text string, partitions int) (m MemoryStats, err error) {
	defer Recover(&err, "xla.CompileStableHLOStats")
	be, ok := rt.backend.(*gomlxxla.Backend)
	if !ok || be == nil {
		return MemoryStats{}, fmt.Errorf("%w: the runtime's backend %T is not GoMLX's XLA backend", ErrMemoryStatsUnavailable, rt.backend)
	}
	cv, ok := unexportedField(reflect.ValueOf(be), "client", reflect.TypeFor[*pjrt.Client]())
	if !ok {
		return MemoryStats{}, fmt.Errorf("%w: GoMLX's XLA backend no longer keeps its PJRT client in the field gotpu reads", ErrMemoryStatsUnavailable)
	}
	client, _ := cv.Interface().(*pjrt.Client)
	if client == nil {
		return MemoryStats{}, fmt.Errorf("%w: the runtime's PJRT client was released", ErrMemoryStatsUnavailable)
	}
	cc := client.Compile().WithStableHLO([]byte(text))
	assignment := make([]int, partitions)
	for i := range assignment {
		assignment[i] = i
	}
	cc = cc.WithShardy(partitions).WithDeviceAssignment(assignment)
	exe, err := cc.Done()
	if err != nil {
		return MemoryStats{}, fmt.Errorf("xla.CompileStableHLOStats: compiling: %w", err)
	}
	defer func() { _ = exe.Destroy() }()
	d := exe.OnDeviceMemoryUsageStats
	return MemoryStats{Argument: d.Inputs, Output: d.Outputs, Alias: d.Aliases, Temp: d.Temporary, GeneratedCode: d.GeneratedCode}, nil
}
