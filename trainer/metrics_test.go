package trainer

import (
	"math"
	"sync"
	"testing"
	"time"
)

func TestTrainingFLOPsPerToken(t *testing.T) {
	// 6·N + 12·L·H·T
	if got := TrainingFLOPsPerToken(100, 2, 8, 16); got != 600+12*2*8*16 {
		t.Errorf("got %v", got)
	}
	// GPT-2 small as nanoGPT counts it (N = 123.65M without position embeddings, L 12, H·Q 768,
	// T 1024): 6N ≈ 741.9 MFLOP plus 12·12·768·1024 ≈ 113.2 MFLOP per token.
	got := TrainingFLOPsPerToken(123_653_376, 12, 768, 1024)
	if want := 6*123_653_376.0 + 113_246_208; got != want {
		t.Errorf("GPT-2: %v, want %v", got, want)
	}
}

func TestEstimatedTotalFLOS(t *testing.T) {
	for _, c := range []struct {
		tokens, params int64
		want           float64
	}{
		{1000, 1_000_000, 6e9},
		{0, 1_000_000, 0},
		// Beyond int64: 1.8e20, still the nearest double.
		{3_000_000_000, 10_000_000_000, 1.8e20},
		// Exact product, rounded once: 6·(2^53+1) = 3·2^54 + 6 rounds to 3·2^54 + 8, where
		// float arithmetic would first round 2^53+1 to 2^53 and give 3·2^54.
		{1<<53 + 1, 1, 3*(1<<54) + 8},
	} {
		if got := EstimatedTotalFLOS(c.tokens, c.params); got != c.want {
			t.Errorf("EstimatedTotalFLOS(%d, %d) = %v, want %v", c.tokens, c.params, got, c.want)
		}
	}
}

func TestLookupPeakFLOPS(t *testing.T) {
	for name, want := range map[string]float64{
		"TPU v4": 275e12, "v4": 275e12,
		"TPU v5e": 197e12, "TPU v5 lite": 197e12, "tpu_v5_lite": 197e12, "v5litepod": 197e12,
		"TPU v5p": 459e12, "TPU v5": 459e12,
		"TPU v6e": 918e12, "TPU v6 lite": 918e12, "Trillium": 918e12,
		"H100 SXM": 989e12, "NVIDIA H100 80GB HBM3": 989e12, "h100-sxm": 989e12,
		"H200": 989e12, "NVIDIA H200": 989e12,
		"NVIDIA A100-SXM4-80GB": 312e12,
	} {
		if got, ok := LookupPeakFLOPS(name); !ok || got != want {
			t.Errorf("LookupPeakFLOPS(%q) = %v, %v; want %v", name, got, ok, want)
		}
	}
	// Slower variants and unknown chips are not guessed.
	for _, name := range []string{"NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "TPU v3", "cpu", "", "TPU v5 lite extra"} {
		if got, ok := LookupPeakFLOPS(name); ok {
			t.Errorf("LookupPeakFLOPS(%q) = %v, want unknown", name, got)
		}
	}
}

func TestPeakFLOPSTableConsistent(t *testing.T) {
	seen := map[string]string{}
	tbl := PeakFLOPSTable()
	for _, c := range tbl {
		for _, n := range append([]string{normalizeChipName(c.Name)}, c.Aliases...) {
			if normalizeChipName(n) != n {
				t.Errorf("%s: alias %q is not normalized", c.Name, n)
			}
			if prev, dup := seen[n]; dup && prev != c.Name {
				t.Errorf("alias %q means both %s and %s", n, prev, c.Name)
			}
			seen[n] = c.Name
		}
	}
	tbl[0].FLOPS = 1 // a copy: the package's table is unaffected
	if f, _ := LookupPeakFLOPS(tbl[0].Name); f == 1 {
		t.Error("PeakFLOPSTable returned shared storage")
	}
}

