package trainer_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/trainer"
)

// The out-of-memory case of the resource budget runs in a child process (this test binary
// again, under `ulimit -v`), so that a regression shows as the child's fatal runtime error and
// exit status 2, never as this process dying.

const trainerChildEnv = "GOTPU_TRAINER_BUDGET_CHILD"

// TestTrainerBudgetChild is the child's side; it does nothing in a normal run.
func TestTrainerBudgetChild(t *testing.T) {
	if os.Getenv(trainerChildEnv) != "huge-batch" {
		t.Skip("runs only as the child of TestHugeBatchRefusedInChild")
	}
	rt := openRT(t, 1)
	a := baseArgs(t)
	a.PerDeviceTrainBatchSize, a.MaxSteps = 1_000_000_000, 1
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(20, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
	if err == nil {
		_, err = tr.Train(context.Background())
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "child error: %v\n", err)
		os.Exit(3)
	}
	os.Exit(0)
}

// TestHugeBatchRefusedInChild (issue 16, row 2): per_device_train_batch_size 10^9 on 20
// examples died allocating 8 GB of sampler indices ("cannot allocate 8002732032-byte block");
// trainer.New must refuse it, naming the argument and the dataset's size.
func TestHugeBatchRefusedInChild(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the child's memory limit is set with ulimit -v")
	}
	cmd := exec.Command("sh", "-c", `ulimit -v 4194304 && exec "$0" "$@"`,
		os.Args[0], "-test.run=^TestTrainerBudgetChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), trainerChildEnv+"=huge-batch")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	out := stderr.String()
	if len(out) > 2000 {
		out = out[:2000]
	}
	if code != 3 || strings.Contains(out, "fatal error") {
		t.Fatalf("child exited %d, want a clean error (exit 3); stderr:\n%s", code, out)
	}
	for _, want := range []string{"per_device_train_batch_size", "1000000000", "20 examples", "at most 20"} {
		if !strings.Contains(out, want) {
			t.Errorf("the error lacks %q:\n%s", want, out)
		}
	}
}
