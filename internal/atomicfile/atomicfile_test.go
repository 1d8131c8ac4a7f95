package atomicfile

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func readDirNames(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range des {
		names = append(names, d.Name())
	}
	return names
}

// TestWriteFileReplaces: WriteFile creates and then replaces a file, leaving nothing else in the
// directory; a failing writer leaves the old content and no temporary file, with an error naming
// the file.
func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "config.json")
	for _, content := range []string{"one\n", "two, longer\n"} {
		if err := WriteFileBytes(p, []byte(content)); err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(p); err != nil || string(b) != content {
			t.Fatalf("content %q, %v; want %q", b, err, content)
		}
	}
	boom := errors.New("device gone")
	err := WriteFile(p, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return boom
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), p) {
		t.Fatalf("failing writer: %v; want the writer's error naming %s", err, p)
	}
	if b, _ := os.ReadFile(p); string(b) != "two, longer\n" {
		t.Errorf("a failed write changed the file: %q", b)
	}
	if names := readDirNames(t, dir); len(names) != 1 {
		t.Errorf("directory holds %v after a failed write, want only config.json", names)
	}
	if err := WriteFileBytes(filepath.Join(dir, "missing", "x"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("write into a missing directory: %v", err)
	}
}

// TestModesBeforeUmask: what this process creates has at most the policy's bits (the umask of
// the test process decides the rest; TestFileModesFollowUmask in package trainer sets it in a
// child process).
func TestModesBeforeUmask(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "f")
	if err := WriteFileBytes(p, []byte("x")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	di, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&^FileMode != 0 || di.Mode().Perm()&^DirMode != 0 || fi.Mode().Perm() == 0 {
		t.Errorf("file %v, directory %v", fi.Mode(), di.Mode())
	}
	if _, err := Create(p); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create over an existing file: %v, want ErrExist", err)
	}
}

// TestRenameAcrossDirectories moves a file between directories (both are fsynced).
func TestRenameAcrossDirectories(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := WriteFileBytes(filepath.Join(a, "f"), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := Rename(filepath.Join(a, "f"), filepath.Join(b, "g")); err != nil {
		t.Fatal(err)
	}
	if names := readDirNames(t, a); len(names) != 0 {
		t.Errorf("source directory holds %v", names)
	}
	if bs, err := os.ReadFile(filepath.Join(b, "g")); err != nil || string(bs) != "x" {
		t.Errorf("moved file: %q, %v", bs, err)
	}
	if err := Rename(filepath.Join(a, "nothing"), filepath.Join(b, "h")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("renaming a missing file: %v", err)
	}
}
