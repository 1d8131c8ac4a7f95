package xla

import (
	"fmt"
	"sync"
	"time"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// Program is a traced computation: a Go function building a graph, compiled once per distinct set
// of input shapes. It wraps graph.Exec so that GoMLX's panics (graph building reports shape errors
// by panicking) come back as errors, and it counts compilations, because a recompile is expensive
// on an accelerator and gotpu reports every one.
//
// Run may be called from several goroutines.
type Program struct {
	name string
	exec *graph.Exec

	mu          sync.Mutex
	graphs      map[graph.GraphId]bool
	compileTime time.Duration
	last        *graph.Graph // the graph the last Run ran (MemoryStats)
}

// Compile wraps fn, a function of *graph.Node arguments returning one *graph.Node or a slice of
// them (any signature graph.NewExec accepts). Nothing is traced until the first Run.
func (r *Runtime) Compile(name string, fn any) (p *Program, err error) {
	defer Recover(&err, "xla.Compile "+name)
	exec, err := graph.NewExecAny(r.backend, fn)
	if err != nil {
		return nil, fmt.Errorf("xla.Compile %s: %w", name, err)
	}
	exec.WithName(name)
	return &Program{name: name, exec: exec, graphs: map[graph.GraphId]bool{}}, nil
}

// Run executes the program on its arguments (tensors or Go values), tracing and compiling it first
// if these input shapes are new.
func (p *Program) Run(args ...any) (outs []*tensors.Tensor, err error) {
	defer Recover(&err, "xla.Program.Run "+p.name)
	start := time.Now()
	outs, g, err := p.exec.ExecWithGraph(args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	p.mu.Lock()
	p.last = g
	if !p.graphs[g.GraphId()] {
		// First execution of this graph: the time includes tracing and compiling.
		p.graphs[g.GraphId()] = true
		p.compileTime += time.Since(start)
	}
	p.mu.Unlock()
	return outs, nil
}

// Compilations returns how many distinct graphs (input shape sets) were compiled so far.
func (p *Program) Compilations() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.graphs)
}

// CompileTime is the total time of the first runs of each compiled graph (trace + compile + run).
func (p *Program) CompileTime() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.compileTime
}

// Close releases the compiled graphs.
func (p *Program) Close() {
	p.exec.Finalize()
}
