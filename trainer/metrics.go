package trainer

import (
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"
)

// TrainingFLOPsPerToken estimates the model FLOPs of training one token (forward and backward)
// of a decoder-only transformer with numParams parameters, numLayers layers, model width hidden
// and sequence length seqLen:
//
//	6·N + 12·L·H·T
//
// This is PaLM's model-FLOPs formula (Chowdhery et al. 2022, "PaLM: Scaling Language Modeling
// with Pathways", appendix B: 6N + 12LHQT with H heads of width Q, H·Q = hidden), which
// nanoGPT's estimate_mfu uses too. 6·N is the weight matmuls (2 FLOPs per multiply-add, ×3 for
// forward and backward); 12·L·H·T is the attention score and value matmuls. llm.c's CUDA
// trainer uses 6·L·C·T instead, counting only the causal half of attention; MFU figures from the
// two differ by that term. Following PaLM, N should count the parameters that take part in
// matmuls (a tied embedding does, through the output projection).
func TrainingFLOPsPerToken(numParams, numLayers, hidden, seqLen int) float64 {
	return 6*float64(numParams) + 12*float64(numLayers)*float64(hidden)*float64(seqLen)
}

// EstimatedTotalFLOS is HF's estimate of the FLOPs of training numTokens tokens, which the
// Trainer adds up per batch (Trainer.floating_point_ops → ModuleUtilsMixin.floating_point_ops
// (input_dict, exclude_embeddings=True)) into state.total_flos and the final "total_flos" log:
//
//	6 × numTokens × nonEmbeddingParams
//
// numTokens counts every token of the batch's input_ids, padding included (estimate_tokens is
// numel()), and nonEmbeddingParams excludes nn.Embedding weights (num_parameters
// (exclude_embeddings=True)). The product is exact and rounded once to float64, like Python's
// float() of an int.
func EstimatedTotalFLOS(numTokens, nonEmbeddingParams int64) float64 {
	p := new(big.Int).Mul(big.NewInt(numTokens), big.NewInt(nonEmbeddingParams))
	p.Mul(p, big.NewInt(6))
	f, _ := new(big.Float).SetInt(p).Float64()
	return f
}

// ChipPeak is the peak dense FLOP/s of one accelerator chip at bf16.
type ChipPeak struct {
	Name    string
	FLOPS   float64
	Aliases []string // normalized names (see LookupPeakFLOPS) that mean this chip
}

// PeakFLOPSTable returns the known chips (a fresh copy each call). Figures are the vendors'
// dense bf16 numbers per chip: Cloud TPU system-architecture pages for TPUs, NVIDIA datasheets
// for GPUs (the H100/H200 datasheets' 1,979 TFLOPS assume 2:4 sparsity; dense is half, quoted
// as 989 here). Aliases include the device kinds PJRT reports ("TPU v5 lite" is a v5e,
// "TPU v5" a v5p, "TPU v6 lite" a v6e) and CUDA device names; an H100 PCIe or NVL, which are
// slower, is deliberately not an alias of the H100 SXM.
func PeakFLOPSTable() []ChipPeak {
	return []ChipPeak{
		{"TPU v4", 275e12, []string{"tpu v4", "v4", "tpuv4"}},
		{"TPU v5e", 197e12, []string{"tpu v5e", "v5e", "tpuv5e", "tpu v5 lite", "tpu v5litepod", "v5litepod"}},
		{"TPU v5p", 459e12, []string{"tpu v5p", "v5p", "tpuv5p", "tpu v5"}},
		{"TPU v6e", 918e12, []string{"tpu v6e", "v6e", "tpuv6e", "tpu v6 lite", "trillium"}},
		{"A100", 312e12, []string{"a100", "a100 sxm4 40gb", "a100 sxm4 80gb", "a100 pcie 40gb", "a100 80gb pcie"}},
		{"H100 SXM", 989e12, []string{"h100", "h100 sxm", "h100 sxm5", "h100 80gb hbm3"}},
		{"H200", 989e12, []string{"h200", "h200 sxm", "h200 141gb hbm3e"}},
	}
}

// LookupPeakFLOPS returns the peak dense bf16 FLOP/s of the chip called name: a table name
// ("TPU v5e", "H100 SXM"), a PJRT device kind ("TPU v5 lite") or a CUDA device name ("NVIDIA
// H100 80GB HBM3"). Matching ignores case, a leading "NVIDIA", and the difference between
// spaces, hyphens and underscores; it is exact otherwise, so an unknown variant is reported as
// unknown (false) rather than guessed.
func LookupPeakFLOPS(name string) (float64, bool) {
	n := normalizeChipName(name)
	for _, c := range PeakFLOPSTable() {
		if normalizeChipName(c.Name) == n {
			return c.FLOPS, true
		}
		for _, a := range c.Aliases {
			if a == n {
				return c.FLOPS, true
			}
		}
	}
	return 0, false
}

