package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// TestQuickstartRunsInAUsersModule: main.go, copied into a fresh module outside this repository
// (module example.com/me, requiring gotpu through a replace directive), builds and runs there:
// it names no file of this repository. The tokenizer is fetched the Hub way from a local fake
// Hub (HF_ENDPOINT) into a temporary HF cache, and nothing is downloaded from the network
// (GOPROXY=off: the modules come from the local module cache). testing.Short() builds only.
func TestQuickstartRunsInAUsersModule(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go tool is not on PATH: cannot build a separate module")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if strings.HasPrefix(dir, root+string(filepath.Separator)) {
		t.Fatalf("temporary directory %s is inside the repository %s", dir, root)
	}
	// The user's module states the go version gotpu's go.mod requires, as `go get` would set it.
	rootMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go [0-9.]+$`).Find(rootMod)
	if goLine == nil {
		t.Fatal("go.mod: no go directive")
	}
	goMod := "module example.com/me\n\n" + string(goLine) + "\n\nrequire github.com/gotpu/gotpu v0.0.0\n\nreplace github.com/gotpu/gotpu => " + root + "\n"
	copyFile(t, filepath.Join(root, "go.sum"), filepath.Join(dir, "go.sum"))
	copyFile(t, "main.go", filepath.Join(dir, "main.go"))
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	env := []string{"GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOWORK=off", "GOSUMDB=off"}
	bin := filepath.Join(dir, "quickstart")
	build := exec.CommandContext(ctx, goTool, "build", "-o", bin, ".")
	build.Dir, build.Env = dir, append(os.Environ(), env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in %s: %v\n%s", dir, err, out)
	}
	if testing.Short() {
		t.Skip("built in a separate module; -short skips the 20-step run")
	}

	hubSrv := hubtest.New(t)
	hubSrv.AddRepo("model", "openai-community/gpt2", map[string][]byte{"tokenizer.json": gunzip(t, filepath.Join(root, "testdata/tokenizers/gpt2/tokenizer.json.gz"))}, hubtest.RepoOptions{})
	cache := filepath.Join(dir, "hf-home", "hub")
	run := exec.CommandContext(ctx, bin)
	run.Dir = dir
	run.Env = append(withoutHFEnv(os.Environ()), "HF_ENDPOINT="+hubSrv.URL(), "HF_HOME="+filepath.Join(dir, "hf-home"),
		"HF_HUB_CACHE="+cache, "HF_HUB_DISABLE_PROGRESS_BARS=1")
	start := time.Now()
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("quickstart in %s: %v\n%s", dir, err, out)
	}
	line := regexp.MustCompile(`(?m)^20 steps, training loss (\d+\.\d{3})$`).FindSubmatch(out)
	if line == nil {
		t.Fatalf("no \"20 steps, training loss X\" line in the output:\n%s", out)
	}
	t.Logf("quickstart in a separate module (%s):\n%s", time.Since(start).Round(time.Second), out)
	if _, err := os.Stat(filepath.Join(cache, "models--openai-community--gpt2")); err != nil {
		t.Errorf("the tokenizer is not in the HF cache: %v", err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(dir, "out", "quickstart", f)); err != nil {
			t.Errorf("saved model: %v", err)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func gunzip(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return out
}

// withoutHFEnv drops the Hugging Face settings of the test's environment (a token, offline
// mode, another cache), so the program sees only the fake Hub and the temporary cache.
func withoutHFEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "HF_") || strings.HasPrefix(k, "HUGGING") || k == "TRANSFORMERS_OFFLINE" {
			continue
		}
		out = append(out, kv)
	}
	return out
}
