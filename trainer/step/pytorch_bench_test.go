package step

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/internal/procstat"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/xla"
)

// The benchmark model of issue #7, as testdata/pytorch/bench_train.py builds it.
const (
	benchVocab, benchEmbd, benchLayers, benchHeads = 8192, 256, 4, 4
	benchBatch, benchSeq                           = 8, 128
	benchLR, benchWeightDecay                      = 1e-3, 0.01
)

// torchPython is Debian's interpreter, the one python3-torch installs into; a python3 earlier on
// PATH (a virtualenv, a toolchain's) usually has no torch.
const torchPython = "/usr/bin/python3"

// torchScript is the verbatim copy of ../shared/reference/bench_train.py (testdata/pytorch/SOURCES.md).
var torchScript = filepath.Join("testdata", "pytorch", "bench_train.py")

// torchRefDir holds gpt2_ref.py, which the script imports: the repository's one copy, beside the
// model reference data it also generated.
var torchRefDir = filepath.Join("..", "..", "testdata", "models", "reference")

// BenchmarkVsPyTorch is `make bench`'s comparison of issue #7: AdamW training steps of the
// benchmark GPT-2 (vocab 8192, d 256, 4 layers, 4 heads, batch 8 × seq 128, float32, dropout 0)
// through the trainer's own step (Stepper: the train program, forward, backward and update) on gotpu's CPU
// backend and on simplego, then — when Debian's python3-torch is installed — the PyTorch script
// on the same model as a subprocess, all in one process run, so the ratios compare the same
// machine under the same load. It reports tokens/s of each and the ratios gotpu/simplego and
// gotpu/PyTorch, and the share of the CPUs other processes used during each measurement (the
// machine is shared: a ratio measured while others ran is flagged on stderr).
//
// Each Go backend runs 2 untimed steps (the first traces and compiles) and then
// max(b.N, its minimum) timed steps (20 on gotpu's backend, as many as the script); the script
// runs its own 3 warm-up and 20 timed steps.
func BenchmarkVsPyTorch(b *testing.B) {
	ctx := b.Context()
	threads := runtime.GOMAXPROCS(0)
	type result struct {
		tokensPerS, others float64
	}
	results := map[string]result{}
	// simplego takes several seconds a step at this shape; 3 timed steps keep the run short.
	for _, c := range []struct {
		backend  string
		minSteps int
	}{{xla.GoBackendGotpu, 20}, {xla.GoBackendSimpleGo, 3}} {
		tps, others := benchGoBackend(ctx, b, c.backend, max(b.N, c.minSteps))
		results[c.backend] = result{tps, others}
		fmt.Fprintf(os.Stderr, "%-9s %8.1f tokens/s  (other processes used %.0f%% of the CPUs)\n", c.backend, tps, 100*others)
	}
	gotpu, simple := results[xla.GoBackendGotpu], results[xla.GoBackendSimpleGo]
	worst := max(gotpu.others, simple.others)
	b.ReportMetric(gotpu.tokensPerS, "gotpu-tokens/s")
	b.ReportMetric(simple.tokensPerS, "simplego-tokens/s")
	b.ReportMetric(gotpu.tokensPerS/simple.tokensPerS, "gotpu/simplego")
	summary := fmt.Sprintf("gotpu %.1f tokens/s, simplego %.1f tokens/s, gotpu/simplego %.2fx",
		gotpu.tokensPerS, simple.tokensPerS, gotpu.tokensPerS/simple.tokensPerS)

	if err := exec.CommandContext(ctx, torchPython, "-c", "import torch").Run(); err != nil {
		fmt.Fprintf(os.Stderr, "PyTorch: skipped (%s -c 'import torch': %v; apt-get install -y python3-torch python3-numpy libopenblas0-openmp)\n", torchPython, err)
	} else {
		torch, others, err := runTorchBench(ctx, threads)
		if err != nil {
			b.Fatal(err)
		}
		fmt.Fprintf(os.Stderr, "%-9s %8.1f tokens/s  (other processes used %.0f%% of the CPUs)\n", "pytorch", torch, 100*others)
		b.ReportMetric(torch, "pytorch-tokens/s")
		b.ReportMetric(gotpu.tokensPerS/torch, "gotpu/pytorch")
		summary += fmt.Sprintf(", PyTorch %.1f tokens/s, gotpu/PyTorch %.2fx", torch, gotpu.tokensPerS/torch)
		worst = max(worst, others)
	}
	b.ReportMetric(100*worst, "max-others-%")
	fmt.Fprintln(os.Stderr, summary)
	if worst > 0.05 {
		fmt.Fprintf(os.Stderr, "WARNING: other processes used up to %.0f%% of the CPUs during the measurements; the ratios are unreliable\n", 100*worst)
	}
}

