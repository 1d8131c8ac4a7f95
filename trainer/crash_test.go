package trainer_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/trainer"
)

const crashChildEnv = "GOTPU_CRASH_CHILD_OUTPUT_DIR"

// TestCrashChild is the training process of TestCrashHarness (it runs only when re-executed
// with crashChildEnv set): 12 steps of a tiny GPT-2 with dropout, a checkpoint after every step,
// resuming from the latest committed checkpoint if there is one.
func TestCrashChild(t *testing.T) {
	out := os.Getenv(crashChildEnv)
	if out == "" {
		t.Skip("the child process of TestCrashHarness")
	}
	rt := openRT(t, 1)
	c := resumeCase{perDevice: 4, accumulation: 1, dropout: 0.1}
	a := c.args(out)
	a.MaxSteps, a.SaveSteps = 12, 1
	// The single writer cleans up a crashed save first, so "latest" sees a rolled-forward one.
	if _, err := checkpoint.Cleanup(out); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Latest(out); err == nil {
		a.ResumeFromCheckpoint = "true"
	}
	tr, err := trainer.New(a, gpt2With(t, rt, c.dropout), counting(40, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Train(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func runChild(t *testing.T, out string, kill time.Duration) (killed bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+out)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	if kill > 0 {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("child: %v\n%s", err, buf.String())
			}
			return false
		case <-time.After(kill):
			cmd.Process.Kill() // SIGKILL: no cleanup of any kind runs in the child
			<-done
			return true
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("child: %v\n%s", err, buf.String())
	}
	return false
}

// TestCrashHarness: training processes are SIGKILLed at seeded random moments (a checkpoint is
// written after every step, so most kills land in a save); after each kill every listed
// checkpoint verifies, and resuming reaches bitwise the same final parameters as an uninterrupted
// run, with no leftovers of the crashed save.
func TestCrashHarness(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		t.Skip("in the child")
	}
	trials := 50
	if testing.Short() || raceEnabled {
		trials = 5
	}
	ref := t.TempDir()
	start := time.Now()
	runChild(t, ref, 0)
	span := time.Since(start)
	want, err := os.ReadFile(filepath.Join(ref, "checkpoint-12", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	committed := regexp.MustCompile(`^checkpoint-[0-9]+$`)
	rng := rand.New(rand.NewPCG(2026, 12))
	passes, killedRuns, midSave := 0, 0, 0
	var resumedFrom []int
	for trial := range trials {
		out := t.TempDir()
		kill := time.Duration(rng.Int64N(int64(span)*4/5)) + time.Millisecond
		if runChild(t, out, kill) {
			killedRuns++
			if ms, _ := filepath.Glob(filepath.Join(out, "checkpoint-*.*-*")); len(ms) > 0 {
				midSave++
			}
		}
		l, err := checkpoint.List(out)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l {
			if _, err := checkpoint.Open(e.Dir, "model.safetensors", "optimizer.safetensors", "trainer_state.json"); err != nil {
				t.Fatalf("trial %d: committed checkpoint does not load: %v", trial, err)
			}
		}
		from := 0
		if len(l) > 0 {
			from = l[len(l)-1].Step
		}
		resumedFrom = append(resumedFrom, from)
		runChild(t, out, 0)
		got, err := os.ReadFile(filepath.Join(out, "checkpoint-12", "model.safetensors"))
		if err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		des, _ := os.ReadDir(out)
		for _, d := range des {
			if d.IsDir() && !committed.MatchString(d.Name()) {
				t.Errorf("trial %d: leftover %s after the restart", trial, d.Name())
			}
		}
		if !bytes.Equal(got, want) {
			t.Errorf("trial %d (killed after %v, resumed from step %d): final model differs from the uninterrupted run", trial, kill, from)
			continue
		}
		passes++
	}
	t.Logf("crash harness: %d trials, %d killed mid-run (%d inside a save: a tmp/old directory was left), %d passes; resumed from steps %v",
		trials, killedRuns, midSave, passes, resumedFrom)
	if passes != trials {
		t.Fatalf("%d of %d trials failed", trials-passes, trials)
	}
}
