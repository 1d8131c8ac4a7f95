package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratePositionLimit: prompt + max_new_tokens past the model's positions (qwen3-tiny: 64)
// is refused before generating, naming the limit and the largest max_new_tokens that fits:
// exit 2 for --max_new_tokens or a prompt that fills the positions, exit 1 naming
// generation_config.json when the value came from there. The largest value that fits
// generates exactly that many tokens (before, gotpu cut the generation short silently).
func TestGeneratePositionLimit(t *testing.T) {
	dir := tokenizerModelDir(t)
	run := func(args ...string) (string, string, int) {
		return runGotpu(t, nil, append([]string{"generate", "--device", "go", "--model", dir}, args...)...)
	}
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"--prompt_ids", "1,2,3", "--max_new_tokens", "62"}, 2, []string{"--max_new_tokens 62", "64 positions", "--max_new_tokens 61 or less"}},
		{[]string{"--prompt", "abc", "--max_new_tokens", "100"}, 2, []string{"--max_new_tokens 100", "64 positions", "--max_new_tokens 61 or less"}},
		{[]string{"--prompt", strings.Repeat("x", 64)}, 2, []string{"prompt is 64 tokens", "64 positions", "63 tokens or fewer"}},
		{[]string{"--chat", "--prompt", strings.Repeat("x", 40), "--max_new_tokens", "20"}, 2, []string{"--max_new_tokens 20", "64 positions", "or less"}},
	} {
		out, errOut, code := run(c.args...)
		if code != c.code || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit %d", c.args, code, out, errOut, c.code)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, errOut)
			}
		}
		t.Logf("%v: %s", c.args, strings.TrimSpace(errOut))
	}
	out, errOut, code := run("--prompt_ids", "1,2,3", "--max_new_tokens", "61", "--eos_token_id", "none")
	if n := len(strings.Fields(out)); code != 0 || n != 61 {
		t.Errorf("--max_new_tokens 61 after 3 prompt tokens: exit %d, %d tokens, stderr %s", code, n, errOut)
	}

	writeFile(t, filepath.Join(dir, "generation_config.json"), `{"eos_token_id": 258, "max_new_tokens": 100}`)
	_, errOut, code = run("--prompt", "abc")
	if code != 1 || !strings.Contains(errOut, "generation_config.json's max_new_tokens") || !strings.Contains(errOut, "--max_new_tokens 61 or less") {
		t.Errorf("max_new_tokens 100 from generation_config.json: exit %d, stderr %s", code, errOut)
	}
	t.Log(strings.TrimSpace(errOut))
}

// TestGeneratePromptTokenizer: --prompt without --chat needs a tokenizer: a model directory
// without tokenizer.json is an error saying to give --tokenizer, and --tokenizer supplies it;
// --tokenizer with --prompt_ids, and --prompt with --prompt_ids, are usage errors.
func TestGeneratePromptTokenizer(t *testing.T) {
	bare := filepath.Join("..", "..", "testdata", "models", "qwen3-tiny")
	tokDir := tokenizerModelDir(t)
	_, errOut, code := runGotpu(t, nil, "generate", "--device", "go", "--model", bare, "--prompt", "ab")
	if code != 1 || !strings.Contains(errOut, "no tokenizer.json") || !strings.Contains(errOut, "--tokenizer") {
		t.Errorf("no tokenizer: exit %d, stderr %s", code, errOut)
	}
	t.Log(strings.TrimSpace(errOut))
	out, errOut, code := runGotpu(t, nil, "generate", "--device", "go", "--model", bare, "--prompt", "ab", "--tokenizer", filepath.Join(tokDir, "tokenizer.json"),
		"--max_new_tokens", "3", "--eos_token_id", "none", "--json")
	var res textResult
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
		t.Fatalf("--tokenizer: exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	// The byte-level tokenizer: one token per byte, "a" = 97.
	if !equalInts(res.PromptIDs, []int{97, 98}) || len(res.GeneratedIDs) != 3 || res.Prompt != "ab" {
		t.Errorf("--prompt ab --tokenizer: %+v", res)
	}
	t.Logf("--prompt ab --tokenizer: %s", strings.TrimSpace(out))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--prompt_ids", "1,2", "--tokenizer", tokDir}, "--tokenizer needs --prompt TEXT or --chat"},
		{[]string{"--prompt_ids", "1,2", "--prompt", "ab"}, "--prompt and --prompt_ids"},
	} {
		_, errOut, code := runGotpu(t, nil, append([]string{"generate", "--device", "go", "--model", tokDir}, c.args...)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %s; want exit 2 and %q", c.args, code, errOut, c.want)
		}
	}
}