func normalizeChipName(s string) string {
	s = strings.ToLower(strings.NewReplacer("-", " ", "_", " ").Replace(s))
	s = strings.Join(strings.Fields(s), " ")
	for strings.HasPrefix(s, "nvidia ") { // a loop keeps the normalization idempotent
		s = s[len("nvidia "):]
	}
	return s
}

// ResolvePeakFLOPS returns the per-device peak FLOP/s for MFU: the peak_flops argument when
// positive (a gotpu extra, for chips the table lacks or other precisions), else the table's
// value for deviceKind, else 0 (unknown: no MFU is reported).
func ResolvePeakFLOPS(a *TrainingArguments, deviceKind string) float64 {
	if a != nil && a.PeakFlops > 0 {
		return a.PeakFlops
	}
	f, _ := LookupPeakFLOPS(deviceKind)
	return f
}

// peakFLOPS resolves the per-device peak for MFU from peak_flops, the runtime's kind or its
// devices' descriptions. PJRT plugins describe devices differently (go-xla exposes only the
// debug string, which for libtpu names the core, not the chip generation), so on an
// accelerator without a match it says once that MFU needs --peak_flops instead of guessing.
func (t *Trainer) peakFLOPS() float64 {
	if f := ResolvePeakFLOPS(&t.args, t.rt.Kind()); f > 0 {
		return f
	}
	for _, d := range t.rt.Devices() {
		if f, ok := LookupPeakFLOPS(d.Description); ok {
			return f
		}
	}
	if k := t.rt.Kind(); k != "go" && k != "cpu" {
		desc := ""
		if ds := t.rt.Devices(); len(ds) > 0 {
			desc = ds[0].Description
		}
		t.log.Info("mfu not reported: unknown peak FLOP/s for this device; pass --peak_flops (see trainer.PeakFLOPSTable)",
			"kind", k, "device", desc)
	}
	return 0
}

// MFU is model FLOPs utilization: achieved model FLOP/s (tokensPerSecond × flopsPerToken, over
// all devices) ÷ the devices' peak (numDevices × peakFLOPS). It is 0 when the peak or the
// per-token FLOPs are unknown.
func MFU(tokensPerSecond, flopsPerToken, peakFLOPS float64, numDevices int) float64 {
	if peakFLOPS <= 0 || flopsPerToken <= 0 || numDevices <= 0 {
		return 0
	}
	return tokensPerSecond * flopsPerToken / (peakFLOPS * float64(numDevices))
}

// SpeedMetrics is HF's speed_metrics(split, start_time, num_samples, num_steps, num_tokens):
// "<split>_runtime" in seconds rounded to 4 decimals and, unless runtime is 0,
// "<split>_samples_per_second", "<split>_steps_per_second" and "<split>_tokens_per_second"
// rounded to 3. A negative count is HF's None and leaves its key out.
//
// HF's train() passes the planned numbers, not the counted ones: num_samples = max_steps ×
// total_train_batch_size (or dataset length × num_train_epochs), num_steps = max_steps and,
// with include_tokens_per_second, num_tokens = the tokens of one process's dataloader — so
// train_tokens_per_second is per device while train_samples_per_second is global.
func SpeedMetrics(split string, runtime time.Duration, numSamples, numSteps, numTokens int64) LogEntry {
	secs := runtime.Seconds()
	e := NewLogEntry(JSONMember{split + "_runtime", JSONFloatValue(PyRound(secs, 4))})
	if secs == 0 {
		return e
	}
	for _, m := range []struct {
		key string
		n   int64
	}{{"_samples_per_second", numSamples}, {"_steps_per_second", numSteps}, {"_tokens_per_second", numTokens}} {
		if m.n >= 0 {
			e = e.With(split+m.key, JSONFloatValue(PyRound(float64(m.n)/secs, 3)))
		}
	}
	return e
}

// MeterConfig describes the run a Meter measures.
type MeterConfig struct {
	// FLOPsPerToken is the model FLOPs of training one token (TrainingFLOPsPerToken); 0 means
	// unknown: no mfu.
	FLOPsPerToken float64
	// PeakFLOPS is one device's peak FLOP/s (ResolvePeakFLOPS); 0 means unknown: no mfu.
	PeakFLOPS float64
	// NumDevices is the number of replicas the counted samples and tokens are spread over.
	NumDevices int
	// IncludeTokensPerSecond adds train_tokens_per_second to Summary (HF's
	// include_tokens_per_second).
	IncludeTokensPerSecond bool
}

