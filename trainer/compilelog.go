package trainer

import (
	"context"
	"log/slog"
	"math"
	"strconv"

	"github.com/gotpu/gotpu/xla"
)

// What the training log says about compiling (issue 41): a PJRT runtime counts the programs its
// plugin compiled and those the persistent compilation cache answered (xla.CompileStats), and the
// log lines that report a new program — "compiled the training step in X s" (loop.go), "compiled
// the evaluation step in X s" (evaluate.go) — carry the runtime's counters since the previous
// such line, so a reader sees at a glance whether the program came from the cache:
//
//	source=cache     every program was loaded from the cache (programs_compiled=0, cache_hits>0)
//	source=xla       every program was compiled by the plugin (cache off, or all misses)
//	source=cache+xla some of each (e.g. a gradient program cached, the update program not)
//	source=go        gotpu's pure-Go backend compiled them (fusion and buffer planning; it has no
//	                 cache, so its lines carry programs_compiled and go_compile_seconds only)
//
// The "X s" of the message is the program's whole first run (tracing, compiling or loading, and
// executing), the stepper's measure; the attributes are the runtime's. The counters are the
// runtime's, not the trainer's: a runtime shared with other work (the service with
// -max_running > 1) counts that work's compiles too. At the end of Train one "compilation" line
// sums the run. A runtime without counters (GoMLX's simplego, a plugin gotpu could not hook)
// gets none of this. Nothing is added to log_history: its entries keep Hugging Face's keys.

// compileMarks is the runtime's compile counters when the run started and at the last line that
// reported them.
type compileMarks struct {
	begun      bool
	ok         bool // the runtime has counters (a PJRT plugin gotpu hooked, or gotpu's Go backend)
	goBackend  bool // they are gotpu's pure-Go backend's: no XLA, no cache
	start, now xla.CompileStats
}

// begin marks the start of a run.
func (c *compileMarks) begin(rt *xla.Runtime) {
	c.start, c.ok = rt.CompileStats()
	c.now, c.begun, c.goBackend = c.start, true, rt.Kind() == xla.DeviceGo
}

// ensure begins the marks if no run has: an Evaluate or Predict before any Train reports what
// it compiled itself, not what loading the model did.
func (c *compileMarks) ensure(rt *xla.Runtime) {
	if !c.begun {
		c.begin(rt)
	}
}

// since returns the counters since the last report (or since the run started) and marks now;
// false on a runtime without counters, or outside a run begun with begin.
func (c *compileMarks) since(rt *xla.Runtime) (xla.CompileStats, bool) {
	if !c.ok {
		return xla.CompileStats{}, false
	}
	cur, ok := rt.CompileStats()
	if !ok {
		return xla.CompileStats{}, false
	}
	d := cur.Sub(c.now)
	c.now = cur
	return d, true
}

// attrs are the slog attributes of a report of new programs: where they came from and what it
// cost.
func (c *compileMarks) attrs(d xla.CompileStats) []any {
	if c.goBackend {
		return []any{"source", "go", "programs_compiled", d.Compiles, "go_compile_seconds", roundSeconds(d.CompileSeconds)}
	}
	attrs := []any{}
	if src := compileSource(d); src != "" {
		attrs = append(attrs, "source", src)
	}
	return append(attrs,
		"programs_compiled", d.Compiles, "xla_compile_seconds", roundSeconds(d.CompileSeconds),
		"cache_hits", d.CacheHits, "cache_load_seconds", roundSeconds(d.LoadSeconds),
		"cache_misses", d.CacheMisses, "compilation_cache", cacheDirAttr(d.CacheDir))
}

// compileSource says where the programs of a report came from: "cache", "xla" or "cache+xla";
// "" when the runtime saw neither (nothing reached the plugin since the last report).
func compileSource(d xla.CompileStats) string {
	switch {
	case d.CacheHits > 0 && d.Compiles > 0:
		return "cache+xla"
	case d.CacheHits > 0:
		return "cache"
	case d.Compiles > 0:
		return "xla"
	}
	return ""
}

func cacheDirAttr(dir string) string {
	if dir == "" {
		return "off"
	}
	return dir
}

// roundSeconds keeps milliseconds: the log's figures are for reading.
func roundSeconds(s float64) float64 { return math.Round(s*1000) / 1000 }

// formatSeconds is a compile time as the "compiled ... in X s" messages print it.
func formatSeconds(s float64) string { return strconv.FormatFloat(s, 'g', 3, 64) }

// logCompileSummary is the run's "compilation" line (Train's end): everything the runtime
// compiled or loaded since the run began. Nothing on a runtime without counters.
func (t *Trainer) logCompileSummary() {
	if !t.compiles.ok {
		return
	}
	cur, ok := t.rt.CompileStats()
	if !ok {
		return
	}
	d := cur.Sub(t.compiles.start)
	if t.compiles.goBackend {
		t.log.Info("compilation", "backend", "go", "programs_compiled", d.Compiles, "go_compile_seconds", roundSeconds(d.CompileSeconds))
		return
	}
	t.log.Info("compilation", "programs_compiled", d.Compiles, "xla_compile_seconds", roundSeconds(d.CompileSeconds),
		"cache_hits", d.CacheHits, "cache_load_seconds", roundSeconds(d.LoadSeconds), "cache_misses", d.CacheMisses,
		"cache_writes", d.CacheWrites, "cache_errors", d.CacheErrors, "compilation_cache", cacheDirAttr(d.CacheDir))
}

// logEvalCompiles reports the programs an evaluation (or prediction) compiled: what names the
// step ("evaluation", "prediction"), programsBefore and secondsBefore the stepper's
// Compilations() before it ran. One line per evaluation that compiled anything (its first, and
// one whose last, smaller batch has a new shape), with the runtime's counters since the
// previous report.
func (t *Trainer) logEvalCompiles(what string, programsBefore int, secondsBefore float64) {
	n, secs := t.stepper.Compilations()
	if n <= programsBefore {
		return
	}
	attrs := []any{"step", t.state.GlobalStep, "programs", n - programsBefore}
	// Without counters (GoMLX's simplego) it would only repeat the stepper's timing: debug level.
	level := slog.LevelDebug
	if d, ok := t.compiles.since(t.rt); ok {
		attrs = append(attrs, t.compiles.attrs(d)...)
		level = slog.LevelInfo
	}
	t.log.Log(context.Background(), level, "compiled the "+what+" step in "+formatSeconds(secs-secondsBefore)+" s", attrs...)
}
