//go:build !noxla

package step

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
	"github.com/gotpu/gotpu/xla/compilecache"
	"github.com/gotpu/gotpu/xla/pjrttest"
)

// Issue #41's question for gotpu's own backend: what does its "compile" (partitioning, fusion and
// buffer planning in Builder.Compile) cost at the start of a run, and is it worth a persistent
// cache as XLA's compile is? The start is measured the same way on every backend, on a small batch
// so that the step itself does not drown the start: GPT-2 124M (testdata/gpt2_124m_config.json,
// HF init, dropout 0), batch 1 × 128 tokens, AdamW, one device.
const (
	startCostBatch, startCostSeq = 1, 128
	// startCostSteadySteps are the steps after the first; the steady step is the fastest of them
	// (a single step on a shared machine is noisy, and the minimum is the execution's own cost).
	startCostSteadySteps = 2
)

// startCostCase is one runtime of BenchmarkStartCost and what it measured.
type startCostCase struct {
	name string
	cfg  xla.Config
	// setupS is xla.Open + models.New + step.New; firstS the first step (trace, compile, first
	// execution); steadyS the fastest later step.
	setupS, firstS, steadyS float64
	// setup, first and steady are the runtime's CompileStats deltas over those phases.
	setup, first, steady xla.CompileStats
	loss                 float64 // the first step's loss: the same model and batch in every case
	skipped              string  // why the case did not run, "" when it did
}

// overhead is what the first step costs beyond a steady one: trace, compile (or cache load),
// and first-execution costs.
func (c *startCostCase) overhead() float64 { return c.firstS - c.steadyS }

// other is the overhead that is neither the backend's compile nor the cache's load: tracing the
// Go model into a graph, lowering it (StableHLO for a plugin), serializing into the cache, and
// first-touch costs of the first execution.
func (c *startCostCase) other() float64 {
	return c.overhead() - c.first.CompileSeconds - c.first.LoadSeconds
}

