package models

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/xla"
)

// The out-of-memory cases of the resource budget run in a child process (this test binary again,
// under `ulimit -v`), so that a regression shows as the child's fatal runtime error and exit
// status 2, never as this process dying. The address-space limit makes the outcome the same on
// any machine: the models below need far more than it allows, so the code before the budget
// died at its first large allocation, and the budget must refuse them with an error instead.

// childEnv selects the scenario TestBudgetChild runs.
const childEnv = "GOTPU_MODELS_BUDGET_CHILD"

// childVirtualKB is the child's address-space limit: 4 GiB.
const childVirtualKB = 4 << 20

// runBudgetChild runs scenario in a child process and returns its stderr and exit status.
func runBudgetChild(t *testing.T, scenario string, env ...string) (string, int) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the child's memory limit is set with ulimit -v")
	}
	cmd := exec.Command("sh", "-c", fmt.Sprintf(`ulimit -v %d && exec "$0" "$@"`, childVirtualKB),
		os.Args[0], "-test.run=^TestBudgetChild$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"="+scenario), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running the child: %v", err)
	}
	return stderr.String(), code
}

// TestBudgetChild is the child's side; it does nothing in a normal run.
func TestBudgetChild(t *testing.T) {
	scenario := os.Getenv(childEnv)
	if scenario == "" {
		t.Skip("runs only as the child of the budget tests")
	}
	ctx := context.Background()
	rt, err := xla.Open(ctx, xla.Config{Device: "go"})
	if err != nil {
		t.Fatal(err)
	}
	switch scenario {
	case "new-absurd": // issue 16: config_overrides "n_embd=1073741824,n_head=1"
		cfg := gpt2.DefaultConfig()
		cfg.NEmbd, cfg.NHead = 1<<30, 1
		_, err = New(ctx, rt, cfg, NewOptions{})
	case "new-big": // within every dimension limit, 0.6T parameters
		cfg := gpt2.DefaultConfig()
		cfg.NEmbd, cfg.NHead, cfg.NLayer = 32768, 32, 48
		_, err = New(ctx, rt, cfg, NewOptions{})
	case "load":
		_, err = Load(ctx, rt, os.Getenv("GOTPU_CHILD_DIR"), LoadOptions{})
	default:
		t.Fatalf("unknown scenario %q", scenario)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "child error: %v\n", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// assertCleanRefusal checks that the child reported an error and exited 3 (not 2: a fatal
// runtime error), with every part of want in its message.
func assertCleanRefusal(t *testing.T, stderr string, code int, want ...string) {
	t.Helper()
	if code != 3 || strings.Contains(stderr, "fatal error") || strings.Contains(stderr, "out of memory") {
		t.Fatalf("child exited %d, want a clean error (exit 3); stderr:\n%s", code, clip(stderr))
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("the error lacks %q:\n%s", w, clip(stderr))
		}
	}
}

func clip(s string) string {
	if len(s) > 2000 {
		return s[:2000] + "…"
	}
	return s
}

// TestNewRefusesAbsurdDimsInChild (issue 16, row 1): models.New with n_embd 2^30 and n_head 1
// died with "fatal error: out of memory: cannot allocate 215852171395072-byte block"; it must be
// an error naming the field.
func TestNewRefusesAbsurdDimsInChild(t *testing.T) {
	stderr, code := runBudgetChild(t, "new-absurd")
	assertCleanRefusal(t, stderr, code, `field "n_embd"`, "1073741824")
}

// TestNewRefusesModelBeyondMemoryInChild (row 1): dimensions each within their limit, whose
// parameters (2.5 TB) exceed the host: an error saying what is needed and what is available.
func TestNewRefusesModelBeyondMemoryInChild(t *testing.T) {
	stderr, code := runBudgetChild(t, "new-big")
	assertCleanRefusal(t, stderr, code, "needs about", "available on the host")
}

// writeSparseGPT2 writes a self-consistent GPT-2 model directory whose float32 weights take
// bytes on paper but no disk: the safetensors header lists every tensor cfg implies and the data
// is a hole (the file is truncated to its full size).
func writeSparseGPT2(t *testing.T, cfg *gpt2.Config) (string, int64) {
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

// TestLoadRefusesSparseModelBeyondMemoryInChild (issue 16, row 5): a self-consistent 29 GB
// sparse safetensors file (its header and config.json agree) was mapped and converted tensor by
// tensor until the process died; the parameter bytes are now checked against memory first.
func TestLoadRefusesSparseModelBeyondMemoryInChild(t *testing.T) {
	cfg := gpt2.DefaultConfig()
	cfg.NEmbd, cfg.NHead, cfg.NLayer, cfg.NPositions = 16384, 16, 2, 64
	dir, size := writeSparseGPT2(t, cfg)
	t.Logf("model.safetensors: %.1f GB of float32 weights, sparse", float64(size)/1e9)
	stderr, code := runBudgetChild(t, "load", "GOTPU_CHILD_DIR="+dir)
	assertCleanRefusal(t, stderr, code, "config.json", "needs about", "available on the host (RLIMIT_AS)")
}
