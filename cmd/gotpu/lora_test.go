package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
)

// loraFixtureRun is a LoRA fixture's 3-step AdamW run (testdata/models/lora/*/reference.json).
type loraFixtureRun struct {
	Losses       []float64 `json:"losses"`
	AdapterAfter struct {
		Values map[string]json.RawMessage `json:"values"`
	} `json:"adapter_after"`
}

var loraFixtureBases = map[string]string{"gpt2-lora-tiny": "gpt2-tiny", "llama-lora-tiny": "llama-tiny"}

func loraFixtureDir(name string) string {
	return filepath.Join("..", "..", "testdata", "models", "lora", name)
}

// flatten reads a nested JSON array of numbers into a flat slice.
func flatten(t *testing.T, raw json.RawMessage) []float64 {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var out []float64
	var walk func(any)
	walk = func(x any) {
		switch y := x.(type) {
		case []any:
			for _, e := range y {
				walk(e)
			}
		case float64:
			out = append(out, y)
		default:
			t.Fatalf("unexpected %T in a tensor", x)
		}
	}
	walk(v)
	return out
}

// TestTrainLoRAReproducesFixtures is the LoRA acceptance run: `gotpu train --use_peft
// --adapter_name_or_path FIXTURE` for 3 steps on the fixture's batch reproduces PEFT's adapter
// tensors elementwise (max |d| ≤ 1e-6: a forgotten weight decay moves each element by ~1.5e-5)
// and the logged losses, with and without clipping, and writes the adapter in PEFT's format only.
func TestTrainLoRAReproducesFixtures(t *testing.T) {
	variants := map[string][]string{
		"adamw":       {"--max_grad_norm", "0"},
		"adamw_clip1": {"--max_grad_norm", "1.0"},
	}
	for fixture, base := range loraFixtureBases {
		raw, err := os.ReadFile(filepath.Join(loraFixtureDir(fixture), "reference.json"))
		if err != nil {
			t.Fatal(err)
		}
		var all map[string]json.RawMessage
		if err := json.Unmarshal(raw, &all); err != nil {
			t.Fatal(err)
		}
		for variant, flags := range variants {
			t.Run(fixture+"/"+variant, func(t *testing.T) {
				var want loraFixtureRun
				if err := json.Unmarshal(all[variant], &want); err != nil {
					t.Fatal(err)
				}
				dir := t.TempDir()
				batchFile := filepath.Join(dir, "batch.jsonl")
				n := writeBatchJSONL(t, base, batchFile)
				out := filepath.Join(dir, "out")
				args := append(fixtureTrainArgs(base, batchFile, n, out),
					"--adapter_name_or_path", loraFixtureDir(fixture), "--use_peft", "--lr_scheduler_type", "constant")
				args = append(args, flags...)
				_, errOut, code := runGotpu(t, nil, args...)
				if code != 0 {
					t.Fatalf("gotpu train: exit %d\n%s", code, errOut)
				}
				checkLosses(t, filepath.Join(out, "trainer_state.json"), want.Losses)
				adapterFile := filepath.Join(out, "adapter_model.safetensors")
				got, shapes, err := safetensors.ReadFloat32File(adapterFile)
				if err != nil {
					t.Fatal(err)
				}
				if f, err := safetensors.Open(adapterFile); err != nil || f.Metadata()["format"] != "pt" {
					t.Errorf("%s: metadata not {\"format\": \"pt\"} (%v)", adapterFile, err)
				} else {
					f.Close()
				}
				var names []string
				for name := range want.AdapterAfter.Values {
					names = append(names, name)
				}
				sort.Strings(names)
				var gotNames []string
				for name := range got {
					gotNames = append(gotNames, name)
				}
				sort.Strings(gotNames)
				if !slices.Equal(names, gotNames) {
					t.Fatalf("saved tensors %v, PEFT's %v", gotNames, names)
				}
				worst := 0.0
				for _, name := range names {
					w := flatten(t, want.AdapterAfter.Values[name])
					g := got[name]
					if len(g) != len(w) {
						t.Fatalf("%s: %d values (shape %v), reference %d", name, len(g), shapes[name], len(w))
					}
					for i := range w {
						worst = max(worst, math.Abs(float64(g[i])-w[i]))
					}
				}
				if worst > 1e-6 {
					t.Errorf("adapter after 3 steps: max |d| %.3g > 1e-6", worst)
				}
				t.Logf("adapter after 3 steps: max |d| %.3g over %d tensors", worst, len(names))
				// The adapter's config is PEFT's, written as PEFT writes it: the continued adapter's
				// adapter_config.json comes out byte for byte as it went in.
				wantCfg, _ := os.ReadFile(filepath.Join(loraFixtureDir(fixture), "adapter_config.json"))
				gotCfg, err := os.ReadFile(filepath.Join(out, "adapter_config.json"))
				if err != nil || string(gotCfg) != string(wantCfg) {
					t.Errorf("adapter_config.json (%v):\n%s\nwant\n%s", err, gotCfg, wantCfg)
				}
				for _, f := range []string{"model.safetensors", "config.json"} {
					if _, err := os.Stat(filepath.Join(out, f)); err == nil {
						t.Errorf("%s written: an adapter run saves the adapter, not the base model", f)
					}
				}
			})
		}
	}
}

