package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models/gpt2"
)

// The resource budget through the real binary (issue 16): requests that killed the process now
// fail with an error naming what to change. Each child runs under `ulimit -v` (4 GiB of address
// space), so that a regression dies at its first large allocation (exit status 2, "fatal error:
// out of memory") on any machine instead of swapping this one, and the budget sees a bound it
// must respect (RLIMIT_AS).

// budgetChild is one run of the binary under the address-space limit.
type budgetChild struct {
	stdout, stderr string
	code           int
	maxRSS         int64 // bytes, the child's peak resident set
}

func runLimited(t *testing.T, args ...string) budgetChild {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the child's memory limit is set with ulimit -v")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", `ulimit -v 4194304 && exec "$0" "$@"`, gotpuBin}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := budgetChild{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running gotpu %v: %v", args, err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = int64(ru.Maxrss) * 1024 // kilobytes on Linux
	}
	return r
}

// refused checks a clean runtime error: exit status 1, no fatal runtime error, and every want in
// the message.
func (r budgetChild) refused(t *testing.T, want ...string) {
	t.Helper()
	msg := r.stderr
	if len(msg) > 3000 {
		msg = msg[:3000] + "…"
	}
	if r.code != 1 || strings.Contains(msg, "fatal error") || strings.Contains(msg, "goroutine ") {
		t.Fatalf("gotpu exited %d, want a clean error (exit 1); stderr:\n%s", r.code, msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the error lacks %q:\n%s", w, msg)
		}
	}
}

// tinyModelDir copies the gpt2-tiny fixture (n_positions 64, vocabulary 1000).
func tinyModelDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "models", "gpt2-tiny", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// writeExamples writes n pre-tokenized examples of 16 ids.
func writeExamples(t *testing.T, path string, n int) {
	t.Helper()
	var sb strings.Builder
	for i := range n {
		ids := make([]int, 16)
		for j := range ids {
			ids[j] = (i*7 + j) % 1000
		}
		b, _ := json.Marshal(map[string]any{"input_ids": ids})
		sb.Write(append(b, '\n'))
	}
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestTrainRefusesHugeBatch (row 2): per_device_train_batch_size 10^9 on a 20-example file died
// with "cannot allocate 8002732032-byte block".
func TestTrainRefusesHugeBatch(t *testing.T) {
	dir := t.TempDir()
	train := filepath.Join(dir, "train.jsonl")
	writeExamples(t, train, 20)
	r := runLimited(t, "train", "--device", "go", "--model_name_or_path", tinyModelDir(t), "--train_file", train,
		"--output_dir", filepath.Join(dir, "out"), "--per_device_train_batch_size", "1000000000", "--max_steps", "1",
		"--disable_tqdm", "true")
	r.refused(t, "per_device_train_batch_size", "1000000000", "20 examples", "at most 20")
}

// TestTrainRefusesLongLineBeforeHoldingIt (row 3): one line of 5M ids against n_positions 64 was
// read, decoded and collated (50M ids: 2.3 GB and 40 s) before "exceeds n_positions 64"; the
// ids are now counted while the file is indexed, and the error names the file, line and field.
func TestTrainRefusesLongLineBeforeHoldingIt(t *testing.T) {
	dir := t.TempDir()
	train := filepath.Join(dir, "train.jsonl")
	writeExamples(t, train, 3)
	f, err := os.OpenFile(train, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	w.WriteString(`{"input_ids": [`)
	const ids = 5_000_000
	for i := range ids {
		if i > 0 {
			w.WriteByte(',')
		}
		w.WriteByte('1')
	}
	w.WriteString("]}\n")
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	r := runLimited(t, "train", "--device", "go", "--model_name_or_path", tinyModelDir(t), "--train_file", train,
		"--output_dir", filepath.Join(dir, "out"), "--max_steps", "1", "--disable_tqdm", "true")
	r.refused(t, "train.jsonl:4", `"input_ids"`, "more than 64 values")
	// The 10 MB line is streamed through a 1 MiB buffer, never held: the process stays near its
	// baseline (about 40 MB), where decoding it took hundreds of MB.
	const bound = 150 << 20
	if r.maxRSS > bound {
		t.Errorf("peak RSS %d MB, want under %d MB", r.maxRSS>>20, bound>>20)
	}
	t.Logf("peak RSS %d MB", r.maxRSS>>20)
}

// TestTrainRefusesAbsurdConfig (row 1, as a CLI user meets it): a config.json with n_embd 2^30
// and n_head 1 is refused naming the field, before its weights are looked at.
func TestTrainRefusesAbsurdConfig(t *testing.T) {
	dir := t.TempDir()
	model := tinyModelDir(t)
	p := filepath.Join(model, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b = bytes.Replace(b, []byte(`"n_embd": 64`), []byte(`"n_embd": 1073741824`), 1)
	b = bytes.Replace(b, []byte(`"n_head": 4`), []byte(`"n_head": 1`), 1)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	train := filepath.Join(dir, "train.jsonl")
	writeExamples(t, train, 4)
	r := runLimited(t, "train", "--device", "go", "--model_name_or_path", model, "--train_file", train,
		"--output_dir", filepath.Join(dir, "out"), "--max_steps", "1", "--disable_tqdm", "true")
	r.refused(t, "config.json", `field "n_embd"`, "1073741824", "limit")
}

// writeSparseGPT2Dir writes a self-consistent GPT-2 directory whose float32 weights are a hole:
// the safetensors header lists every tensor config.json implies and the file is truncated to
// the full size, taking no disk.
func writeSparseGPT2Dir(t *testing.T, cfg *gpt2.Config) (string, int64) {
	t.Helper()
	dir := t.TempDir()
	cfgJSON, err := cfg.JSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfgJSON, 0o644); err != nil {
		t.Fatal(err)
	}
	var specs []safetensors.Tensor
	for _, p := range gpt2.Table(cfg) {
		specs = append(specs, safetensors.Tensor{Name: p.Name, DType: safetensors.F32, Shape: p.Shape})
	}
	size, err := safetensors.WriteSparseFile(filepath.Join(dir, "model.safetensors"), specs)
	if err != nil {
		t.Skip(err)
	}
	return dir, size
}

// TestTrainRefusesSparseModelBeyondMemory (row 5): a self-consistent 29 GB sparse
// model.safetensors was mapped and converted until the process died; its parameter bytes are now
// checked against the memory available before anything is mapped.
func TestTrainRefusesSparseModelBeyondMemory(t *testing.T) {
	cfg := gpt2.DefaultConfig()
	cfg.NEmbd, cfg.NHead, cfg.NLayer, cfg.NPositions = 16384, 16, 2, 64
	model, size := writeSparseGPT2Dir(t, cfg)
	dir := t.TempDir()
	train := filepath.Join(dir, "train.jsonl")
	writeExamples(t, train, 4)
	r := runLimited(t, "train", "--device", "go", "--model_name_or_path", model, "--train_file", train,
		"--output_dir", filepath.Join(dir, "out"), "--max_steps", "1", "--disable_tqdm", "true")
	r.refused(t, filepath.Join(model, "config.json"), "needs about", "available on the host (RLIMIT_AS)")
	t.Log(fmt.Sprintf("%.1f GB sparse: ", float64(size)/1e9) + strings.TrimSpace(r.stderr))
}
