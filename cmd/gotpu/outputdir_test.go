package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOutputDirNotClobbered is issue #39's first finding: a second run into the output_dir of a
// first, with another seed and without --overwrite_output_dir, overwrote checkpoint-2 and kept
// the old checkpoint-4, and a later --resume_from_checkpoint true resumed the old run. Now such a
// run is refused before anything is written (run_clm.py's rule), naming the directory and the
// ways on; --overwrite_output_dir starts from scratch there and removes the old run's checkpoints
// (and leftovers of its interrupted saves) first, so that resuming finds the new run's.
func TestOutputDirNotClobbered(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "ids.jsonl")
	var sb strings.Builder
	for i := range 64 {
		ids := make([]int, 20)
		for j := range ids {
			ids[j] = (i*31 + j*7) % 500
		}
		b, _ := json.Marshal(map[string]any{"input_ids": ids})
		sb.Write(append(b, '\n'))
	}
	if err := os.WriteFile(data, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	train := func(steps int, extra ...string) (string, int) {
		t.Helper()
		args := append([]string{"train", "--model_name_or_path", filepath.Join("..", "..", "testdata", "models", "llama-tiny"),
			"--train_file", data, "--output_dir", out, "--max_steps", fmt.Sprint(steps), "--save_steps", "2",
			"--per_device_train_batch_size", "2", "--block_size", "16", "--device", "go"}, extra...)
		_, stderr, code := runGotpu(t, nil, args...)
		return stderr, code
	}
	if stderr, code := train(4); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, stderr)
	}
	model := filepath.Join(out, "model.safetensors")
	before, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}

	// Another run into it, another seed: refused, nothing touched.
	stderr, code := train(2, "--seed", "7")
	if code != 1 {
		t.Fatalf("second run into a used output_dir: exit %d, want 1\n%s", code, stderr)
	}
	for _, want := range []string{out, "not empty", "checkpoint-4", "--overwrite_output_dir", "--resume_from_checkpoint true"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("refusal does not name %q:\n%s", want, stderr)
		}
	}
	if after, err := os.ReadFile(model); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the refused run changed %s (%v)", model, err)
	}
	for _, c := range []string{"checkpoint-2", "checkpoint-4"} {
		if _, err := os.Stat(filepath.Join(out, c)); err != nil {
			t.Errorf("the refused run lost %s: %v", c, err)
		}
	}

	// --overwrite_output_dir: a shorter run from scratch; the old run's checkpoint-4 and a
	// leftover of an interrupted save are gone, so resuming finds the new run's checkpoint-2.
	leftover := filepath.Join(out, "checkpoint-6.tmp-0123abcd")
	if err := os.MkdirAll(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	if stderr, code := train(2, "--seed", "7", "--overwrite_output_dir"); code != 0 {
		t.Fatalf("--overwrite_output_dir: exit %d\n%s", code, stderr)
	}
	for _, gone := range []string{"checkpoint-4", filepath.Base(leftover)} {
		if _, err := os.Stat(filepath.Join(out, gone)); !os.IsNotExist(err) {
			t.Errorf("--overwrite_output_dir left the previous run's %s (%v)", gone, err)
		}
	}
	stderr, code = train(4, "--seed", "7", "--resume_from_checkpoint", "true")
	if code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	if want := "resumed checkpoint=" + filepath.Join(out, "checkpoint-2") + " "; !strings.Contains(stderr, want) {
		t.Errorf("resume did not start from the new run's checkpoint-2 (%q):\n%s", want, stderr)
	}
	var st struct {
		GlobalStep int `json:"global_step"`
		LogHistory []struct {
			Step int `json:"step"`
		} `json:"log_history"`
	}
	raw, err := os.ReadFile(filepath.Join(out, "trainer_state.json"))
	if err != nil || json.Unmarshal(raw, &st) != nil {
		t.Fatalf("trainer_state.json: %v", err)
	}
	if st.GlobalStep != 4 {
		t.Errorf("resumed run ended at step %d, want 4 (2 of the new run's, then 2 more)", st.GlobalStep)
	}

	// An existing empty directory is not "used".
	empty := filepath.Join(dir, "empty")
	if err := os.MkdirAll(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	out = empty
	if stderr, code := train(2); code != 0 {
		t.Errorf("an empty output_dir: exit %d\n%s", code, stderr)
	}
}
