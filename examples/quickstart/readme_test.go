package main

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEShowsThisProgram: the README's library example is main.go from its embedded text
// (//go:embed) to the end of main, verbatim, so the snippet users copy is one that compiles (go
// vet builds it) and runs (TestQuickstartRunsInAUsersModule runs it in a module of its own).
func TestREADMEShowsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	i := strings.Index(s, "//go:embed")
	j := strings.Index(s[max(i, 0):], "\n}\n")
	if i < 0 || j < 0 || !strings.Contains(s[i:i+j], "func main() {") {
		t.Fatal("main.go: no //go:embed followed by func main")
	}
	body := s[i : i+j+3]
	r := string(readme)
	k := strings.Index(r, "## Library")
	if k < 0 {
		t.Fatal("README.md: no ## Library section")
	}
	r = r[k:]
	a := strings.Index(r, "```go\n")
	b := strings.Index(r[a+6:], "```")
	if a < 0 || b < 0 {
		t.Fatal("README.md: no Go code block under ## Library")
	}
	if block := r[a+6 : a+6+b]; block != body {
		t.Errorf("README.md's library example differs from examples/quickstart/main.go (//go:embed to the end of main):\n--- README\n%s\n--- main.go\n%s", block, body)
	}
}
