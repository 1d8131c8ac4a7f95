//go:build linux

package trainer_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/gotpu/gotpu/checkpoint"
	"github.com/gotpu/gotpu/trainer"
)

// TestTrainENOSPC: training with a checkpoint per step into a 2 MiB tmpfs fills it; Train
// returns the ENOSPC error, the latest committed checkpoint still verifies and resumes, and no
// temporary directory is left.
func TestTrainENOSPC(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=2m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	rt := openRT(t, 1)
	a := baseArgs(t)
	a.OutputDir = filepath.Join(mnt, "out")
	a.MaxSteps, a.SaveSteps, a.SaveStrategy = 40, 1, "steps"
	tr, err := trainer.New(a, tinyGPT2(t, rt), counting(32, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tr.Train(context.Background())
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Train into a full filesystem: %v, want ENOSPC", err)
	}
	t.Log(err)
	last, err := checkpoint.Latest(a.OutputDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Open(last.Dir, "model.safetensors", "optimizer.safetensors", "trainer_state.json"); err != nil {
		t.Fatal(err)
	}
	des, _ := os.ReadDir(a.OutputDir)
	for _, d := range des {
		if strings.Contains(d.Name(), ".tmp-") {
			t.Errorf("leftover %s", d.Name())
		}
	}
	// The run resumes from it (no further saves: the disk is still full).
	b := a
	b.MaxSteps, b.SaveStrategy, b.ResumeFromCheckpoint = last.Step+2, "no", "true"
	tr, err = trainer.New(b, tinyGPT2(t, rt), counting(32, 0), nil, trainer.Options{Runtime: rt, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tr.Train(context.Background()); err != nil || out.GlobalStep != last.Step+2 {
		t.Fatalf("resume after ENOSPC: %+v, %v", out, err)
	}
	t.Logf("ENOSPC after checkpoint-%d; resumed from it", last.Step)
}
