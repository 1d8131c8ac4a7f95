package step

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/internal/procstat"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

// ckptChildEnv selects the run TestGradientCheckpointingChild performs in a child process:
// "MODEL,on|off" with MODEL gpt2 (the GPT-2 124M config) or llama (a Llama-shaped model of the
// same width and depth: hidden 768, 12 layers, 12 heads, SwiGLU 2048, vocabulary 32000).
const ckptChildEnv = "GOTPU_GRADCKPT_CHILD"

// ckptBatch, ckptSeq: the batch, 4 × 512.
const ckptBatch, ckptSeq = 4, 512

// BenchmarkGradientCheckpointing measures gradient checkpointing on gotpu's pure-Go backend: each
// model trains 2 AdamW steps (batch 4 × 512, float32) in its own process with and without
// gradient_checkpointing, and the benchmark reports each process's peak RSS, its RSS before the
// first step (parameters, AdamW state, the loaded batch) and their difference — the step's
// activations and transients — with the ratio with/without of that difference and of the step
// time. The losses of the two processes must be bitwise equal.
func BenchmarkGradientCheckpointing(b *testing.B) {
	for _, model := range []string{"gpt2", "llama"} {
		var runs [2]ckptRun124
		for i, mode := range []string{"off", "on"} {
			r, err := runCkptChild(b.Context(), model, mode)
			if err != nil {
				b.Fatal(err)
			}
			runs[i] = r
			fmt.Fprintf(os.Stderr, "%-5s checkpointing %-3s peak RSS %7.0f MiB, before the first step %7.0f MiB, step transients %7.0f MiB, %6.0f ms/step, losses %s\n",
				model, mode, r.peak, r.base, r.peak-r.base, r.msPerStep, r.losses)
		}
		if runs[0].losses != runs[1].losses {
			b.Errorf("%s: losses %s without checkpointing, %s with", model, runs[0].losses, runs[1].losses)
		}
		act := (runs[1].peak - runs[1].base) / (runs[0].peak - runs[0].base)
		fmt.Fprintf(os.Stderr, "%-5s with/without: step transients %.2fx (%.0f%% less), peak RSS %.2fx, time %.2fx\n", model, act,
			100*(1-act), runs[1].peak/runs[0].peak, runs[1].msPerStep/runs[0].msPerStep)
		b.ReportMetric(act, model+"-transients-with/without")
		b.ReportMetric(runs[1].peak/runs[0].peak, model+"-peakRSS-with/without")
		b.ReportMetric(runs[1].msPerStep/runs[0].msPerStep, model+"-time-with/without")
	}
}

type ckptRun124 struct {
	peak, base, msPerStep float64
	losses                string
}

func runCkptChild(ctx context.Context, model, mode string) (ckptRun124, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestGradientCheckpointingChild$", "-test.count", "1")
	cmd.Env = append(os.Environ(), ckptChildEnv+"="+model+","+mode)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return ckptRun124{}, fmt.Errorf("%s: %w\n%s%s", model+","+mode, err, out, stderr.String())
	}
	r := ckptRun124{peak: -1, base: -1, msPerStep: -1}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "losses":
			r.losses = v
		case "peak_rss_mib", "base_rss_mib", "ms_per_step":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return ckptRun124{}, fmt.Errorf("line %q: %w", sc.Text(), err)
			}
			*map[string]*float64{"peak_rss_mib": &r.peak, "base_rss_mib": &r.base, "ms_per_step": &r.msPerStep}[k] = f
		}
	}
	if r.peak <= 0 || r.base <= 0 || r.msPerStep <= 0 || r.losses == "" {
		return ckptRun124{}, fmt.Errorf("%s,%s printed no complete result:\n%s%s", model, mode, out, stderr.String())
	}
	return r, nil
}

// ckptLlamaConfig is the Llama-shaped model of BenchmarkGradientCheckpointing.
func ckptLlamaConfig(t *testing.T) models.Config {
	raw, err := json.Marshal(map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama", "hidden_act": "silu",
		"hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 12, "num_attention_heads": 12,
		"num_key_value_heads": 12, "head_dim": 64, "vocab_size": 32000, "max_position_embeddings": 1024,
		"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false, "torch_dtype": "float32",
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := models.ParseConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestGradientCheckpointingChild is one run of BenchmarkGradientCheckpointing in its own process
// (skipped unless the benchmark started it).
func TestGradientCheckpointingChild(t *testing.T) {
	spec := os.Getenv(ckptChildEnv)
	if spec == "" {
		t.Skip("run by BenchmarkGradientCheckpointing in a child process")
	}
	model, mode, _ := strings.Cut(spec, ",")
	ctx := t.Context()
	rt, err := xla.Open(ctx, xla.Config{Device: xla.DeviceGo})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	var cfg models.Config
	var vocab int
	switch model {
	case "gpt2":
		c := load124m(t)
		cfg, vocab = c, c.VocabSize
	case "llama":
		cfg, vocab = ckptLlamaConfig(t), 32000
	default:
		t.Fatalf("%s=%q: want gpt2|llama,on|off", ckptChildEnv, spec)
	}
	s, err := small124mStepper(ctx, rt, cfg, Config{GradientCheckpointing: mode == "on"})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	batches := []*data.Batch{fullBatch(rng, ckptBatch, ckptSeq, vocab), fullBatch(rng, ckptBatch, ckptSeq, vocab)}
	base := float64(procstat.CurrentRSS()) / (1 << 20)
	var losses []string
	start := time.Now()
	for _, batch := range batches {
		res, err := s.Step(ctx, [][]*data.Batch{{batch}}, small124mLR)
		if err != nil {
			t.Fatal(err)
		}
		losses = append(losses, strconv.FormatFloat(res.Loss, 'g', -1, 64))
	}
	fmt.Printf("losses=%s\n", strings.Join(losses, ","))
	fmt.Printf("base_rss_mib=%.1f\n", base)
	fmt.Printf("peak_rss_mib=%.1f\n", float64(procstat.PeakRSS())/(1<<20))
	fmt.Printf("ms_per_step=%.1f\n", 1000*time.Since(start).Seconds()/float64(len(batches)))
}