// BenchmarkStartCost measures the start of a training run on four freshly opened runtimes in one
// process: (1) gotpu's pure-Go backend, (2) XLA's CPU plugin without a compilation cache, (3) the
// plugin with a cold cache directory, and (4) the plugin on a new runtime with the now-warm
// directory. For each it times the first step (trace + compile + first execution) and the steady
// step, and splits the difference (the start overhead) into the backend's compile seconds and the
// cache's load seconds from Runtime.CompileStats, and the rest (trace and other). It reports the
// share of the pure-Go backend's start overhead that its compile is (the most a cache could save
// there) and the warm-cache overhead over the cold one on XLA. Every case builds its model and
// stepper through the same code path, so the program text (whose module name is the Go function's)
// and the cache key are the same in cases 3 and 4; case 4 must hit the cache. Run it with
// -benchtime 1x (each call of the function measures all four once). Without XLA's CPU plugin
// (bash scripts/install-xla-cpu.sh) the XLA cases are skipped and said so; under CI that fails,
// as pjrttest.OpenCPUPlugin does.
func BenchmarkStartCost(b *testing.B) {
	ctx := b.Context()
	cfg := load124m(b)
	batch := fullBatch(rand.New(rand.NewPCG(1, 2)), startCostBatch, startCostSeq, cfg.VocabSize)
	cacheDir := b.TempDir()

	xlaSkip := ""
	if rt, err := xla.Open(ctx, xla.Config{Device: xla.DeviceCPU, NumDevices: 1}); errors.Is(err, xla.ErrPluginNotFound) {
		if pjrttest.InCI() {
			b.Fatalf("CI is set and XLA's CPU PJRT plugin is not installed (scripts/install-xla-cpu.sh): %v", err)
		}
		xlaSkip = "XLA's CPU PJRT plugin is not installed (bash scripts/install-xla-cpu.sh)"
	} else if err != nil {
		b.Fatal(err)
	} else {
		rt.Close()
	}

	plugin := xla.Config{Device: xla.DeviceCPU, NumDevices: 1}
	cached := plugin
	cached.CompilationCache = compilecache.Config{Dir: cacheDir}
	cases := []*startCostCase{
		{name: "go", cfg: xla.Config{Device: xla.DeviceGo}},
		{name: "xla-nocache", cfg: plugin},
		{name: "xla-cold", cfg: cached},
		{name: "xla-warm", cfg: cached},
	}
	for _, c := range cases {
		if c.name != "go" && xlaSkip != "" {
			c.skipped = xlaSkip
			continue
		}
		// Each case starts from a collected heap: the previous runtime's garbage is not this
		// one's start cost.
		runtime.GC()
		if err := measureStartCost(ctx, c, cfg, batch); err != nil {
			b.Fatalf("%s: %v", c.name, err)
		}
	}

	goC, cold, warm := cases[0], cases[2], cases[3]
	if warm.skipped == "" {
		if cold.first.CacheWrites == 0 {
			b.Errorf("xla-cold: the first step wrote no cache entry (%+v)", cold.first)
		}
		if warm.first.CacheHits == 0 {
			b.Fatalf("xla-warm: the first step on the warm cache %s loaded nothing (%+v): the program text or cache key differs between runtimes of one process", cacheDir, warm.first)
		}
		if warm.first.Compiles != 0 {
			b.Errorf("xla-warm: the first step still compiled %d programs (%+v)", warm.first.Compiles, warm.first)
		}
	}
	for _, c := range cases[1:] {
		// The same model (seed 1) and batch: every XLA case must agree with the Go backend on
		// the first loss (float32 on different kernels: a loose tolerance), and a cache-loaded
		// executable with a compiled one.
		if c.skipped == "" && !closeRel(c.loss, goC.loss, 1e-3) {
			b.Errorf("%s: first loss %.6f, go backend's %.6f (rel. tolerance 1e-3)", c.name, c.loss, goC.loss)
		}
	}

	w := os.Stderr
	fmt.Fprintf(w, "\nstart cost: GPT-2 124M, batch %d × seq %d, AdamW, 1 device, %d CPUs (seconds; steady = fastest of %d steps after the first)\n",
		startCostBatch, startCostSeq, runtime.NumCPU(), startCostSteadySteps)
	fmt.Fprintf(w, "%-12s %8s %8s %8s %9s %10s %9s %9s %9s %8s\n",
		"case", "setup", "first", "steady", "overhead", "compile", "load", "trace+oth", "compiles", "hits")
	for _, c := range cases {
		if c.skipped != "" {
			fmt.Fprintf(w, "%-12s skipped: %s\n", c.name, c.skipped)
			b.Logf("%s: skipped: %s", c.name, c.skipped)
			continue
		}
		fmt.Fprintf(w, "%-12s %8.3f %8.3f %8.3f %9.3f %10.4f %9.4f %9.3f %9d %8d\n",
			c.name, c.setupS, c.firstS, c.steadyS, c.overhead(), c.first.CompileSeconds, c.first.LoadSeconds, c.other(), c.first.Compiles, c.first.CacheHits)
		b.Logf("%s: first %.3fs, steady %.3fs, overhead %.3fs = compile %.4fs + load %.4fs + trace and other %.3fs (%d compiles, %d cache hits; setup %.3fs, %d compiles %.4fs in setup)",
			c.name, c.firstS, c.steadyS, c.overhead(), c.first.CompileSeconds, c.first.LoadSeconds, c.other(), c.first.Compiles, c.first.CacheHits,
			c.setupS, c.setup.Compiles, c.setup.CompileSeconds)
		if c.steady.Compiles != 0 || c.steady.CacheHits != 0 {
			fmt.Fprintf(w, "%-12s note: the steady steps compiled %d and loaded %d programs (%.4fs)\n", "", c.steady.Compiles, c.steady.CacheHits, c.steady.CompileSeconds+c.steady.LoadSeconds)
		}
		name := strings.ReplaceAll(c.name, "-", "_")
		b.ReportMetric(c.firstS, name+"-first-s")
		b.ReportMetric(c.steadyS, name+"-steady-s")
		b.ReportMetric(c.overhead(), name+"-overhead-s")
		b.ReportMetric(c.first.CompileSeconds, name+"-compile-s")
		b.ReportMetric(c.first.LoadSeconds, name+"-load-s")
		b.ReportMetric(c.other(), name+"-trace+other-s")
	}

	// What a cache could save on the pure-Go backend: its compile seconds, against its start
	// overhead, its whole first step and one steady step.
	share := goC.first.CompileSeconds / goC.overhead()
	fmt.Fprintf(w, "go backend: compile %.4fs = %.1f%% of its start overhead, %.1f%% of its first step, %.1f%% of a steady step (all compiles incl. setup: %d, %.4fs)\n",
		goC.first.CompileSeconds, 100*share, 100*goC.first.CompileSeconds/goC.firstS, 100*goC.first.CompileSeconds/goC.steadyS,
		goC.setup.Compiles+goC.first.Compiles+goC.steady.Compiles, goC.setup.CompileSeconds+goC.first.CompileSeconds+goC.steady.CompileSeconds)
	b.Logf("go backend compile / overhead = %.3f (compile %.1f%% of a steady step)", share, 100*goC.first.CompileSeconds/goC.steadyS)
	b.ReportMetric(share, "go-compile/overhead")
	if warm.skipped == "" {
		ratio := warm.overhead() / cold.overhead()
		fmt.Fprintf(w, "xla: warm-cache overhead / cold overhead = %.3f (compile %.3fs cold -> %.4fs warm; load %.4fs)\n",
			ratio, cold.first.CompileSeconds, warm.first.CompileSeconds, warm.first.LoadSeconds)
		b.Logf("xla warm-cache overhead / cold overhead = %.3f", ratio)
		b.ReportMetric(ratio, "xla-warm/cold-overhead")
	}
}

