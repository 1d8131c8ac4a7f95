package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
)

// fixture reads the parts of a model fixture's reference.json the CLI tests need.
func fixture(t *testing.T, name string) (dir string, ref struct {
	InputIDs      [][]int         `json:"input_ids"`
	AttentionMask [][]int         `json:"attention_mask"`
	TokenTypeIDs  [][]int         `json:"token_type_ids"`
	Labels        json.RawMessage `json:"labels"`
	Loss          float64         `json:"loss"`
	Logits        struct {
		Shape []int `json:"shape"`
	} `json:"logits"`
}) {
	dir = filepath.Join("..", "..", "testdata", "models", name)
	b, err := os.ReadFile(filepath.Join(dir, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	return dir, ref
}

// `gotpu score` reproduces each fixture's loss (mean of the per-line losses, every row having the
// same number of scored tokens) and writes the logits file with the reference shape.
func TestScoreCommand(t *testing.T) {
	for _, name := range []string{"gpt2-tiny", "llama-tiny", "bert-tiny", "gemma3-tiny", "qwen3-tiny"} {
		t.Run(name, func(t *testing.T) {
			dir, ref := fixture(t, name)
			var labels []int
			_ = json.Unmarshal(ref.Labels, &labels)
			var in strings.Builder
			for i, row := range ref.InputIDs {
				e := map[string]any{"input_ids": row}
				if labels != nil {
					e["attention_mask"], e["token_type_ids"], e["labels"] = ref.AttentionMask[i], ref.TokenTypeIDs[i], labels[i]
				}
				b, _ := json.Marshal(e)
				in.Write(append(b, '\n'))
			}
			tmp := t.TempDir()
			input := filepath.Join(tmp, "ids.jsonl")
			if err := os.WriteFile(input, []byte(in.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			logits := filepath.Join(tmp, "logits.safetensors")
			var out, errOut bytes.Buffer
			err := runScore(context.Background(), []string{"--device", "go", "--model", dir, "--input", input, "--logits", logits}, &out, &errOut)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			sum := 0.0
			for _, l := range lines {
				var r struct{ Loss float64 }
				if err := json.Unmarshal([]byte(l), &r); err != nil {
					t.Fatalf("line %q: %v", l, err)
				}
				sum += r.Loss
			}
			if len(lines) != len(ref.InputIDs) || math.Abs(sum/float64(len(lines))-ref.Loss) > 1e-5 {
				t.Errorf("%d lines, mean loss %.8f, want %d and %.8f", len(lines), sum/float64(len(lines)), len(ref.InputIDs), ref.Loss)
			}
			f, err := safetensors.Open(logits)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if info, ok := f.Info("logits"); !ok || info.DType != safetensors.F32 || !equalInts(info.Shape, ref.Logits.Shape) {
				t.Errorf("logits tensor %+v, want F32 %v", info, ref.Logits.Shape)
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestGenerateCommand(t *testing.T) {
	dir, _ := fixture(t, "llama-tiny")
	var out, errOut bytes.Buffer
	args := []string{"--device", "go", "--model", dir, "--prompt_ids", "1, 5,9 3", "--max_new_tokens", "6", "--eos_token_id", "none", "--json"}
	if err := runGenerate(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var res struct {
		Prompt    []int `json:"prompt_ids"`
		Generated []int `json:"generated_ids"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if !equalInts(res.Prompt, []int{1, 5, 9, 3}) || len(res.Generated) != 6 {
		t.Errorf("%+v", res)
	}
	// Text output: the same greedy tokens, space-separated; sampling is reproducible by seed.
	out.Reset()
	if err := runGenerate(context.Background(), args[:len(args)-1], &out, &errOut); err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(out.String()); len(got) != 6 {
		t.Errorf("text output %q", out.String())
	}
	for _, bad := range [][]string{
		{"--model", dir},
		{"--model", dir, "--prompt", "hello"},
		{"--model", dir, "--prompt_ids", "1,x"},
		{"--prompt_ids", "1"},
	} {
		if err := runGenerate(context.Background(), append([]string{"--device", "go"}, bad...), &out, &errOut); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	bert, _ := fixture(t, "bert-tiny")
	err := runGenerate(context.Background(), []string{"--device", "go", "--model", bert, "--prompt_ids", "101"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "not a causal language model") {
		t.Errorf("bert: %v", err)
	}
}
