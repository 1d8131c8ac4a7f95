package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestSpecAcceptsEveryCausalFamily: the service fine-tunes and builds from scratch every causal
// LM family the models package has, Qwen3 and Gemma 3 included, with the vocabulary and
// positions taken from each config.
func TestSpecAcceptsEveryCausalFamily(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	in := filepath.Join(tmp, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(in, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 20, 16, 500)
	paths, err := newPathPolicy(root, []string{root, in})
	if err != nil {
		t.Fatal(err)
	}
	rt := openRuntime(t)
	toks := newTokenizerCache(nil)
	for _, c := range []struct {
		name, body string
		vocab, pos int
	}{
		{"qwen3 fine-tune", fmt.Sprintf(`{"model_name_or_path": "testdata/models/qwen3-tiny", "train_file": %q, "max_steps": 2}`, tokens), 512, -1},
		{"gemma3 fine-tune", fmt.Sprintf(`{"model_name_or_path": "testdata/models/gemma3-tiny", "train_file": %q, "max_steps": 2}`, tokens), 512, -1},
		{"qwen3 from scratch", fmt.Sprintf(`{"model_type": "qwen3", "config_overrides": "hidden_size=16,intermediate_size=32,num_hidden_layers=1,num_attention_heads=2,num_key_value_heads=1,head_dim=8,vocab_size=500,max_position_embeddings=64", "train_file": %q, "max_steps": 2}`, tokens), 500, 64},
		{"gemma3 from scratch", fmt.Sprintf(`{"model_type": "gemma3_text", "config_overrides": "hidden_size=16,intermediate_size=32,num_hidden_layers=2,num_attention_heads=2,num_key_value_heads=1,head_dim=8,vocab_size=500,max_position_embeddings=64,sliding_window=8", "train_file": %q, "max_steps": 2}`, tokens), 500, 64},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := specEnv{paths: paths, jobDir: t.TempDir(), deviceKind: rt.Kind(), numDevices: rt.NumDevices(), toks: toks, rt: rt}
			spec, err := parseSpec(t.Context(), []byte(c.body), env)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			defer spec.release()
			if spec.VocabSize != c.vocab || (c.pos > 0 && spec.MaxPos != c.pos) || spec.MaxPos <= 0 {
				t.Errorf("vocab %d, positions %d; want %d, %d", spec.VocabSize, spec.MaxPos, c.vocab, c.pos)
			}
		})
	}
}

// TestGemma3JobEndToEnd: a Gemma 3 job built from scratch trains to completion through the
// service, and the service generates from it (prompt ids; the job has no tokenizer).
func TestGemma3JobEndToEnd(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	ts := startServer(t, openRuntime(t), Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{root, tmp}, BaseDir: root})
	tokens := filepath.Join(tmp, "tokens.jsonl")
	writeTokenJSONL(t, tokens, 16, 16, 500)
	body := fmt.Sprintf(`{"model_type": "gemma3_text", "config_overrides": "hidden_size=16,intermediate_size=32,num_hidden_layers=2,num_attention_heads=2,num_key_value_heads=1,head_dim=8,vocab_size=500,max_position_embeddings=64,sliding_window=8",
		"train_file": %q, "per_device_train_batch_size": 4, "max_steps": 3, "learning_rate": 5e-3, "logging_steps": 1}`, tokens)
	var created Progress
	callJSON(t, "POST", ts.url+"/jobs", body, http.StatusCreated, &created)
	jobURL := ts.url + "/jobs/" + created.ID
	done := waitFor(t, jobURL, "done", func(p Progress) bool { return p.State.Done() })
	if done.State != StateCompleted || done.Step != 3 || done.Loss == nil {
		t.Fatalf("job ended %+v", done)
	}
	var gen struct {
		TokenIDs []int `json:"token_ids"`
	}
	code, out := call(t, "GET", jobURL+"/generate?prompt_ids=1,2,3&max_new_tokens=4", "")
	if code != http.StatusOK {
		t.Fatalf("generate: %d %s", code, out)
	}
	if err := json.Unmarshal(out, &gen); err != nil {
		t.Fatal(err)
	}
	if len(gen.TokenIDs) == 0 || len(gen.TokenIDs) > 4 {
		t.Fatalf("generated %v, want 1 to 4 new tokens", gen.TokenIDs)
	}
	t.Logf("gemma3 job: loss %.4f after 3 steps; generated token ids %v", *done.Loss, gen.TokenIDs)
}
