package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runGotpuStdin runs the binary with stdin and returns stdout, stderr and the exit status.
func runGotpuStdin(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, gotpuBin, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// TestTokenizeCLI: encode with and without special tokens, pairs, and decode, in the documented
// JSON-lines formats; a bad line is an error naming it.
func TestTokenizeCLI(t *testing.T) {
	bert := filepath.Join("..", "..", "testdata", "tokenizers", "bert-base-uncased", "tokenizer.json.gz")
	out, errOut, code := runGotpuStdin(t, `{"text": "Hello world", "text_pair": "again"}`+"\n",
		"tokenize", "--tokenizer", bert, "--add-special-tokens", "--pair")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var enc struct {
		IDs     []int    `json:"ids"`
		Tokens  []string `json:"tokens"`
		Offsets [][2]int `json:"offsets"`
	}
	if err := json.Unmarshal([]byte(out), &enc); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	wantTokens := []string{"[CLS]", "hello", "world", "[SEP]", "again", "[SEP]"}
	if strings.Join(enc.Tokens, " ") != strings.Join(wantTokens, " ") || len(enc.IDs) != 6 || enc.Offsets[2] != [2]int{6, 11} {
		t.Fatalf("encoding = %+v", enc)
	}
	ids, _ := json.Marshal(map[string]any{"ids": enc.IDs})
	out, errOut, code = runGotpuStdin(t, string(ids)+"\n", "tokenize", "--tokenizer", bert, "--decode", "--skip_special_tokens")
	if code != 0 || strings.TrimSpace(out) != `{"text":"hello world again"}` {
		t.Fatalf("decode: exit %d, %q, %s", code, out, errOut)
	}
	_, errOut, code = runGotpuStdin(t, "{\"text\": \"ok\"}\nnot json\n", "tokenize", "--tokenizer", bert)
	if code != 1 || !strings.Contains(errOut, "line 2") {
		t.Fatalf("bad line: exit %d, %s", code, errOut)
	}
}
