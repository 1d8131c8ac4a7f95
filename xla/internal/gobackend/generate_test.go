package gobackend

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestGeneratedOpsUpToDate regenerates the recording methods from the GoMLX version in go.mod and
// compares them with gen_ops.go: every operation of backends.StandardOps and CollectiveOps must
// be recorded by this package (not fall through to notimplemented.Builder).
func TestGeneratedOpsUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the generator with go run")
	}
	out := filepath.Join(t.TempDir(), "gen_ops.go")
	cmd := exec.Command("go", "run", "./internal/genops", "-out", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./internal/genops: %v\n%s", err, msg)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("gen_ops.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("gen_ops.go is stale: run go generate ./xla/internal/gobackend")
	}
}
