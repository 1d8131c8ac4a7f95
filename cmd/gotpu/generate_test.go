package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenerateOptionErrors runs the gotpu binary with decoding flags no generation can use: each
// is a usage error (exit status 2) naming the flag, reported before a device is opened or the
// model loaded. Before the library validated options, --max_new_tokens -5 failed with a GoMLX
// shape error and the others generated silently. A bad value in the model's
// generation_config.json is not a usage error (exit 1) and names the file and field; a flag
// that overrides it makes the command work.
func TestGenerateOptionErrors(t *testing.T) {
	dir, _ := fixture(t, "llama-tiny")
	base := []string{"generate", "--device", "go", "--model", dir, "--prompt_ids", "1,5,9"}
	for _, c := range []struct {
		args []string
		flag string
	}{
		{[]string{"--max_new_tokens", "-5"}, "--max_new_tokens"},
		{[]string{"--max_new_tokens", "0"}, "--max_new_tokens"},
		{[]string{"--top_k", "-3"}, "--top_k"},
		{[]string{"--temperature", "-1", "--do_sample"}, "--temperature"},
		{[]string{"--temperature", "0", "--do_sample"}, "--temperature"},
		{[]string{"--top_p", "0", "--do_sample"}, "--top_p"},
		{[]string{"--top_p", "1.5"}, "--top_p"},
		{[]string{"--repetition_penalty", "-2"}, "--repetition_penalty"},
	} {
		out, errOut, code := runGotpu(t, nil, append(base, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.flag) || out != "" {
			t.Errorf("gotpu generate %v: exit %d, stdout %q, stderr %q; want exit 2 and a message naming %s", c.args, code, out, errOut, c.flag)
		}
		t.Logf("%v: %s", c.args, strings.TrimSpace(errOut))
	}

	model := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(model, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(model, "generation_config.json"), []byte(`{"do_sample": true, "top_k": -3}`), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"generate", "--device", "go", "--model", model, "--prompt_ids", "1,5,9", "--max_new_tokens", "3"}
	out, errOut, code := runGotpu(t, nil, args...)
	if code != 1 || !strings.Contains(errOut, "generation_config.json") || !strings.Contains(errOut, "top_k") || out != "" {
		t.Errorf("top_k -3 in generation_config.json: exit %d, stdout %q, stderr %q; want exit 1 naming the file and top_k", code, out, errOut)
	}
	t.Log(strings.TrimSpace(errOut))
	if out, errOut, code := runGotpu(t, nil, append(args, "--top_k", "5")...); code != 0 || len(strings.Fields(out)) != 3 {
		t.Errorf("--top_k 5 over the file's -3: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
