package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/trainer"
)

// TestTrainSIGTERM: a real `gotpu train` process gets SIGTERM mid-run; it finishes the current
// step, commits a checkpoint at the step it reached and exits 0 (within 30 s), and the run resumes
// from it.
func TestTrainSIGTERM(t *testing.T) {
	dir := t.TempDir()
	batchFile := filepath.Join(dir, "batch.jsonl")
	writeBatchJSONL(t, "gpt2-tiny", batchFile)
	out := filepath.Join(dir, "out")
	args := []string{"train", "--model_name_or_path", filepath.Join("..", "..", "testdata", "models", "gpt2-tiny"),
		"--train_file", batchFile, "--per_device_train_batch_size", "1", "--max_steps", "1000000",
		"--save_steps", "5", "--logging_steps", "1000", "--device", "go", "--output_dir", out, "--disable_tqdm", "true"}
	cmd := exec.Command(gotpuBin, args...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Wait (without a deadline of its own: the test binary's timeout bounds it) until training
	// has committed a checkpoint, then preempt it.
	for {
		if l, _ := checkpoint.List(out); len(l) > 0 {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("gotpu train ended before SIGTERM: %v\n%s", err, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("gotpu train after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("gotpu train did not exit within 30 s of SIGTERM\n%s", stderr.String())
	}
	st, err := trainer.LoadTrainerState(filepath.Join(out, "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	last, err := checkpoint.Latest(out)
	if err != nil {
		t.Fatal(err)
	}
	if last.Step != st.GlobalStep {
		t.Fatalf("latest checkpoint is step %d, the run reached step %d\n%s", last.Step, st.GlobalStep, stderr.String())
	}
	if _, err := checkpoint.Open(last.Dir, "model.safetensors", "trainer_state.json", "optimizer.safetensors"); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGTERM at step %d: checkpoint %s committed, exit 0", st.GlobalStep, last.Dir)
}
