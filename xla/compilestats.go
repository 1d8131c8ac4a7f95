package xla

import (
	"context"
	"fmt"
)

// CompileStableHLOStats compiles a StableHLO program's text on rt's PJRT plugin without running
// it and returns the compiler's memory figures (per device). text is what StableHLO or
// StableHLOContext print; partitions is the program's device count: an AutoSharding (Shardy)
// program over that many devices, compiled for the runtime's first devices, or 1 for a
// one-device program.
//
// It exists for programs too large to run on the host: tracing needs only the variables'
// shapes, and XLA's buffer assignment (the figures) is done at compile time, so a program whose
// state would not fit in the host's memory can still be measured (gotpu plan's fit against the
// compiler). Errors: the pure-Go backend (ErrMemoryStatsUnavailable), more partitions than the
// runtime has devices, a compile failure (XLA's message), a cancelled ctx.
func CompileStableHLOStats(ctx context.Context, rt *Runtime, text string, partitions int) (MemoryStats, error) {
	switch {
	case rt == nil:
		return MemoryStats{}, fmt.Errorf("xla.CompileStableHLOStats: nil runtime")
	case rt.Kind() == DeviceGo:
		return MemoryStats{}, fmt.Errorf("xla.CompileStableHLOStats: %w: gotpu's pure-Go backend has no compiler; open a PJRT plugin (--device cpu, tpu or cuda)",
			ErrMemoryStatsUnavailable)
	case partitions < 1 || partitions > rt.NumDevices():
		return MemoryStats{}, fmt.Errorf("xla.CompileStableHLOStats: %d partitions, but the runtime has %d devices", partitions, rt.NumDevices())
	case text == "":
		return MemoryStats{}, fmt.Errorf("xla.CompileStableHLOStats: empty program text")
	}
	if err := ctx.Err(); err != nil {
		return MemoryStats{}, fmt.Errorf("xla.CompileStableHLOStats: %w", err)
	}
	return compileTextStats(rt, text, partitions)
}
