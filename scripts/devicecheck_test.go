package scripts

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// wantSteps are the steps every run of device-check.sh reports, device or dry run (the dry run
// adds 0-build and 1-args); a step that goes missing from the summary is a broken script.
var wantSteps = []string{
	"0-build", "0-binaries",
	"1-plugin", "1-args", "1-devices",
	"2-score-gpt2-tiny", "2-train-gpt2-tiny-adamw",
	"2-score-gpt2-tiny-affine", "2-train-gpt2-tiny-affine-adamw_clip1",
	"2-score-llama-tiny", "2-train-llama-tiny-adamw_linear_warmup_clip1",
	"2-score-bert-tiny", "2-train-bert-tiny-adamw_linear_warmup_clip1",
	"3-helpers", "3-gpt2-gotpu", "3-gpt2-torch-eager", "3-gpt2-torch-compile", "3-gpt2-jax",
	"4-async",
	"5-hf-gpt2", "5-hf-llama", "5-hf-bert", "5-hf-mistral", "5-hf-qwen2", "5-lora",
	"5-tokenizers-gpt2", "5-tokenizers-bert-base-uncased", "5-tokenizers-mistral-7b",
	"5-tokenizers-qwen3", "5-tokenizers-unigram-synthetic",
	"5-tokenizers-python-gpt2", "5-tokenizers-python-bert-base-uncased",
	"5-tokenizers-python-mistral-7b", "5-tokenizers-python-qwen3",
	"5-tokenizers-python-unigram-synthetic",
	"6-probe", "6-spmd-8-replicas", "6-fsdp-8-devices",
}

// mustPass are the steps whose commands and comparisons run on any machine with Go and python3:
// the fixtures through gotpu score/train and compare.py, the stored tokenizer outputs, the
// replica comparison and the benchmark's gotpu side. With python3 they must pass, not skip, or
// the dry run would no longer exercise the code the device run depends on.
var mustPass = []string{
	"0-build", "0-binaries", "1-args", "1-devices",
	"2-score-gpt2-tiny", "2-train-gpt2-tiny-adamw", "2-score-llama-tiny", "2-score-bert-tiny",
	"2-train-bert-tiny-adamw_linear_warmup_clip1", "3-helpers", "3-gpt2-gotpu",
	"5-tokenizers-gpt2", "5-tokenizers-qwen3", "6-spmd-8-replicas", "6-fsdp-8-devices",
}

// TestDeviceCheckDryRun runs `scripts/device-check.sh --dry-run` as CI would before device time is
// spent on it: it builds the binaries (from the build cache, into a temporary directory), runs
// every step that needs no plugin on the pure-Go backend, and must exit 0 with a summary that
// lists every step as PASS or SKIP with a reason.
func TestDeviceCheckDryRun(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	if raceEnabled {
		// The script runs separate processes built without -race; the plain `go test` run
		// covers it, and running it twice would only add its half minute.
		t.Skip("covered by the run without -race")
	}
	out, bin := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "bash", "device-check.sh", "--dry-run")
	// DEADLINE_S is the script's whole-run budget: its dry-run default (110 s) is ample on an idle
	// machine (~20 s), but `go test ./...` runs other packages' tests beside this one, and a step
	// that the budget skips would fail the mustPass check below.
	cmd.Env = append(os.Environ(), "OUT="+out, "DEVICE_BIN="+bin, "WORK="+t.TempDir(), "DEADLINE_S=200")
	logs, err := cmd.CombinedOutput()
	t.Logf("dry run took %s", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("device-check.sh --dry-run: %v\n%s", err, logs)
	}
	steps := readSteps(t, filepath.Join(out, "summary.md"))
	if len(steps) == 0 {
		t.Fatalf("summary.md lists no steps:\n%s", logs)
	}
	_, pyErr := exec.LookPath("python3")
	for _, id := range wantSteps {
		s, ok := steps[id]
		if !ok {
			t.Errorf("summary.md has no step %s", id)
			continue
		}
		switch {
		case s.status == "PASS":
		case s.status == "SKIP" && strings.TrimSpace(s.detail) != "":
			if pyErr == nil && slices.Contains(mustPass, id) {
				t.Errorf("%s skipped although python3 is installed: %s", id, s.detail)
			}
		default:
			t.Errorf("%s: %s %q, want PASS or SKIP with a reason", id, s.status, s.detail)
		}
	}
	for id, s := range steps {
		if s.status != "PASS" && s.status != "SKIP" {
			t.Errorf("%s: %s %s", id, s.status, s.detail)
		}
	}
	for _, f := range []string{"steps.tsv", "commands.log", "raw/fixtures/gpt2-tiny/logits.safetensors"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("the dry run left no %s: %v", f, err)
		}
	}
}

type step struct{ status, detail string }

// readSteps reads the "## Steps" table of summary.md: | id | status | detail |.
func readSteps(t *testing.T, path string) map[string]step {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	steps := map[string]step{}
	in := false
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Steps"
			continue
		}
		if !in || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| step ") {
			continue
		}
		cells := strings.SplitN(strings.TrimSuffix(strings.TrimPrefix(line, "| "), " |"), " | ", 3)
		if len(cells) != 3 {
			t.Errorf("summary.md: malformed step row %q", line)
			continue
		}
		if _, dup := steps[cells[0]]; dup {
			t.Errorf("summary.md: step %s listed twice", cells[0])
		}
		steps[cells[0]] = step{cells[1], cells[2]}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return steps
}
