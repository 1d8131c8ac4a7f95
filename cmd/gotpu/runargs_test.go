package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/xla"
)

// TestTrainEvalPluginPath: train and eval take --plugin_path as devices, score and generate do;
// a plugin that is not there is an error naming it, before any data is read.
func TestTrainEvalPluginPath(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	makeTinyGPT2Dir(t, model)
	data := filepath.Join(dir, "d.jsonl")
	if err := os.WriteFile(data, []byte(`{"input_ids": [1, 2, 3, 4]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "nowhere", "libtpu.so")
	for _, args := range [][]string{
		{"train", "--train_file", data, "--output_dir", filepath.Join(dir, "out")},
		{"eval", "--validation_file", data},
	} {
		args = append(args, "--model_name_or_path", model, "--device", "tpu", "--plugin_path", missing)
		out, errOut, code := runGotpu(t, nil, args...)
		if code != 1 || out != "" || !strings.Contains(errOut, missing) || !strings.Contains(errOut, "PJRT plugin not found") {
			t.Errorf("gotpu %s: exit %d, stdout %q, stderr %q", args[0], code, out, errOut)
		}
	}
}

// TestGoBackendFlag: every command that opens a device takes --go_backend, and the runtime it
// opens is the backend named (default gotpu); a bad value is a usage error (for train and eval,
// before any data is read).
func TestGoBackendFlag(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, xla.GoBackendGotpu},
		{[]string{"--go_backend", "gotpu"}, xla.GoBackendGotpu},
		{[]string{"--go_backend", "simplego"}, xla.GoBackendSimpleGo},
	} {
		// train and eval: runArgs.openRuntime.
		for _, cmd := range []string{"train", "eval"} {
			r, err := parseRunArgs(cmd, append([]string{"--device", "go"}, c.args...), io.Discard, "")
			if err != nil {
				t.Fatal(err)
			}
			rt, err := r.openRuntime(ctx)
			if err != nil {
				t.Fatalf("%s %v: %v", cmd, c.args, err)
			}
			if got := rt.GoBackend(); got != c.want {
				t.Errorf("%s %v: runtime on %q, want %q", cmd, c.args, got, c.want)
			}
			rt.Close()
		}
		// devices, score and generate: deviceFlags.
		var dev deviceFlags
		fs := newFlagSet("x")
		dev.register(fs)
		if err := fs.Parse(append([]string{"--device", "go"}, c.args...)); err != nil {
			t.Fatal(err)
		}
		cfg, err := dev.config()
		if err != nil {
			t.Fatal(err)
		}
		rt, err := xla.Open(ctx, cfg)
		if err != nil {
			t.Fatalf("deviceFlags %v: %v", c.args, err)
		}
		if got := rt.GoBackend(); got != c.want {
			t.Errorf("deviceFlags %v: runtime on %q, want %q", c.args, got, c.want)
		}
		rt.Close()
	}

	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	makeTinyGPT2Dir(t, model)
	missing := filepath.Join(dir, "no-such-data.jsonl")
	for _, args := range [][]string{
		{"train", "--model_name_or_path", model, "--train_file", missing, "--output_dir", filepath.Join(dir, "out")},
		{"eval", "--model_name_or_path", model, "--validation_file", missing},
		{"score", "--model", model},
		{"generate", "--model", model, "--prompt_ids", "1"},
	} {
		args = append(args, "--device", "go", "--go_backend", "fast")
		out, errOut, code := runGotpu(t, nil, args...)
		if code != 2 || out != "" || !strings.Contains(errOut, "GoBackend") || strings.Contains(errOut, missing) {
			t.Errorf("gotpu %s --go_backend fast: exit %d, stdout %q, stderr %q; want 2 and an error naming GoBackend", args[0], code, out, errOut)
		}
	}
}
