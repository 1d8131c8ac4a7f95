//go:build linux

package checkpoint

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
)

// TestENOSPC saves into a 2 MiB tmpfs: a save that does not fit fails with ENOSPC, the previous
// checkpoint stays loadable and nothing of the failed save is left behind.
func TestENOSPC(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=2m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
	})
	out := filepath.Join(mnt, "out")
	if _, err := Commit(out, sample(1)); err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(WriterConfig{OutputDir: out})
	if err != nil {
		t.Fatal(err)
	}
	big := sample(2)
	big.Files = append(big.Files, File{Name: "optimizer.safetensors", Data: make([]byte, 3<<20)})
	if err := w.Save(t.Context(), big); err != nil {
		t.Fatal(err)
	}
	err = w.Close()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("save into a full filesystem: %v, want ENOSPC", err)
	}
	t.Log(err)
	assertOnly(t, out, "checkpoint-1")
	if _, err := Open(filepath.Join(out, "checkpoint-1"), "model.safetensors"); err != nil {
		t.Fatal(err)
	}
	if l, _ := List(out); len(l) != 1 || l[0].Step != 1 {
		t.Fatalf("List = %v", l)
	}
}
