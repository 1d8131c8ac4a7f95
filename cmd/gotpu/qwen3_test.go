package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
)

// TestGenerateQwen3MatchesFullForward: `gotpu generate` (greedy, KV cache) on the Qwen3 fixture
// continues the prompt with exactly the argmax of a full forward pass over the whole sequence
// (`gotpu score --logits`, no cache) at every generated position.
func TestGenerateQwen3MatchesFullForward(t *testing.T) {
	dir, ref := fixture(t, "qwen3-tiny")
	out, errOut, code := runGotpu(t, nil, "generate", "--device", "go", "--model", dir,
		"--prompt_ids", "213,471,348,302,259,372", "--max_new_tokens", "30", "--json")
	if code != 0 {
		t.Fatalf("gotpu generate: exit %d\n%s", code, errOut)
	}
	var gen struct {
		Prompt    []int `json:"prompt_ids"`
		Generated []int `json:"generated_ids"`
	}
	if err := json.Unmarshal([]byte(out), &gen); err != nil {
		t.Fatalf("%v: %q", err, out)
	}
	if len(gen.Generated) < 5 {
		t.Fatalf("generated only %v", gen.Generated)
	}
	seq := append(append([]int(nil), gen.Prompt...), gen.Generated...)
	tmp := t.TempDir()
	b, _ := json.Marshal(map[string]any{"input_ids": seq})
	input, logits := filepath.Join(tmp, "seq.jsonl"), filepath.Join(tmp, "logits.safetensors")
	if err := os.WriteFile(input, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runGotpu(t, nil, "score", "--device", "go", "--model", dir, "--input", input, "--logits", logits); code != 0 {
		t.Fatalf("gotpu score: exit %d\n%s", code, errOut)
	}
	f, err := safetensors.Open(logits)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	info, _ := f.Info("logits")
	V := ref.Logits.Shape[2]
	if !equalInts(info.Shape, []int{1, len(seq), V}) {
		t.Fatalf("logits shape %v", info.Shape)
	}
	raw, _ := f.Bytes("logits")
	vals := make([]float32, len(raw)/4)
	if err := safetensors.DecodeFloat32(info.DType, raw, vals); err != nil {
		t.Fatal(err)
	}
	for i, tok := range gen.Generated {
		pos := len(gen.Prompt) - 1 + i
		row := vals[pos*V : (pos+1)*V]
		best := 0
		for j, v := range row {
			if v > row[best] {
				best = j
			}
		}
		if best != tok {
			t.Errorf("generated token %d is %d, the full forward pass's argmax is %d", i, tok, best)
		}
	}
	t.Logf("gotpu generate on qwen3-tiny: %v", gen.Generated)
}