// measureStartCost opens c's runtime, builds the model and stepper, and times the first and the
// steady steps, reading the runtime's compile counters around each phase. Every case goes through
// this one function, so the traced programs are the same.
func measureStartCost(ctx context.Context, c *startCostCase, cfg models.Config, batch *data.Batch) error {
	start := time.Now()
	rt, err := xla.Open(ctx, c.cfg)
	if err != nil {
		return err
	}
	defer rt.Close()
	// Without counters the split into compile, load and the rest cannot be made.
	if _, ok := rt.CompileStats(); !ok {
		return fmt.Errorf("runtime %+v keeps no compile counters (Runtime.CompileStats)", rt.Info())
	}
	stats := func() xla.CompileStats { s, _ := rt.CompileStats(); return s }
	s0 := stats()
	st, err := small124mStepper(ctx, rt, cfg, Config{})
	if err != nil {
		return err
	}
	c.setupS = time.Since(start).Seconds()
	s1 := stats()
	c.setup = s1.Sub(s0)

	step := func() (float64, float64, error) {
		t0 := time.Now()
		res, err := st.Step(ctx, [][]*data.Batch{{batch}}, small124mLR)
		return time.Since(t0).Seconds(), res.Loss, err
	}
	var loss float64
	if c.firstS, loss, err = step(); err != nil {
		return fmt.Errorf("first step: %w", err)
	}
	c.loss = loss
	s2 := stats()
	c.first = s2.Sub(s1)
	for i := range startCostSteadySteps {
		d, _, err := step()
		if err != nil {
			return fmt.Errorf("step %d: %w", i+2, err)
		}
		if i == 0 || d < c.steadyS {
			c.steadyS = d
		}
	}
	c.steady = stats().Sub(s2)
	return nil
}

// closeRel reports whether a and b agree within rel of b's magnitude.
func closeRel(a, b, rel float64) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	if b < 0 {
		b = -b
	}
	return d <= rel*b
}