// Meter accumulates what the training loop reports — updates with their samples, tokens and
// device time, time spent waiting for input, compilations — and turns it into log metrics:
// Interval for each log entry (gotpu's keys), Summary for the end of training (HF's train_*
// speed metrics). Counts are global (all devices together). Rates divide by wall-clock time,
// so waiting for input or compiling lowers them; input_wait_seconds and compile_seconds say by
// how much.
//
// A Meter is safe for concurrent use, so an input pipeline may report its waits from its own
// goroutine.
type Meter struct {
	mu    sync.Mutex
	cfg   MeterConfig
	start time.Time
	run   meterCounts // since start
	ivl   meterCounts // since the last Interval
	last  time.Time   // start of the current interval
}

type meterCounts struct {
	steps, samples, tokens int64
	stepSecs, waitSecs     float64
	compiles               int64
	compileSecs            float64
}

// NewMeter returns a Meter whose run and first interval start at start.
func NewMeter(cfg MeterConfig, start time.Time) *Meter {
	return &Meter{cfg: cfg, start: start, last: start}
}

// AddStep records one optimizer update over samples examples and tokens tokens (all devices)
// that took stepTime on the device.
func (m *Meter) AddStep(samples, tokens int64, stepTime time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range []*meterCounts{&m.run, &m.ivl} {
		c.steps++
		c.samples += samples
		c.tokens += tokens
		c.stepSecs += stepTime.Seconds()
	}
}

// AddInputWait records time the loop spent waiting for the next batch.
func (m *Meter) AddInputWait(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.run.waitSecs += d.Seconds()
	m.ivl.waitSecs += d.Seconds()
}

// AddCompile records one compilation (of a new program shape) that took d.
func (m *Meter) AddCompile(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range []*meterCounts{&m.run, &m.ivl} {
		c.compiles++
		c.compileSecs += d.Seconds()
	}
}

// Interval returns the metrics of the interval since the previous Interval (or the start) and
// starts a new one at now:
//
//	tokens_per_second, samples_per_second  global throughput over the interval's wall time
//	step_seconds                           mean device time per update (a compiling update's
//	                                       compilation included: see compile_seconds)
//	input_wait_seconds                     time spent waiting for input
//	compile_count, compile_seconds         compilations and their time
//	mfu                                    model FLOPs utilization, if FLOPsPerToken and PeakFLOPS are set
//
// Rates and mfu are left out when no wall time has passed, step_seconds when no update
// happened.
func (m *Meter) Interval(now time.Time) LogEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	c, elapsed := m.ivl, now.Sub(m.last).Seconds()
	m.ivl, m.last = meterCounts{}, now
	var out []JSONMember
	tps := float64(c.tokens) / elapsed
	if elapsed > 0 {
		out = append(out,
			JSONMember{"tokens_per_second", JSONFloatValue(tps)},
			JSONMember{"samples_per_second", JSONFloatValue(float64(c.samples) / elapsed)})
	}
	if c.steps > 0 {
		out = append(out, JSONMember{"step_seconds", JSONFloatValue(c.stepSecs / float64(c.steps))})
	}
	out = append(out,
		JSONMember{"input_wait_seconds", JSONFloatValue(c.waitSecs)},
		JSONMember{"compile_count", JSONIntValue(c.compiles)},
		JSONMember{"compile_seconds", JSONFloatValue(c.compileSecs)})
	if elapsed > 0 && m.cfg.FLOPsPerToken > 0 && m.cfg.PeakFLOPS > 0 {
		out = append(out, JSONMember{"mfu", JSONFloatValue(MFU(tps, m.cfg.FLOPsPerToken, m.cfg.PeakFLOPS, max(m.cfg.NumDevices, 1)))})
	}
	return NewLogEntry(out...)
}

// Summary returns HF's end-of-training speed metrics for the run from start to now
// (SpeedMetrics("train", …)) from the counted updates, samples and tokens; with
// IncludeTokensPerSecond, train_tokens_per_second is per device, as HF reports it. (HF uses the
// planned counts; they differ from the counted ones only when a run stops early. Call
// SpeedMetrics with the planned counts to reproduce HF's numbers exactly.)
func (m *Meter) Summary(now time.Time) LogEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	tokens := int64(-1)
	if m.cfg.IncludeTokensPerSecond {
		// Per device, as HF counts one process's dataloader; exact when batches shard evenly.
		tokens = m.run.tokens / int64(max(m.cfg.NumDevices, 1))
	}
	return SpeedMetrics("train", now.Sub(m.start), m.run.samples, m.run.steps, tokens)
}

// GotpuLogKeys lists the keys gotpu adds to training log entries beyond HF's (Meter.Interval's
// and the pipeline's figures). They are kept in log_history and TensorBoard; the console shows
// them only with log_gotpu_metrics (ConsoleLogs).
func GotpuLogKeys() []string {
	return []string{"compile_count", "compile_seconds", "device_idle_fraction", "host_syncs",
		"input_wait_seconds", "mfu", "samples_per_second", "step_seconds", "tokens_per_second"}
}

func isGotpuLogKey(k string) bool { return slices.Contains(GotpuLogKeys(), k) }
