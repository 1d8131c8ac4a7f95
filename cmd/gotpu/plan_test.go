package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runPlanCLI runs `gotpu plan args...` in process and returns stdout, stderr and the exit status.
func runPlanCLI(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), commands(), append([]string{"plan"}, args...), &out, &errOut)
	return out.String(), errOut.String(), code
}

var (
	hfConfigs = filepath.Join("..", "..", "testdata", "hf-configs")
	planDir   = filepath.Join("..", "..", "testdata", "plan")
)

// planCases are the golden outputs of testdata/plan: the acceptance configs (GPT-2 124M,
// Llama-3.2-1B, Llama-2-7B) with --bf16 on v5e-8 at HF's defaults (batch 8, block 1024), with and
// without FSDP; Llama-2-7B at batch 1 × 1024 on every target; Llama-3.2-1B at batch 1 × 512 on
// v5e-8; a fixture whose 3-label classifier bias cannot be sharded; Adafactor with accumulation.
var planCases = []struct {
	name string
	args []string
}{
	{"gpt2-v5e-8", []string{"--model", filepath.Join(hfConfigs, "gpt2_lmhead_config.json"), "--bf16", "--device", "v5e-8"}},
	{"gpt2-v5e-8-fsdp", []string{"--model", filepath.Join(hfConfigs, "gpt2_lmhead_config.json"), "--bf16", "--device", "v5e-8", "--fsdp", "full_shard"}},
	{"llama3.2-1b-v5e-8", []string{"--model", filepath.Join(hfConfigs, "llama3.2-1b_config.json"), "--bf16", "--device", "v5e-8"}},
	{"llama3.2-1b-v5e-8-fsdp", []string{"--model", filepath.Join(hfConfigs, "llama3.2-1b_config.json"), "--bf16", "--device", "v5e-8", "--fsdp", "full_shard"}},
	{"llama2-7b-v5e-8", []string{"--model", filepath.Join(hfConfigs, "llama2-7b-chat_config.json"), "--bf16", "--device", "v5e-8"}},
	{"llama2-7b-v5e-8-fsdp", []string{"--model", filepath.Join(hfConfigs, "llama2-7b-chat_config.json"), "--bf16", "--device", "v5e-8", "--fsdp", "full_shard"}},
	{"llama2-7b-b1", []string{"--model", filepath.Join(hfConfigs, "llama2-7b-chat_config.json"), "--bf16", "--per_device_train_batch_size", "1", "--block_size", "1024"}},
	{"llama2-7b-b1-fsdp", []string{"--model", filepath.Join(hfConfigs, "llama2-7b-chat_config.json"), "--bf16", "--per_device_train_batch_size", "1", "--block_size", "1024", "--fsdp", "full_shard"}},
	{"llama3.2-1b-b1x512-v5e-8", []string{"--model", filepath.Join(hfConfigs, "llama3.2-1b_config.json"), "--bf16", "--per_device_train_batch_size", "1", "--block_size", "512", "--device", "v5e-8"}},
	{"llama3.2-1b-b1x512-v5e-8-fsdp", []string{"--model", filepath.Join(hfConfigs, "llama3.2-1b_config.json"), "--bf16", "--per_device_train_batch_size", "1", "--block_size", "512", "--device", "v5e-8", "--fsdp", "full_shard"}},
	{"bert-tiny-fsdp", []string{"--model", filepath.Join("..", "..", "testdata", "models", "bert-tiny"), "--fsdp", "full_shard"}},
	{"gpt2-adafactor-acc4", []string{"--model", filepath.Join(hfConfigs, "gpt2_lmhead_config.json"), "--optim", "adafactor", "--gradient_accumulation_steps", "4", "--per_device_train_batch_size", "2", "--block_size", "512", "--device", "h100"}},
	// Issue #40's contract command and its headline runs on Llama-3.1-8B.
	{"llama3.1-8b-lora-b8-v5e-8", llama8BLoRA("8")},
	{"llama3.1-8b-lora-b1-v5e-8", llama8BLoRA("1")},
	{"llama3.1-8b-lora-b4-v5e-8", llama8BLoRA("4")},
	{"llama3.1-8b-full-b1", llama8BFull("1")},
	{"llama3.1-8b-full-b8", llama8BFull("8")},
	{"llama3.1-8b-lora-auto-q-v", []string{"--model", filepath.Join(hfConfigs, "llama3.1-8b-instruct_config.json"), "--use_peft",
		"--dtype", "auto", "--bf16", "--fsdp", "full_shard", "--per_device_train_batch_size", "1", "--block_size", "1024", "--device", "v5e-8"}},
}

