//go:build !noxla

package step

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/internal/procstat"
	"github.com/gotpu/gotpu/xla"
)

// Issue #37's comparison, "benchmark against the same compiler": the GPT-2 124M training step of
// BenchmarkGPT2Small (testdata/gpt2_124m_config.json, HF init, dropout 0, batch 2 × seq 512,
// AdamW with HF's decay groups, lr 1e-4, weight decay 0.01, clipping 1.0, float32) compiled by XLA
// for the CPU twice — once as gotpu builds it, through XLA's CPU PJRT plugin (`--device cpu`, one
// device), once as JAX builds it (testdata/jax/bench_jax_gpt2.py on jax/jaxlib 0.8.1, the release
// nearest the plugin's XLA) — and on gotpu's own pure-Go backend (`--device go`). Each run is its
// own process, so each peak RSS is that run's own; every run trains on the same fixed batch
// (written to a file the children read), so the loss trajectories can be compared.
const (
	// jaxChildEnv selects the gotpu run TestXLACPUVsJAXChild performs in a child process:
	// "xla|go,WARMUP,STEPS,TOKENFILE".
	jaxChildEnv = "GOTPU_BENCHJAX_CHILD"
	// jaxWarmup is the untimed steps of every run, the first (trace and compile) included.
	jaxWarmup = 2
	// jaxGoal is issue #37's goal: gotpu on XLA at least this fraction of JAX on XLA's tokens/s.
	jaxGoal = 0.95
)

var jaxScript = filepath.Join("testdata", "jax", "bench_jax_gpt2.py")

// jaxVenv is the virtualenv scripts/setup-jax-bench.sh makes (GOTPU_JAX_VENV, else
// ${XDG_CACHE_HOME:-~/.cache}/gotpu/jax-venv).
func jaxVenv() string {
	if v := os.Getenv("GOTPU_JAX_VENV"); v != "" {
		return v
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "gotpu", "jax-venv")
}

// jaxRun is one child's result: run124m's figures and the first step's seconds (trace, compile
// and run), and for JAX its ahead-of-time trace and compile seconds.
type jaxRun struct {
	run124m
	firstS, traceS, compileS float64
	// cpuS is the process's CPU seconds (user + system, all threads) per timed step: less
	// sensitive than wall time to other processes on a shared machine.
	cpuS float64
	// faults is the process's minor page faults per timed step: buffers allocated anew each
	// step (outputs not aliased to donated inputs) are touched for the first time.
	faults float64
}

