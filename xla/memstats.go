package xla

import (
	"errors"
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
)

// MemoryStats are the XLA compiler's own memory figures for one compiled program
// (PJRT_Executable_GetCompiledMemoryStats, xla::CompiledMemoryStats), in bytes of one device's
// default memory (HBM on a TPU or GPU; host memory for XLA's CPU plugin). A program compiled for
// several devices (SPMD or AutoSharding) is one partition's program: the figures are per device.
//
// PJRT also reports peak_memory_in_bytes, but go-xla v0.1.4 does not read it: Total is the
// figure to use (an upper bound of the peak: it assumes every temporary is live at once).
type MemoryStats struct {
	// Argument is the size of the program's parameters (inputs) on the device.
	Argument int64
	// Output is the size of its results.
	Output int64
	// Alias is the part of Output that reuses (is donated from) Argument buffers.
	Alias int64
	// Temp is the compiler's scratch space: every intermediate buffer the program allocates
	// (XLA's buffer assignment, after fusion, rematerialisation and buffer reuse).
	Temp int64
	// GeneratedCode is the size of the compiled code.
	GeneratedCode int64
}

// Total is Argument + Output − Alias + Temp + GeneratedCode: what the device holds while the
// program runs (go-xla's Requirements).
func (m MemoryStats) Total() int64 {
	return m.Argument + m.Output - m.Alias + m.Temp + m.GeneratedCode
}

// String formats the figures for logs and messages.
func (m MemoryStats) String() string {
	return fmt.Sprintf("argument %d, output %d, alias %d, temp %d, code %d, total %d bytes",
		m.Argument, m.Output, m.Alias, m.Temp, m.GeneratedCode, m.Total())
}

// ErrMemoryStatsUnavailable is returned when a program has no compiler memory figures: it runs on
// gotpu's pure-Go backend (they come from a PJRT plugin's compiler), it has not been compiled yet,
// or the GoMLX/go-xla version in use no longer keeps them where gotpu reads them
// (xla/memstats_pjrt.go).
var ErrMemoryStatsUnavailable = errors.New("xla: compiler memory statistics are not available")

// GraphMemoryStats returns the compiler's memory figures of a compiled GoMLX graph (the *Graph a
// graph.Exec or context.Exec run returns). It never panics: anything unexpected is
// ErrMemoryStatsUnavailable.
func GraphMemoryStats(g *graph.Graph) (m MemoryStats, err error) {
	defer func() {
		if v := recover(); v != nil {
			m, err = MemoryStats{}, fmt.Errorf("%w (reading them panicked: %v)", ErrMemoryStatsUnavailable, v)
		}
	}()
	if g == nil || !g.IsCompiled() {
		return MemoryStats{}, fmt.Errorf("%w: the program is not compiled", ErrMemoryStatsUnavailable)
	}
	return graphMemoryStats(g)
}

// MemoryStats returns the compiler's memory figures of the graph the last Run compiled or ran
// (ErrMemoryStatsUnavailable before the first Run, and on the pure-Go backend).
func (p *Program) MemoryStats() (MemoryStats, error) {
	p.mu.Lock()
	g := p.last
	p.mu.Unlock()
	if g == nil {
		return MemoryStats{}, fmt.Errorf("%w: %s has not run yet", ErrMemoryStatsUnavailable, p.name)
	}
	return GraphMemoryStats(g)
}
