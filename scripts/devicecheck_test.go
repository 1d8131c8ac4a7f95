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
	"2-train-bert-tiny-adamw_linear_warmup_clip1", "3-helpers", "3-gpt2-gotpu", "5-lora",
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
		if s.where == "" {
			t.Errorf("%s: summary.md does not say where it ran", id)
		}
		if strings.Contains(s.where, "plugin") {
			t.Errorf("%s ran on %q in a dry run, which uses no plugin", id, s.where)
		}
	}
	for _, f := range []string{"steps.tsv", "commands.log", "raw/fixtures/gpt2-tiny/logits.safetensors"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("the dry run left no %s: %v", f, err)
		}
	}
}

type step struct{ status, where, detail string }

// readSteps reads the "## Steps" table of summary.md: | id | status | where | detail |.
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
		cells := strings.SplitN(strings.TrimSuffix(strings.TrimPrefix(line, "| "), " |"), " | ", 4)
		if len(cells) != 4 {
			t.Errorf("summary.md: malformed step row %q", line)
			continue
		}
		if _, dup := steps[cells[0]]; dup {
			t.Errorf("summary.md: step %s listed twice", cells[0])
		}
		steps[cells[0]] = step{cells[1], cells[2], cells[3]}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return steps
}

// cpuSteps are the rows of `device-check.sh --xla-cpu`, and where each must have run: every step
// that needs no GPU passes on XLA's CPU plugin (or on gotpu's CPU backend, or the host, as on the
// device); the GPU's own rows are skipped with their reason, and the rows that need Python packages
// this machine may lack (torch, jax, transformers, tokenizers) pass or skip with theirs.
var cpuSteps = []struct {
	id    string
	where string // the where column's prefix; "" for a row that may pass or skip
}{
	{"0-build", "host only"}, {"0-binaries", "host only"}, {"1-args", "host only"}, {"1-plugin", "host only"},
	{"1-devices", "XLA CPU plugin, 8 devices"},
	{"2-score-gpt2-tiny", "XLA CPU plugin, 1 device"}, {"2-train-gpt2-tiny-adamw", "XLA CPU plugin, 1 device"},
	{"2-score-gpt2-tiny-affine", "XLA CPU plugin, 1 device"},
	{"2-train-gpt2-tiny-affine-adamw_clip1", "XLA CPU plugin, 1 device"},
	{"2-score-llama-tiny", "XLA CPU plugin, 1 device"},
	{"2-train-llama-tiny-adamw_linear_warmup_clip1", "XLA CPU plugin, 1 device"},
	{"2-score-bert-tiny", "XLA CPU plugin, 1 device"},
	{"2-train-bert-tiny-adamw_linear_warmup_clip1", "XLA CPU plugin, 1 device"},
	{"3-helpers", "host only"},
	{"3-gpt2-124m", "not run: needs a GPU"},
	{"3-gpt2-gotpu", "XLA CPU plugin, 1 device"}, {"3-gpt2-gotpu-go", "gotpu CPU backend"},
	{"3-gpt2-torch-eager", ""}, {"3-gpt2-torch-compile", ""}, {"3-gpt2-jax", ""},
	{"4-async", "XLA CPU plugin, 1 device"},
	{"5-hf-gpt2", ""}, {"5-hf-llama", ""}, {"5-hf-bert", ""}, {"5-hf-mistral", ""}, {"5-hf-qwen2", ""},
	{"5-lora", "XLA CPU plugin, 1 device"},
	{"5-tokenizers-gpt2", "host only"}, {"5-tokenizers-bert-base-uncased", "host only"},
	{"5-tokenizers-mistral-7b", "host only"}, {"5-tokenizers-qwen3", "host only"},
	{"5-tokenizers-unigram-synthetic", "host only"},
	{"5-tokenizers-python-gpt2", ""}, {"5-tokenizers-python-bert-base-uncased", ""},
	{"5-tokenizers-python-mistral-7b", ""}, {"5-tokenizers-python-qwen3", ""},
	{"5-tokenizers-python-unigram-synthetic", ""},
	{"6-probe", "host only"},
	{"6-spmd-8-replicas", "XLA CPU plugin, 8 devices"}, {"6-fsdp-8-devices", "XLA CPU plugin, 8 devices"},
}

