package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