// llama8BLoRA is the contract command of issue #40 at a batch size: LoRA r 16 all-linear on a
// bf16 base, bf16 compute, FSDP full_shard, gradient checkpointing, 1024 tokens, on v5e-8.
func llama8BLoRA(batch string) []string {
	return []string{"--model", filepath.Join(hfConfigs, "llama3.1-8b-instruct_config.json"), "--use_peft", "--lora_r", "16",
		"--lora_target_modules", "all-linear", "--torch_dtype", "bfloat16", "--bf16", "--fsdp", "full_shard",
		"--gradient_checkpointing", "--per_device_train_batch_size", batch, "--block_size", "1024", "--device", "v5e-8"}
}

// llama8BFull is full fine-tuning of Llama-3.1-8B: float32 parameters and AdamW state, bf16
// compute, FSDP full_shard, gradient checkpointing, 1024 tokens, on every target.
func llama8BFull(batch string) []string {
	return []string{"--model", filepath.Join(hfConfigs, "llama3.1-8b-instruct_config.json"), "--torch_dtype", "float32", "--bf16",
		"--fsdp", "full_shard", "--gradient_checkpointing", "--per_device_train_batch_size", batch, "--block_size", "1024"}
}

// TestPlanGolden: `gotpu plan` prints testdata/plan/<case>.txt byte for byte.
// `go test ./cmd/gotpu -run PlanGolden -update` rewrites them; review the diff.
func TestPlanGolden(t *testing.T) {
	for _, c := range planCases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := runPlanCLI(t, c.args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			path := filepath.Join(planDir, c.name+".txt")
			if *update {
				if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if out != string(want) {
				t.Errorf("gotpu plan %s differs from %s:\n--- got\n%s--- want\n%s", strings.Join(c.args, " "), path, out, want)
			}
		})
	}
}

// planFitsColumn returns the fits column of target's row in a plan's output.
func planFitsColumn(t *testing.T, out, target string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 11 && f[0] == target {
			return f[10]
		}
	}
	t.Fatalf("no row for %s in\n%s", target, out)
	return ""
}

// TestPlanAcceptanceFits: the fit results the maintainers check, read from the printed tables.
// Llama-2-7B (bf16) fits only sharded on v5p-8 at batch 1 × 1024 and on no v5e-8 layout (its
// float32 gradients alone, 25.1 GiB, exceed a 16 GiB chip); Llama-3.2-1B fits on v5e-8 only
// sharded at batch 1 × 512; at HF's default batch 8 × 1024 nothing fits on v5e-8 (activations).
func TestPlanAcceptanceFits(t *testing.T) {
	for _, c := range []struct {
		config, target string
		extra          []string
		sharded, repl  string
	}{
		{"llama2-7b-chat_config.json", "v5p-8", []string{"--per_device_train_batch_size", "1", "--block_size", "1024"}, "yes", "no"},
		{"llama2-7b-chat_config.json", "v5e-8", []string{"--per_device_train_batch_size", "1", "--block_size", "1024"}, "no", "no"},
		{"llama2-7b-chat_config.json", "v5e-8", nil, "no", "no"},
		{"llama3.2-1b_config.json", "v5e-8", []string{"--per_device_train_batch_size", "1", "--block_size", "512"}, "yes", "no"},
		{"llama3.2-1b_config.json", "v5e-8", nil, "no", "no"},
		{"gpt2_lmhead_config.json", "v5e-8", []string{"--per_device_train_batch_size", "1"}, "yes", "yes"},
		{"gpt2_lmhead_config.json", "v5e-8", nil, "no", "no"},
	} {
		base := append([]string{"--model", filepath.Join(hfConfigs, c.config), "--bf16", "--device", c.target}, c.extra...)
		for _, fsdp := range []bool{true, false} {
			args, want := base, c.repl
			if fsdp {
				args, want = append(append([]string(nil), base...), "--fsdp", "full_shard"), c.sharded
			}
			out, errOut, code := runPlanCLI(t, args...)
			if code != 0 {
				t.Fatalf("%v: exit %d: %s", args, code, errOut)
			}
			if got := planFitsColumn(t, out, c.target); got != want {
				t.Errorf("%s %v on %s, fsdp %v: fits %s, want %s\n%s", c.config, c.extra, c.target, fsdp, got, want, out)
			}
		}
	}
}