// TestDeviceCheckOnXLACPU runs `scripts/device-check.sh --xla-cpu`, the rehearsal of a device run
// with XLA's CPU PJRT plugin as the device (issue #37): the plugin found as gotpu finds it and
// listed with 8 devices and its PJRT C API version, the fixtures scored and trained on it against
// their references, a reduced GPT-2 benchmarked on it and on gotpu's CPU backend, the pipeline
// figures of that run, a LoRA adapter trained on it against gotpu's CPU backend, the stored
// tokenizer outputs, and the 8-replica and fsdp full_shard steps on 8 of its devices against
// gotpu's CPU backend. Every one of those must PASS, each row must say where it ran, and the
// summary must name the plugin. It takes about a minute (1m30s with other tests beside it on two
// cores), most of it XLA compiling.
//
// Without the plugin the test skips, and under CI it fails (pjrttest.RequireCPUPlugin). Named
// *OnXLACPU, it is left out of `make test`'s -race pass; it also skips under -race itself, as the
// dry run does: the script's processes are built without -race.
func TestDeviceCheckOnXLACPU(t *testing.T) {
	path := requireCPUPlugin(t)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed: the script's comparisons (device/compare.py) need it")
	}
	if raceEnabled {
		t.Skip("covered by the run without -race")
	}
	out, bin := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	cmd := exec.CommandContext(ctx, "bash", "device-check.sh", "--xla-cpu")
	// DEADLINE_S: about a minute of work on an idle machine, with room for `go test ./...` running
	// other packages beside it; a step the budget skipped would fail the checks below.
	cmd.Env = append(os.Environ(), "OUT="+out, "DEVICE_BIN="+bin, "WORK="+t.TempDir(), "DEADLINE_S=270")
	logs, err := cmd.CombinedOutput()
	t.Logf("device-check.sh --xla-cpu took %s", time.Since(start).Round(time.Second))
	if err != nil {
		t.Fatalf("device-check.sh --xla-cpu: %v\n%s", err, logs)
	}
	summary, err := os.ReadFile(filepath.Join(out, "summary.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps := readSteps(t, filepath.Join(out, "summary.md"))
	for _, want := range cpuSteps {
		s, ok := steps[want.id]
		switch {
		case !ok:
			t.Errorf("summary.md has no step %s", want.id)
		case want.where == "":
			if s.status != "PASS" && (s.status != "SKIP" || strings.TrimSpace(s.detail) == "") {
				t.Errorf("%s: %s %q, want PASS or SKIP with a reason", want.id, s.status, s.detail)
			}
		case strings.HasPrefix(want.where, "not run"):
			if s.status != "SKIP" || !strings.HasPrefix(s.where, want.where) {
				t.Errorf("%s: %s on %q, want SKIP on %q", want.id, s.status, s.where, want.where)
			}
		case s.status != "PASS" || !strings.HasPrefix(s.where, want.where):
			t.Errorf("%s: %s on %q (%s), want PASS on %q", want.id, s.status, s.where, s.detail, want.where)
		}
	}
	for id, s := range steps {
		if s.status == "FAIL" {
			t.Errorf("%s: FAIL on %s: %s", id, s.where, s.detail)
		}
	}
	if d := steps["1-devices"].detail; !strings.Contains(d, "PJRT C API ") {
		t.Errorf("1-devices does not give the plugin's PJRT C API version: %s", d)
	}
	for _, w := range []string{"rehearsal on XLA's CPU PJRT plugin", "- plugin: " + path + " (PJRT C API "} {
		if !strings.Contains(string(summary), w) {
			t.Errorf("summary.md does not say %q:\n%s", w, summary)
		}
	}
	if t.Failed() {
		t.Logf("device-check.sh output:\n%s", logs)
	}
}