// benchGoBackend trains the benchmark model on one pure-Go backend and returns tokens/s over the
// timed steps and the share of the machine other processes used meanwhile.
func benchGoBackend(ctx context.Context, b *testing.B, backend string, steps int) (tokensPerS, others float64) {
	b.Helper()
	rt, err := xla.Open(ctx, xla.Config{Device: xla.DeviceGo, GoBackend: backend})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	cfg := gpt2.DefaultConfig()
	cfg.VocabSize, cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = benchVocab, benchEmbd, benchLayers, benchHeads, benchSeq
	cfg.ResidPdrop, cfg.EmbdPdrop, cfg.AttnPdrop = 0, 0, 0
	m, err := models.New(ctx, rt, cfg, models.NewOptions{Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	opt := DefaultAdamW()
	// As the PyTorch script: HF's decay groups, and no gradient clipping.
	opt.WeightDecay, opt.MaxGradNorm = benchWeightDecay, 0
	s, err := New(rt, m, Config{Optimizer: opt, NumReplicas: 1})
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	batches := make([]*data.Batch, 4) // a few batches, as the script draws a fresh one per step
	for i := range batches {
		batches[i] = fullBatch(rng, benchBatch, benchSeq, benchVocab)
	}
	step := func(i int) {
		res, err := s.Step(ctx, [][]*data.Batch{{batches[i%len(batches)]}}, benchLR)
		if err != nil {
			b.Fatalf("%s: step %d: %v", backend, i, err)
		}
		if res.Skipped {
			b.Fatalf("%s: step %d skipped: non-finite gradients (loss %g)", backend, i, res.Loss)
		}
	}
	for i := range 2 {
		step(i)
	}
	// The machine's busy CPU time less this process's, over wall time × CPUs: the measure the
	// PyTorch script reports (/proc/stat and os.times()), so the numbers compare.
	mon := procstat.StartCPUMonitor()
	start := time.Now()
	for i := range steps {
		step(i)
	}
	elapsed := time.Since(start)
	return float64(benchBatch*benchSeq*steps) / elapsed.Seconds(), mon.Others()
}

// fullBatch is size random sequences with no padding, each its own labels (the model shifts
// them), as the script trains.
func fullBatch(rng *rand.Rand, size, seq, vocab int) *data.Batch {
	n := size * seq
	b := &data.Batch{Size: size, SeqLen: seq, InputIDs: make([]int32, n), AttentionMask: make([]int32, n), Labels: make([]int32, n)}
	for i := range n {
		id := int32(rng.IntN(vocab))
		b.InputIDs[i], b.AttentionMask[i], b.Labels[i] = id, 1, id
	}
	return b
}

// runTorchBench runs the PyTorch script with the same number of threads and returns its
// tokens_per_s and the share of the CPUs other processes used during its timed steps, both
// parsed from its output (its last line, and its "machine load" line).
func runTorchBench(ctx context.Context, threads int) (tokensPerS, others float64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, torchPython, torchScript, "--threads", strconv.Itoa(threads))
	cmd.Env = append(os.Environ(), "PYTHONPATH="+torchRefDir)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("%s %s: %w\n%s%s", torchPython, torchScript, err, out, stderr.String())
	}
	tokensPerS, others = -1, -1
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "tokens_per_s="); ok {
			if tokensPerS, err = strconv.ParseFloat(v, 64); err != nil {
				return 0, 0, fmt.Errorf("%s: tokens_per_s line %q: %w", torchScript, line, err)
			}
		}
		// "machine load during timed steps: other processes 1.2% of 2 CPUs, steal 0.0%"
		if v, ok := strings.CutPrefix(line, "machine load during timed steps: other processes "); ok {
			pct, _, _ := strings.Cut(v, "%")
			if others, err = strconv.ParseFloat(pct, 64); err != nil {
				return 0, 0, fmt.Errorf("%s: machine load line %q: %w", torchScript, line, err)
			}
			others /= 100
		}
	}
	if tokensPerS <= 0 || others < 0 {
		return 0, 0, fmt.Errorf("%s printed no tokens_per_s or machine load line:\n%s", torchScript, out)
	}
	return tokensPerS, others, nil
}