// TestTrainLoRABadInput: LoRA flags and adapters that cannot work fail before training, naming
// the flag, field or tensor, and leave --output_dir without any file.
func TestTrainLoRABadInput(t *testing.T) {
	dir := t.TempDir()
	batchFile := filepath.Join(dir, "batch.jsonl")
	writeBatchJSONL(t, "gpt2-tiny", batchFile)
	gpt2 := filepath.Join("..", "..", "testdata", "models", "gpt2-tiny")
	wrongR := filepath.Join(dir, "wrong-r")
	adapterVariant(t, wrongR, func(cfg map[string]any) { cfg["r"] = 8 }, "adapter_model.safetensors")
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"r 0", []string{"--use_peft", "--lora_r", "0"}, []string{"--lora_r", "must be positive"}},
		{"unknown target", []string{"--use_peft", "--lora_target_modules", "q_proj,v_proj"}, []string{"target_modules", `"q_proj" matches no module of GPT2LMHeadModel`, "c_attn"}},
		{"non-linear target", []string{"--use_peft", "--lora_target_modules", "wte"}, []string{"target_modules", `"wte" is not a linear layer`}},
		{"lora flag without use_peft", []string{"--lora_r", "8"}, []string{"--lora_r", "without --use_peft"}},
		{"modules_to_save", []string{"--use_peft", "--lora_modules_to_save", "lm_head"}, []string{"--lora_modules_to_save", "not supported"}},
		{"llama adapter on gpt2", []string{"--use_peft", "--adapter_name_or_path", loraFixtureDir("llama-lora-tiny")}, []string{"target_modules", `"q_proj" matches no module of GPT2LMHeadModel`}},
		{"shapes", []string{"--use_peft", "--adapter_name_or_path", wrongR}, []string{"base_model.model.transformer.h.0.attn.c_attn.lora_A.weight", "shape [4 64]", "[8 64]"}},
		{"flag against the adapter", []string{"--use_peft", "--adapter_name_or_path", loraFixtureDir("gpt2-lora-tiny"), "--lora_r", "16"}, []string{"--lora_r 16", "has 4"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := append([]string{"train", "--model_name_or_path", gpt2, "--train_file", batchFile,
				"--max_steps", "1", "--device", "go", "--output_dir", out}, c.args...)
			_, errOut, code := runGotpu(t, nil, args...)
			if code == 0 {
				t.Fatalf("exit 0, want a failure")
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if entries, _ := os.ReadDir(out); len(entries) > 0 {
				t.Errorf("%s has %d entries after a refused run", out, len(entries))
			}
		})
	}
}

// adapterVariant writes a corrupted copy of the gpt2-lora-tiny fixture into dir: edit changes
// its adapter_config.json (nil: none is written), and the fixture's adapter_model.safetensors is
// copied under each name of weights ("llama:NAME" copies llama-lora-tiny's instead).
func adapterVariant(t *testing.T, dir string, edit func(map[string]any), weights ...string) string {
	t.Helper()
	gpt2, llama := loraFixtureDir("gpt2-lora-tiny"), loraFixtureDir("llama-lora-tiny")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		raw, err := os.ReadFile(filepath.Join(gpt2, "adapter_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(raw, &cfg); err != nil {
			t.Fatal(err)
		}
		edit(cfg)
		b, _ := json.MarshalIndent(cfg, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "adapter_config.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, w := range weights {
		from := filepath.Join(gpt2, "adapter_model.safetensors")
		if name, ok := strings.CutPrefix(w, "llama:"); ok {
			from, w = filepath.Join(llama, "adapter_model.safetensors"), name
		}
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, w), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