// TestPlanBadInput: usage errors (exit 2) name the flag; a missing or invalid config (exit 1)
// names the file and the field.
func TestPlanBadInput(t *testing.T) {
	gpt2 := filepath.Join(hfConfigs, "gpt2_lmhead_config.json")
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notJSON := write("broken.json", `{"model_type": "gpt2",`)
	absurd := write("absurd.json", `{"model_type": "gpt2", "n_embd": 1073741824}`)
	zero := write("zero.json", `{"model_type": "llama", "hidden_size": 0}`)
	unknown := write("t5.json", `{"model_type": "t5"}`)
	for _, c := range []struct {
		args []string
		code int
		want []string
	}{
		{nil, 2, []string{"--model is required"}},
		{[]string{"--model", gpt2, "extra"}, 2, []string{"unexpected arguments"}},
		{[]string{"--model", gpt2, "--per_device_train_batch_size", "0"}, 2, []string{"--per_device_train_batch_size 0"}},
		{[]string{"--model", gpt2, "--gradient_accumulation_steps", "-1"}, 2, []string{"--gradient_accumulation_steps -1"}},
		{[]string{"--model", gpt2, "--block_size", "-5"}, 2, []string{"--block_size -5"}},
		{[]string{"--model", gpt2, "--block_size", "4096"}, 2, []string{"block_size", "4096", "1024", "n_positions"}},
		{[]string{"--model", gpt2, "--fsdp", "shard_grad_op"}, 2, []string{"--fsdp", "full_shard only"}},
		{[]string{"--model", gpt2, "--fsdp_min_num_params", "-1"}, 2, []string{"--fsdp_min_num_params -1"}},
		{[]string{"--model", gpt2, "--device", "v3-8"}, 2, []string{`--device "v3-8"`, "v5e-8"}},
		{[]string{"--model", gpt2, "--optim", "sgd"}, 2, []string{"optim", `"sgd"`}},
		{[]string{"--model", gpt2, "--per_device_train_batch_size", "x"}, 2, []string{"per_device_train_batch_size"}},
		{[]string{"--model", gpt2, "--use_peft", "--lora_r", "0"}, 2, []string{"--lora_r", "0 must be positive"}},
		{[]string{"--model", gpt2, "--lora_r", "8"}, 2, []string{"--lora_r", "without --use_peft"}},
		{[]string{"--model", gpt2, "--lora_target_modules", "c_attn"}, 2, []string{"--lora_target_modules", "without --use_peft"}},
		{[]string{"--model", gpt2, "--use_peft", "--lora_target_modules", "q_proj"}, 2, []string{"lora_target_modules", `"q_proj"`, "c_attn"}},
		{[]string{"--model", gpt2, "--use_peft", "--lora_target_modules", ","}, 2, []string{"--lora_target_modules", "no module"}},
		{[]string{"--model", gpt2, "--torch_dtype", "foo"}, 2, []string{"--torch_dtype", `"foo"`, "bfloat16"}},
		{[]string{"--model", gpt2, "--dtype", "int8"}, 2, []string{"--torch_dtype", `"int8"`}},
		{[]string{"--model", gpt2, "--gradient_checkpointing", "maybe"}, 2, []string{"--gradient_checkpointing"}},
		{[]string{"--model", gpt2, "--shapes_only"}, 2, []string{"--shapes_only", "--compile"}},
		{[]string{"--model", filepath.Join(dir, "missing.json")}, 1, []string{"missing.json", "no such file"}},
		{[]string{"--model", dir}, 1, []string{dir, "config.json"}},
		{[]string{"--model", notJSON}, 1, []string{"broken.json", "JSON"}},
		{[]string{"--model", absurd}, 1, []string{"absurd.json", "n_embd", "model too large"}},
		{[]string{"--model", zero}, 1, []string{"zero.json", "hidden_size"}},
		{[]string{"--model", unknown}, 1, []string{"t5.json", "model_type", "t5"}},
	} {
		out, errOut, code := runPlanCLI(t, c.args...)
		if code != c.code || out != "" {
			t.Errorf("%v: exit %d (want %d), stdout %q, stderr %s", c.args, code, c.code, out, errOut)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", c.args, w, errOut)
			}
		}
	}
	// --help prints the flags and exits 0.
	if _, errOut, code := runPlanCLI(t, "--help"); code != 0 || !strings.Contains(errOut, "--fsdp") {
		t.Errorf("--help: exit %d\n%s", code, errOut)
	}
}
