package main

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/hub/hubtest"
)

// TestTrainLoRAAllLinear: --lora_target_modules all-linear (any case) adapts every linear layer,
// as TRL hands a lone entry to PEFT as the string PEFT expands, and adapter_config.json records
// the expanded names, sorted, as PEFT writes them; "all-linear" beside other names is refused
// naming the field, since PEFT would read it as a module's name.
func TestTrainLoRAAllLinear(t *testing.T) {
	dir := t.TempDir()
	batch := filepath.Join(dir, "batch.jsonl")
	writeBatchJSONL(t, "gpt2-tiny", batch)
	want := []string{
		"transformer.h.0.attn.c_attn", "transformer.h.0.attn.c_proj", "transformer.h.0.mlp.c_fc", "transformer.h.0.mlp.c_proj",
		"transformer.h.1.attn.c_attn", "transformer.h.1.attn.c_proj", "transformer.h.1.mlp.c_fc", "transformer.h.1.mlp.c_proj",
	}
	train := func(out, targets string) (string, int) {
		_, errOut, code := runGotpu(t, nil, "train", "--model_name_or_path", baseModelDir("gpt2-tiny"), "--train_file", batch,
			"--max_steps", "1", "--per_device_train_batch_size", "2", "--save_strategy", "no", "--device", "go", "--output_dir", out,
			"--use_peft", "--lora_target_modules", targets)
		return errOut, code
	}
	for _, spelling := range []string{"all-linear", "ALL-Linear"} {
		out := filepath.Join(dir, spelling)
		if errOut, code := train(out, spelling); code != 0 {
			t.Fatalf("--lora_target_modules %s: exit %d\n%s", spelling, code, errOut)
		}
		raw, err := os.ReadFile(filepath.Join(out, "adapter_config.json"))
		if err != nil {
			t.Fatal(err)
		}
		var cfg struct {
			TargetModules []string `json:"target_modules"`
		}
		if err := json.Unmarshal(raw, &cfg); err != nil || !slices.Equal(cfg.TargetModules, want) {
			t.Errorf("--lora_target_modules %s: target_modules %v (%v), want the expanded names %v", spelling, cfg.TargetModules, err, want)
		}
	}
	errOut, code := train(filepath.Join(dir, "mixed"), "c_attn,all-linear")
	if code == 0 || !strings.Contains(errOut, "lora_target_modules") || !strings.Contains(errOut, `as a list entry names a module called "all-linear"`) {
		t.Errorf("--lora_target_modules c_attn,all-linear: exit %d\n%s", code, errOut)
	}
}

// TestAdapterFromHubOversized: merge, score and generate naming a Hub adapter whose
// adapter_config.json is the gpt2-lora-tiny fixture's but whose adapter_model.safetensors is 32
// MiB refuse it from the size the Hub announces — exit 1, an error naming the file and the
// limit — without one byte of it served.
func TestAdapterFromHubOversized(t *testing.T) {
	s := hubtest.New(t)
	cfg, err := os.ReadFile(filepath.Join(loraFixtureDir("gpt2-lora-tiny"), "adapter_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 32<<20)
	rand.NewChaCha8([32]byte{7}).Read(big)
	s.AddRepo("model", "org/lora-big", map[string][]byte{"adapter_config.json": cfg, "adapter_model.safetensors": big}, hubtest.RepoOptions{})
	env := hubEnv(t, s, filepath.Join(t.TempDir(), "hub"))
	served := func() int64 {
		var n int64
		for _, r := range s.Requests() {
			if r.Method == http.MethodGet && (strings.HasSuffix(r.Path, "/adapter_model.safetensors") ||
				r.Host == "cdn" && strings.Contains(r.Query, "filename=adapter_model.safetensors")) {
				n += r.Bytes
			}
		}
		return n
	}
	base, batch := baseModelDir("gpt2-tiny"), filepath.Join(t.TempDir(), "batch.jsonl")
	writeBatchJSONL(t, "gpt2-tiny", batch)
	parent := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
	}{
		{"merge", []string{"merge", "--model", base, "--adapter", "org/lora-big", "--output", filepath.Join(parent, "merged")}},
		{"score", []string{"score", "--model", base, "--adapter_name_or_path", "org/lora-big", "--input", batch}},
		{"generate", []string{"generate", "--model", base, "--adapter_name_or_path", "org/lora-big", "--prompt_ids", "1,2,3", "--max_new_tokens", "2"}},
	} {
		s.ResetRequests()
		stdout, stderr, code := runGotpu(t, env, append(c.args, "--device", "go")...)
		if code != 1 || stdout != "" {
			t.Errorf("%s: exit %d, stdout %q; want 1 and nothing", c.name, code, stdout)
		}
		for _, want := range []string{"adapter org/lora-big", "adapter_model.safetensors", "33554432", "over the limit of 1067008"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("%s: stderr lacks %q:\n%.800s", c.name, want, stderr)
			}
		}
		if n := served(); n != 0 {
			t.Errorf("%s: %d bytes of the oversized adapter were served", c.name, n)
		}
	}
	if left := dirNames(t, parent); len(left) != 0 {
		t.Errorf("the refused merge left %v", left)
	}
}