// BenchmarkXLACPUVsJAX is `make bench`'s issue-#37 comparison. It runs rounds
// (GOTPU_BENCH_ROUNDS, default 3) of three child processes — gotpu on XLA's CPU plugin (1 device,
// float32), gotpu on its pure-Go backend, JAX on its CPU backend — and reports the median of each
// figure over the rounds: ms/step (each run's median step), tokens/s, CPU seconds and minor page
// faults per step (the CPU seconds are the figure least moved by other processes on a shared
// machine; the faults show buffers allocated anew every step), the first step's seconds (trace +
// compile + first run; JAX's ahead-of-time trace and compile too), peak RSS, and the same-run
// ratios gotpu-xla/jax-xla and gotpu-go/jax-xla of tokens/s against the goal of 0.95.
// Each run trains jaxWarmup untimed steps and 3 timed ones; the first round's runs train
// GOTPU_BENCH_LOSS_STEPS steps in all (default 10) on the same batch, and their loss
// trajectories are printed side by side: at random init the first loss must be about ln(vocab)
// and the loss must fall in every run. GOTPU_BENCH_HLO_DIR=DIR also dumps the XLA-optimized HLO
// of both XLA runs' programs (XLA_FLAGS=--xla_dump_to, which the CPU plugin honours too) under
// DIR/gotpu-xla and DIR/jax-xla. Without the JAX venv (bash scripts/setup-jax-bench.sh) or the
// CPU plugin (bash scripts/install-xla-cpu.sh) the benchmark skips and says so.
func BenchmarkXLACPUVsJAX(b *testing.B) {
	ctx := b.Context()
	python := filepath.Join(jaxVenv(), "bin", "python")
	if err := exec.CommandContext(ctx, python, "-c", "import jax").Run(); err != nil {
		b.Skipf("JAX comparison skipped: %s -c 'import jax': %v; run bash scripts/setup-jax-bench.sh (a venv with jax/jaxlib 0.8.1 from PyPI) first", python, err)
	}
	if rt, err := xla.Open(ctx, xla.Config{Device: xla.DeviceCPU, NumDevices: 1}); errors.Is(err, xla.ErrPluginNotFound) {
		b.Skipf("JAX comparison skipped: XLA's CPU PJRT plugin is not installed (bash scripts/install-xla-cpu.sh): %v", err)
	} else if err != nil {
		b.Fatal(err)
	} else {
		rt.Close()
	}
	cfg := load124m(b)
	rounds := 3
	if v, err := strconv.Atoi(os.Getenv("GOTPU_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	lossSteps := 10
	if v, err := strconv.Atoi(os.Getenv("GOTPU_BENCH_LOSS_STEPS")); err == nil && v > jaxWarmup {
		lossSteps = v
	}
	hloDir := os.Getenv("GOTPU_BENCH_HLO_DIR")

	// The one batch every step of every run trains on: random tokens, labels = inputs.
	tokens := filepath.Join(b.TempDir(), "tokens.i32")
	batch := fullBatch(rand.New(rand.NewPCG(1, 2)), small124mBatch, small124mSeq, cfg.VocabSize)
	raw := make([]byte, 4*len(batch.InputIDs))
	for i, id := range batch.InputIDs {
		binary.LittleEndian.PutUint32(raw[4*i:], uint32(id))
	}
	if err := os.WriteFile(tokens, raw, 0o644); err != nil {
		b.Fatal(err)
	}

	modes := []string{"gotpu-xla", "jax-xla", "gotpu-go"}
	runs := map[string][]jaxRun{}
	for r := range rounds {
		steps := 3
		if r == 0 {
			steps = lossSteps - jaxWarmup
		}
		for _, mode := range modes {
			dump := ""
			if hloDir != "" && r == 0 && mode != "gotpu-go" {
				dump = filepath.Join(hloDir, mode)
			}
			var res jaxRun
			var err error
			if mode == "jax-xla" {
				res, err = runJAX(ctx, python, steps, tokens, dump)
			} else {
				res, err = runGotpuJAXChild(ctx, strings.TrimPrefix(mode, "gotpu-"), steps, tokens, dump)
			}
			if err != nil {
				b.Fatalf("%s, round %d: %v", mode, r+1, err)
			}
			fmt.Fprintf(os.Stderr, "round %d %-9s %8.0f ms/step %7.1f tokens/s %6.1f CPU s/step  first step %6.1f s  peak RSS %6.0f MiB  (others %.0f%%)  steps %s ms\n",
				r+1, mode, res.msPerStep, res.tokensPerS, res.cpuS, res.firstS, res.rssMiB, res.othersPct, res.stepMS)
			runs[mode] = append(runs[mode], res)
		}
	}

	med := func(mode string, f func(jaxRun) float64) float64 {
		var v []float64
		for _, r := range runs[mode] {
			v = append(v, f(r))
		}
		slices.Sort(v)
		if n := len(v); n%2 == 0 {
			return (v[n/2-1] + v[n/2]) / 2 // an even count (GOTPU_BENCH_ROUNDS=2): the middle two
		}
		return v[len(v)/2]
	}
	ms := func(r jaxRun) float64 { return r.msPerStep }
	tps := func(r jaxRun) float64 { return r.tokensPerS }
	rss := func(r jaxRun) float64 { return r.rssMiB }
	first := func(r jaxRun) float64 { return r.firstS }
	others := func(r jaxRun) float64 { return r.othersPct }
	cpu := func(r jaxRun) float64 { return r.cpuS }
	fmt.Fprintf(os.Stderr, "\nGPT-2 124M, batch %d × seq %d, AdamW, float32, %d CPUs; medians of %d rounds (ms/step: each run's median step)\n",
		small124mBatch, small124mSeq, runtime.NumCPU(), rounds)
	fmt.Fprintf(os.Stderr, "%-9s %9s %9s %10s %12s %14s %14s %9s %7s\n", "run", "ms/step", "tokens/s", "CPU s/step", "faults/step", "first step s", "compile s", "RSS MiB", "others")
	for _, mode := range modes {
		compile := "-"
		if mode == "jax-xla" {
			compile = fmt.Sprintf("%.1f+%.1f", med(mode, func(r jaxRun) float64 { return r.traceS }), med(mode, func(r jaxRun) float64 { return r.compileS }))
		} else {
			// The first step less a steady one: trace + compile (+ first-run overheads).
			compile = fmt.Sprintf("~%.1f", med(mode, func(r jaxRun) float64 { return r.firstS - r.msPerStep/1000 }))
		}
		fmt.Fprintf(os.Stderr, "%-9s %9.0f %9.1f %10.1f %12.0f %14.1f %14s %9.0f %6.0f%%\n", mode, med(mode, ms), med(mode, tps), med(mode, cpu), med(mode, func(r jaxRun) float64 { return r.faults }), med(mode, first), compile, med(mode, rss), med(mode, others))
		name := strings.ReplaceAll(mode, "-", "_")
		b.ReportMetric(med(mode, ms), name+"-ms/step")
		b.ReportMetric(med(mode, first), name+"-first-step-s")
		b.ReportMetric(med(mode, rss), name+"-RSS-MiB")
	}
	fmt.Fprintf(os.Stderr, "gotpu-xla/jax-xla   %.2fx CPU seconds per step (the inverse of a speed ratio; less sensitive to other processes)\n", med("gotpu-xla", cpu)/med("jax-xla", cpu))
	fmt.Fprintf(os.Stderr, "(compile s: jax-xla is its ahead-of-time trace+compile; gotpu's is the first step less a steady step)\n")
	for _, c := range []struct{ num, den string }{{"gotpu-xla", "jax-xla"}, {"gotpu-go", "jax-xla"}, {"gotpu-go", "gotpu-xla"}} {
		ratio := med(c.num, tps) / med(c.den, tps)
		var each []string
		for i := range runs[c.num] {
			each = append(each, fmt.Sprintf("%.2f", runs[c.num][i].tokensPerS/runs[c.den][i].tokensPerS))
		}
		goal := ""
		if c.num == "gotpu-xla" {
			goal = fmt.Sprintf("  (goal >= %.2fx: %s)", jaxGoal, map[bool]string{true: "met", false: "NOT met"}[ratio >= jaxGoal])
		}
		fmt.Fprintf(os.Stderr, "%-19s %.2fx tokens/s (rounds: %s)%s\n", c.num+"/"+c.den, ratio, strings.Join(each, " "), goal)
		b.ReportMetric(ratio, c.num+"/"+c.den)
	}
	for _, m := range []string{"gotpu-xla", "gotpu-go"} {
		ratio := med(m, rss) / med("jax-xla", rss)
		fmt.Fprintf(os.Stderr, "%-19s %.2fx peak RSS of jax-xla\n", m, ratio)
		b.ReportMetric(ratio, m+"-RSS/jax-xla")
	}
	for _, m := range []string{"gotpu-xla", "gotpu-go"} {
		ratio := med(m, first) / med("jax-xla", first)
		fmt.Fprintf(os.Stderr, "%-19s %.2fx first-step seconds of jax-xla\n", m, ratio)
	}

	// The loss trajectories of the first round, on the same batch (different random inits).
	fmt.Fprintf(os.Stderr, "\nloss on the same batch, round 1 (ln(vocab) = %.3f)\n%-5s", math.Log(float64(cfg.VocabSize)), "step")
	for _, mode := range modes {
		fmt.Fprintf(os.Stderr, " %10s", mode)
	}
	fmt.Fprintln(os.Stderr)
	for i := range lossSteps {
		fmt.Fprintf(os.Stderr, "%-5d", i+1)
		for _, mode := range modes {
			fmt.Fprintf(os.Stderr, " %10.4f", runs[mode][0].losses[i])
		}
		fmt.Fprintln(os.Stderr)
	}
	for _, mode := range modes {
		l := runs[mode][0].losses
		if d := math.Abs(l[0] - math.Log(float64(cfg.VocabSize))); d > 0.5 {
			b.Errorf("%s: first loss %.4f is %.2f from ln(vocab) = %.4f at random init", mode, l[0], d, math.Log(float64(cfg.VocabSize)))
		}
		if !(l[len(l)-1] < l[0]-0.5) {
			b.Errorf("%s: loss %.4f after %d steps on one batch did not fall from %.4f by 0.5", mode, l[len(l)-1], len(l), l[0])
		}
		b.ReportMetric(l[len(l)-1], strings.ReplaceAll(mode, "-", "_")+"-loss-last")
	}
}

// runJAX runs bench_jax_gpt2.py in the venv's python for jaxWarmup untimed and steps timed steps.
func runJAX(ctx context.Context, python string, steps int, tokens, dump string) (jaxRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	args := []string{jaxScript, "--config", small124mConfig, "--batch", strconv.Itoa(small124mBatch), "--seq", strconv.Itoa(small124mSeq),
		"--warmup", strconv.Itoa(jaxWarmup), "--steps", strconv.Itoa(steps), "--lr", fmt.Sprint(small124mLR),
		"--weight-decay", fmt.Sprint(small124mDecay), "--tokens", tokens}
	if dump != "" {
		args = append(args, "--dump-hlo", dump)
	}
	cmd := exec.CommandContext(ctx, python, args...)
	cmd.Env = withDumpFlags(os.Environ(), dump)
	return runJAXChild(cmd)
}

// runGotpuJAXChild runs TestXLACPUVsJAXChild in a child process of this test binary.
func runGotpuJAXChild(ctx context.Context, device string, steps int, tokens, dump string) (jaxRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestXLACPUVsJAXChild$", "-test.count", "1")
	cmd.Env = append(withDumpFlags(os.Environ(), dump), fmt.Sprintf("%s=%s,%d,%d,%s", jaxChildEnv, device, jaxWarmup, steps, tokens))
	return runJAXChild(cmd)
}

// withDumpFlags adds XLA's HLO dump flags to XLA_FLAGS when dump is set.
func withDumpFlags(env []string, dump string) []string {
	if dump == "" {
		return env
	}
	flags := "--xla_dump_to=" + dump + " --xla_dump_hlo_as_text"
	if old := os.Getenv("XLA_FLAGS"); old != "" {
		flags = old + " " + flags
	}
	return append(env, "XLA_FLAGS="+flags)
}

// runJAXChild runs cmd and parses its key=value lines: run124m's (as runChild124m does) and the
// first step's, trace and compile seconds.
func runJAXChild(cmd *exec.Cmd) (jaxRun, error) {
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return jaxRun{}, fmt.Errorf("%s: %w\n%s%s", strings.Join(cmd.Args, " "), err, out, stderr.String())
	}
	r := jaxRun{run124m: run124m{msPerStep: -1, tokensPerS: -1, rssMiB: -1, othersPct: -1}, firstS: -1}
	fields := map[string]*float64{"ms_per_step": &r.msPerStep, "tokens_per_s": &r.tokensPerS, "peak_rss_mib": &r.rssMiB,
		"others_pct": &r.othersPct, "first_step_s": &r.firstS, "trace_s": &r.traceS, "compile_s": &r.compileS, "cpu_s_per_step": &r.cpuS, "minflt_per_step": &r.faults}
	for _, line := range strings.Split(string(out), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.Contains(k, " ") {
			continue
		}
		if k == "step_ms" {
			r.stepMS = v
			continue
		}
		dst, known := fields[k]
		if !known && !strings.HasPrefix(k, "loss_") {
			continue
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			continue // a banner line such as "jax=0.8.1 jaxlib=..."
		}
		if known {
			*dst = f
		} else {
			r.losses = append(r.losses, f)
		}
	}
	if r.msPerStep <= 0 || r.tokensPerS <= 0 || r.rssMiB <= 0 || r.othersPct < 0 || r.firstS <= 0 || len(r.losses) == 0 {
		return jaxRun{}, fmt.Errorf("%s printed no complete result:\n%s%s", cmd.Args[0], out, stderr.String())
	}
	return r, nil
}

// TestXLACPUVsJAXChild is one gotpu run of BenchmarkXLACPUVsJAX, in its own process; it is skipped
// unless the benchmark started it (jaxChildEnv = "xla|go,WARMUP,STEPS,TOKENFILE"). On "xla" it
// opens XLA's CPU PJRT plugin with one device, on "go" gotpu's pure-Go backend; it builds the
// 124M model (HF init, seed 1), trains WARMUP untimed steps (the first traces and compiles) and
// STEPS timed ones on the batch in TOKENFILE, reading each step's loss, and prints
// bench_jax_gpt2.py's lines.
func TestXLACPUVsJAXChild(t *testing.T) {
	spec := os.Getenv(jaxChildEnv)
	if spec == "" {
		t.Skip("run by BenchmarkXLACPUVsJAX in a child process")
	}
	f := strings.SplitN(spec, ",", 4)
	if len(f) != 4 {
		t.Fatalf("%s=%q: want xla|go,WARMUP,STEPS,TOKENFILE", jaxChildEnv, spec)
	}
	warmup, err1 := strconv.Atoi(f[1])
	steps, err2 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2); err != nil || warmup < 1 || steps < 1 || f[0] != "xla" && f[0] != "go" {
		t.Fatalf("%s=%q: want xla|go,WARMUP,STEPS,TOKENFILE: %v", jaxChildEnv, spec, err)
	}
	raw, err := os.ReadFile(f[3])
	if err != nil {
		t.Fatal(err)
	}
	cfg := load124m(t)
	n := small124mBatch * small124mSeq
	if len(raw) != 4*n {
		t.Fatalf("%s: %d bytes, want %d int32", f[3], len(raw), n)
	}
	batch := &data.Batch{Size: small124mBatch, SeqLen: small124mSeq, InputIDs: make([]int32, n), AttentionMask: make([]int32, n), Labels: make([]int32, n)}
	for i := range n {
		id := int32(binary.LittleEndian.Uint32(raw[4*i:]))
		batch.InputIDs[i], batch.AttentionMask[i], batch.Labels[i] = id, 1, id
	}

	ctx := t.Context()
	xc := xla.Config{Device: xla.DeviceGo}
	if f[0] == "xla" {
		xc = xla.Config{Device: xla.DeviceCPU, NumDevices: 1}
	}
	start := time.Now()
	rt, err := xla.Open(ctx, xc)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	s, err := small124mStepper(ctx, rt, cfg, Config{})
	if err != nil {
		t.Fatal(err)
	}
	setup := time.Since(start)
	var losses []float64
	step := func() {
		res, err := s.Step(ctx, [][]*data.Batch{{batch}}, small124mLR)
		if err != nil {
			t.Fatalf("step %d: %v", len(losses)+1, err)
		}
		losses = append(losses, res.Loss)
	}
	t0 := time.Now()
	step()
	firstS := time.Since(t0).Seconds()
	for range warmup - 1 {
		step()
	}
	mon := procstat.StartCPUMonitor()
	cpu0, _ := procstat.OwnCPUSeconds()
	flt0 := minorFaults()
	var times []float64
	for range steps {
		t0 := time.Now()
		step()
		times = append(times, time.Since(t0).Seconds())
	}
	others := mon.Others()
	cpu1, _ := procstat.OwnCPUSeconds()
	flt1 := minorFaults()
	each := make([]string, len(times))
	var sum float64
	for i, x := range times {
		each[i] = fmt.Sprintf("%.0f", 1000*x)
		sum += x
	}
	slices.Sort(times)
	medS := times[len(times)/2]
	fmt.Printf("device=%s/%s setup_s=%.3f\n", rt.Kind(), rt.GoBackend(), setup.Seconds())
	fmt.Printf("first_step_s=%.3f\n", firstS)
	fmt.Printf("step_ms=%s\n", strings.Join(each, ","))
	for i, l := range losses {
		fmt.Printf("loss_%d=%.6f\n", i+1, l)
	}
	fmt.Printf("others_pct=%.1f\n", 100*others)
	fmt.Printf("cpu_s_per_step=%.2f\n", (cpu1-cpu0)/float64(steps))
	fmt.Printf("minflt_per_step=%.0f\n", float64(flt1-flt0)/float64(steps))
	fmt.Printf("peak_rss_mib=%.1f\n", float64(procstat.PeakRSS())/(1<<20))
	fmt.Printf("mean_ms_per_step=%.1f\n", 1000*sum/float64(steps))
	fmt.Printf("ms_per_step=%.1f\n", 1000*medS)
	fmt.Printf("tokens_per_s=%.1f\n", float64(n)/medS)
}

// minorFaults is this process's minor page faults so far (getrusage).
func minorFaults() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Minflt
}