func TestResolvePeakFLOPS(t *testing.T) {
	a := DefaultTrainingArguments()
	if got := ResolvePeakFLOPS(&a, "TPU v5 lite"); got != 197e12 {
		t.Errorf("table: %v", got)
	}
	a.PeakFlops = 123e12
	if got := ResolvePeakFLOPS(&a, "TPU v5 lite"); got != 123e12 {
		t.Errorf("peak_flops override: %v", got)
	}
	if got := ResolvePeakFLOPS(nil, "mystery"); got != 0 {
		t.Errorf("unknown: %v", got)
	}
}

func TestMFU(t *testing.T) {
	// 1000 tok/s × 1e9 FLOP/tok = 1e12 FLOP/s over 4 chips of 1e12 peak: 25%.
	if got := MFU(1000, 1e9, 1e12, 4); got != 0.25 {
		t.Errorf("MFU = %v", got)
	}
	if MFU(1000, 1e9, 0, 4) != 0 || MFU(1000, 0, 1e12, 4) != 0 || MFU(1000, 1e9, 1e12, 0) != 0 {
		t.Error("MFU with an unknown input must be 0")
	}
}

// Expected values from Python: round(12.34567, 4), round(1000/12.34567, 3), round(100/12.34567, 3),
// round(5e6/12.34567, 3).
func TestSpeedMetrics(t *testing.T) {
	rt := 12345670 * time.Microsecond
	e := SpeedMetrics("train", rt, 1000, 100, 5_000_000)
	want := []struct {
		k string
		v float64
	}{{"train_runtime", 12.3457}, {"train_samples_per_second", 81.0}, {"train_steps_per_second", 8.1}, {"train_tokens_per_second", 405000.296}}
	if e.Len() != len(want) {
		t.Fatalf("keys %v", e.Keys())
	}
	for i, w := range want {
		if got, _ := e.Float(w.k); e.Keys()[i] != w.k || got != w.v {
			t.Errorf("%s = %v (position %d), want %v", w.k, got, i, w.v)
		}
	}
	e = SpeedMetrics("eval", rt, 10, -1, -1)
	if keys := e.Keys(); len(keys) != 2 || keys[1] != "eval_samples_per_second" {
		t.Errorf("None counts: keys %v", keys)
	}
	if keys := SpeedMetrics("train", 0, 1, 1, 1).Keys(); len(keys) != 1 || keys[0] != "train_runtime" {
		t.Errorf("zero runtime: keys %v", keys)
	}
}

