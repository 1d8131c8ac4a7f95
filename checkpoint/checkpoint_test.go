package checkpoint

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// sample is a small snapshot with a valid safetensors file.
func sample(step int) Snapshot {
	st := safetensorsFile(`{"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, []byte{1, 2, 3, byte(step)})
	return Snapshot{Step: step, Files: []File{
		{Name: "model.safetensors", Data: st},
		{Name: "trainer_state.json", Data: []byte(`{"global_step": ` + strconv.Itoa(step) + "}\n")},
		{Name: "scheduler.json", WriteTo: func(w io.Writer) error { _, err := io.WriteString(w, "{}\n"); return err }},
	}}
}

func safetensorsFile(js string, data []byte) []byte {
	b := make([]byte, 8, 8+len(js)+len(data))
	n := uint64(len(js))
	for i := range 8 {
		b[i] = byte(n >> (8 * i))
	}
	return append(append(b, js...), data...)
}

func TestCommitListOpen(t *testing.T) {
	out := t.TempDir()
	for _, s := range []int{5, 10, 2} {
		if _, err := Commit(out, sample(s)); err != nil {
			t.Fatal(err)
		}
	}
	// Foreign and unfinished directories are not listed.
	os.Mkdir(filepath.Join(out, "checkpoint-99"), 0o755)
	os.Mkdir(filepath.Join(out, "checkpoint-100.tmp-abc"), 0o755)
	l, err := List(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(l) != 3 || l[0].Step != 2 || l[1].Step != 5 || l[2].Step != 10 {
		t.Fatalf("List = %v", l)
	}
	last, err := Latest(out)
	if err != nil || last.Step != 10 {
		t.Fatalf("Latest = %v, %v", last, err)
	}
	ck, err := Open(last.Dir, "trainer_state.json")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ck.ReadFile("trainer_state.json")
	if err != nil || string(b) != "{\"global_step\": 10}\n" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
	if _, err := Latest(t.TempDir()); !errors.Is(err, ErrNoCheckpoint) {
		t.Fatalf("Latest of an empty dir: %v", err)
	}
}

func TestResaveKeepsOldUntilCommitted(t *testing.T) {
	out := t.TempDir()
	if _, err := Commit(out, sample(3)); err != nil {
		t.Fatal(err)
	}
	// A failing re-save leaves the old checkpoint intact and no tmp behind.
	bad := sample(3)
	bad.Files = append(bad.Files, File{Name: "boom", WriteTo: func(io.Writer) error { return errors.New("injected") }})
	if _, err := Commit(out, bad); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("Commit with a failing file: %v", err)
	}
	assertOnly(t, out, "checkpoint-3")
	if _, err := Open(filepath.Join(out, "checkpoint-3")); err != nil {
		t.Fatal(err)
	}
	s := sample(3)
	s.Files[1].Data = []byte("new\n")
	if _, err := Commit(out, s); err != nil {
		t.Fatal(err)
	}
	assertOnly(t, out, "checkpoint-3")
	ck, err := Open(filepath.Join(out, "checkpoint-3"))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := ck.ReadFile("trainer_state.json"); string(b) != "new\n" {
		t.Fatalf("re-save content %q", b)
	}
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range des {
		got = append(got, d.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
}

// copyDir copies a flat directory.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Mkdir(to, 0o755); err != nil {
		t.Fatal(err)
	}
	des, _ := os.ReadDir(from)
	for _, d := range des {
		b, err := os.ReadFile(filepath.Join(from, d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, d.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCleanupCrashStates(t *testing.T) {
	out := t.TempDir()
	d1, _ := Commit(out, sample(1))
	d2, _ := Commit(out, sample(2))
	d3, _ := Commit(out, sample(3))
	// 1: crash mid-write of step 4 (no marker): removed.
	copyDir(t, d1, filepath.Join(out, "checkpoint-4.tmp-aa"))
	os.Remove(filepath.Join(out, "checkpoint-4.tmp-aa", CommitFile))
	// 2: crash after the marker of step 5, before the rename: rolled forward.
	s5 := filepath.Join(out, "checkpoint-5")
	Commit(out, sample(5))
	os.Rename(s5, s5+".tmp-bb")
	// 3: crash in a re-save of step 2 after moving the old aside, before the new tmp was committed:
	// the old one is restored.
	os.Rename(d2, d2+".old-cc")
	copyDir(t, d1, d2+".tmp-dd")
	os.Remove(filepath.Join(d2+".tmp-dd", CommitFile))
	// 4: crash in retention of step 1: removed.
	os.Rename(d1, d1+".del-ee")
	// 5: crash in a re-save of step 3 after the new tmp was committed and the old moved aside:
	// the new one rolls forward, the old one is removed.
	s := sample(3)
	s.Files[1].Data = []byte("new3\n")
	Commit(t.TempDir(), s) // not used; build the new one in place below
	os.Rename(d3, d3+".old-ff")
	tmpOut := t.TempDir()
	nd, _ := Commit(tmpOut, s)
	copyDir(t, nd, d3+".tmp-11")

	did, err := Cleanup(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(did)
	assertOnly(t, out, "checkpoint-2", "checkpoint-3", "checkpoint-5")
	for _, n := range []string{"checkpoint-2", "checkpoint-3", "checkpoint-5"} {
		if _, err := Open(filepath.Join(out, n)); err != nil {
			t.Fatal(err)
		}
	}
	ck, _ := Open(d3)
	if b, _ := ck.ReadFile("trainer_state.json"); string(b) != "new3\n" {
		t.Fatalf("checkpoint-3 holds %q, want the committed re-save", b)
	}
}

func TestPrune(t *testing.T) {
	out := t.TempDir()
	for s := 1; s <= 5; s++ {
		Commit(out, sample(s))
	}
	removed, err := Prune(out, 2, filepath.Join(out, "checkpoint-1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Log(removed)
	// HF keeps the best in addition to the newest; the limit counts it.
	assertOnly(t, out, "checkpoint-1", "checkpoint-5")
	for s := 6; s <= 7; s++ {
		Commit(out, sample(s))
	}
	if _, err := Prune(out, 1, "checkpoint-1"); err != nil {
		t.Fatal(err)
	}
	assertOnly(t, out, "checkpoint-1", "checkpoint-7")
	if _, err := Prune(out, 1); err != nil {
		t.Fatal(err)
	}
	assertOnly(t, out, "checkpoint-7")
}

func TestWriterAsync(t *testing.T) {
	out := t.TempDir()
	w, err := NewWriter(WriterConfig{OutputDir: out, SaveTotalLimit: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	release := make(chan struct{})
	var order []string
	s1 := sample(1)
	s1.Files = append(s1.Files, File{Name: "slow", WriteTo: func(io.Writer) error {
		<-release
		order = append(order, "first written")
		return nil
	}})
	if err := w.Save(ctx, s1); err != nil {
		t.Fatal(err)
	}
	// Save returned while the first write is blocked: training goes on. A second Save waits for it.
	saved := make(chan error)
	go func() { saved <- w.Save(ctx, sample(2)) }()
	close(release)
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	order = append(order, "second queued")
	for s := 3; s <= 4; s++ {
		if err := w.Save(ctx, sample(s)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if strings.Join(order, ",") != "first written,second queued" {
		t.Fatalf("order %v", order)
	}
	assertOnly(t, out, "checkpoint-3", "checkpoint-4")
	if len(w.Committed()) != 4 {
		t.Fatalf("Committed = %v", w.Committed())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Save(ctx, sample(9)); err == nil {
		t.Fatal("Save after Close accepted")
	}
}

func TestWriterErrorsSurface(t *testing.T) {
	out := t.TempDir()
	w, err := NewWriter(WriterConfig{OutputDir: out})
	if err != nil {
		t.Fatal(err)
	}
	bad := sample(1)
	bad.Files = append(bad.Files, File{Name: "x", WriteTo: func(io.Writer) error { return errors.New("disk on fire") }})
	if err := w.Save(context.Background(), bad); err != nil {
		t.Fatal(err)
	}
	// The error of the background write comes back on the next call, and only once.
	if err := w.Save(context.Background(), sample(2)); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("next Save: %v", err)
	}
	if err := w.Save(context.Background(), sample(2)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	assertOnly(t, out, "checkpoint-2")

	// Errors of the last save come back from Close.
	w, _ = NewWriter(WriterConfig{OutputDir: out})
	w.Save(context.Background(), bad)
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("Close: %v", err)
	}
}

func TestWriterBytesAtSaveTime(t *testing.T) {
	// The writer writes what the snapshot holds; the trainer stages copies, so a mutation of the
	// live buffer after Save is not seen. Here the live buffer is mutated right after Save.
	out := t.TempDir()
	w, _ := NewWriter(WriterConfig{OutputDir: out})
	live := []byte{1, 2, 3, 4}
	staged := bytes.Clone(live)
	release := make(chan struct{})
	s := Snapshot{Step: 1, Files: []File{{Name: "w", WriteTo: func(wr io.Writer) error {
		<-release
		_, err := wr.Write(staged)
		return err
	}}}}
	if err := w.Save(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	live[0] = 99
	close(release)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ck, err := Open(filepath.Join(out, "checkpoint-1"))
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := ck.ReadFile("w"); !bytes.Equal(b, []byte{1, 2, 3, 4}) {
		t.Fatalf("wrote %v", b)
	}
}

// TestParseDirName accepts exactly the names DirName writes.
func TestParseDirName(t *testing.T) {
	for _, n := range []int{0, 7, 1234567} {
		if got, ok := ParseDirName(DirName(n)); !ok || got != n {
			t.Errorf("ParseDirName(%q) = %d, %v", DirName(n), got, ok)
		}
	}
	for _, name := range []string{"checkpoint-", "checkpoint-02", "checkpoint--1", "checkpoint-+1", "checkpoint-1.tmp-ab",
		"x/checkpoint-1", "checkpoint-1/", "checkpoint-99999999999999999999999", "best"} {
		if n, ok := ParseDirName(name); ok {
			t.Errorf("ParseDirName(%q) = %d, accepted", name, n)
		}
	}
}
