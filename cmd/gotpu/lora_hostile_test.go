package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestAdapterRegexAtDepthLimit: an adapter whose target_modules (or exclude_modules) expression
// nests 999 groups deep, which RE2 (maximum nesting depth 1000) compiles bare but not anchored as
// PEFT's re.fullmatch, is refused by merge, score, generate and train with exit 1 and an error
// naming adapter_config.json, the field and the problem: no panic trace (merge used to die in
// peft.Targets' regexp.MustCompile after the config had been validated bare), and merge leaves
// no output.
func TestAdapterRegexAtDepthLimit(t *testing.T) {
	deep := strings.Repeat("(", 999) + "a" + strings.Repeat(")", 999)
	src := t.TempDir()
	base := baseModelDir("gpt2-tiny")
	batch := filepath.Join(src, "batch.jsonl")
	writeBatchJSONL(t, "gpt2-tiny", batch)
	for _, field := range []string{"target_modules", "exclude_modules"} {
		adapter := adapterVariant(t, filepath.Join(src, field), func(c map[string]any) { c[field] = deep }, "adapter_model.safetensors")
		parent := t.TempDir()
		for _, c := range []struct {
			name string
			args []string
		}{
			{"merge", []string{"merge", "--model", base, "--adapter", adapter, "--output", filepath.Join(parent, "merged")}},
			{"score", []string{"score", "--model", base, "--adapter_name_or_path", adapter, "--input", batch}},
			{"generate", []string{"generate", "--model", base, "--adapter_name_or_path", adapter, "--prompt_ids", "1,2,3", "--max_new_tokens", "2"}},
			{"train", []string{"train", "--model_name_or_path", base, "--adapter_name_or_path", adapter, "--use_peft",
				"--train_file", batch, "--max_steps", "1", "--output_dir", filepath.Join(parent, "out")}},
		} {
			stdout, stderr, code := runGotpu(t, nil, append(c.args, "--device", "go")...)
			if code != 1 || stdout != "" {
				t.Errorf("%s with %s nested 999 deep: exit %d, stdout %q; want 1 and nothing", c.name, field, code, stdout)
			}
			for _, want := range []string{"adapter_config.json: LoraConfig." + field + ": ", "nests too deeply"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("%s with %s nested 999 deep: stderr lacks %q:\n%.600s", c.name, field, want, stderr)
				}
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") || len(stderr) > 1500 {
				t.Errorf("%s with %s nested 999 deep: stderr (%d bytes) is not one clear error:\n%.600s", c.name, field, len(stderr), stderr)
			}
		}
		if left := dirNames(t, parent); len(left) != 0 {
			t.Errorf("%s: the refused runs left %v", field, left)
		}
	}
}