func TestMeterIntervalAndSummary(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	m := NewMeter(MeterConfig{FLOPsPerToken: 1e9, PeakFLOPS: 1e12, NumDevices: 2, IncludeTokensPerSecond: true}, t0)
	m.AddCompile(2 * time.Second)
	m.AddInputWait(500 * time.Millisecond)
	for range 10 {
		m.AddStep(8, 8*128, 100*time.Millisecond)
	}
	e := m.Interval(t0.Add(4 * time.Second))
	wantKeys := []string{"tokens_per_second", "samples_per_second", "step_seconds", "input_wait_seconds", "compile_count", "compile_seconds", "mfu"}
	if !equalStrings(e.Keys(), wantKeys) {
		t.Fatalf("keys %v, want %v", e.Keys(), wantKeys)
	}
	for k, want := range map[string]float64{
		"tokens_per_second": 10240.0 / 4, "samples_per_second": 20, "step_seconds": 0.1,
		"input_wait_seconds": 0.5, "compile_seconds": 2,
		"mfu": 2560 * 1e9 / (2 * 1e12), // 1.28: more than the peak, as a bogus config would show
	} {
		if got, _ := e.Float(k); math.Abs(got-want) > 1e-12*math.Max(1, want) {
			t.Errorf("%s = %v, want %v", k, got, want)
		}
	}
	if v, _ := e.Get("compile_count"); v.Kind() != JSONInt {
		t.Errorf("compile_count is a %v, want an int", v.Kind())
	} else if n, _ := v.Int(); n != 1 {
		t.Errorf("compile_count = %d", n)
	}
	// The next interval starts empty.
	e = m.Interval(t0.Add(6 * time.Second))
	if _, has := e.Get("step_seconds"); has {
		t.Error("step_seconds without steps")
	}
	if v, _ := e.Float("tokens_per_second"); v != 0 {
		t.Errorf("tokens_per_second = %v in an idle interval", v)
	}
	if v, _ := e.Int("compile_count"); v != 0 {
		t.Errorf("compile_count not reset: %d", v)
	}
	// No time passed: no rates, no mfu.
	e = m.Interval(t0.Add(6 * time.Second))
	if _, has := e.Get("tokens_per_second"); has {
		t.Error("rate over zero time")
	}
	if _, has := e.Get("mfu"); has {
		t.Error("mfu over zero time")
	}
	s := m.Summary(t0.Add(10 * time.Second))
	for k, want := range map[string]float64{
		"train_runtime": 10, "train_samples_per_second": 8, "train_steps_per_second": 1,
		"train_tokens_per_second": 10240.0 / 2 / 10, // per device, as HF reports it
	} {
		if got, _ := s.Float(k); got != want {
			t.Errorf("summary %s = %v, want %v", k, got, want)
		}
	}
	// Without a peak there is no mfu; without include_tokens_per_second no token rate.
	m = NewMeter(MeterConfig{FLOPsPerToken: 1e9}, t0)
	m.AddStep(1, 1, time.Second)
	if _, has := m.Interval(t0.Add(time.Second)).Get("mfu"); has {
		t.Error("mfu without a peak")
	}
	if _, has := m.Summary(t0.Add(time.Second)).Get("train_tokens_per_second"); has {
		t.Error("train_tokens_per_second without IncludeTokensPerSecond")
	}
}

// TestMeterConcurrent reports from several goroutines while another takes intervals; nothing may
// be lost or counted twice.
func TestMeterConcurrent(t *testing.T) {
	t0 := time.Unix(0, 0)
	m := NewMeter(MeterConfig{}, t0)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 250 {
				m.AddStep(2, 3, time.Millisecond)
				m.AddInputWait(time.Millisecond)
			}
		}()
	}
	var mu sync.Mutex
	var samples float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; i <= 50; i++ {
			e := m.Interval(t0.Add(time.Duration(i) * time.Second))
			v, _ := e.Float("samples_per_second") // over exactly 1 s
			mu.Lock()
			samples += v
			mu.Unlock()
		}
	}()
	wg.Wait()
	<-done
	e := m.Interval(t0.Add(51 * time.Second))
	v, _ := e.Float("samples_per_second")
	if total := samples + v; total != 2000 {
		t.Errorf("samples over all intervals = %v, want 2000", total)
	}
	if got, _ := m.Summary(t0.Add(100 * time.Second)).Float("train_steps_per_second"); got != 10 {
		t.Errorf("train_steps_per_second = %v, want 1000 steps / 100 s", got)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzLookupPeakFLOPS checks the chip-name matching on arbitrary names: normalization is
// idempotent and case-blind, and a name matches only through a table entry.
func FuzzLookupPeakFLOPS(f *testing.F) {
	for _, s := range []string{"TPU v5 lite", "NVIDIA H100 80GB HBM3", "  h100--sxm ", "", "nvidia nvidia h200", "İ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		n := normalizeChipName(name)
		if normalizeChipName(n) != n {
			t.Fatalf("normalize(%q) = %q is not a fixed point", name, n)
		}
		got, ok := LookupPeakFLOPS(name)
		again, ok2 := LookupPeakFLOPS(n)
		if ok != ok2 || got != again {
			t.Fatalf("LookupPeakFLOPS(%q) = %v,%v but of its normal form %q = %v,%v", name, got, ok, n, again, ok2)
		}
		if ok != (got > 0) {
			t.Fatalf("LookupPeakFLOPS(%q) = %v, %v", name, got, ok)
		}
	})
}
