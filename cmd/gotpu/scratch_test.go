package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The tiny GPT-2 the from-scratch tests train: the GPT-2 tokenizer's 50257 tokens, 2 layers of
// width 32, no dropout (so that the loss curve depends on the seed alone).
const (
	scratchOverrides = "n_embd=32,n_layer=2,n_head=2,n_positions=64,resid_pdrop=0,embd_pdrop=0,attn_pdrop=0"
	scratchConfig    = `{"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": 32, "n_layer": 2, "n_head": 2,
 "n_positions": 64, "vocab_size": 50257, "resid_pdrop": 0, "embd_pdrop": 0, "attn_pdrop": 0}`
)

// scratchParams is the tiny GPT-2's parameter count from first principles: wte V·E, wpe P·E, per
// layer two LayerNorms (4E), c_attn E·3E+3E, attn c_proj E²+E, c_fc E·4E+4E, mlp c_proj 4E·E+E, and
// ln_f 2E; lm_head is tied to wte. 1,635,744 = 1.56M (HF's figure divides by 2^20).
func scratchParams() int {
	const V, E, P, L = 50257, 32, 64, 2
	return V*E + P*E + L*(4*E+3*E*E+3*E+E*E+E+4*E*E+4*E+4*E*E+E) + 2*E
}

// scratchTextFile writes a small English text, one document per line, for the runs to fit.
func scratchTextFile(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	for i := range 60 {
		fmt.Fprintf(&b, "The quick brown fox jumps over the lazy dog number %d, and the dog sleeps in the sun.\n", i%7)
	}
	path := filepath.Join(dir, "train.txt")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// scratchTrainArgs is a 20-step run at lr 1e-3 with a loss logged per step.
func scratchTrainArgs(trainFile, out string, steps int) []string {
	return []string{"train", "--train_file", trainFile, "--output_dir", out,
		"--tokenizer_name", filepath.Join("..", "..", "testdata", "tokenizers", "gpt2", "tokenizer.json.gz"),
		"--block_size", "32", "--per_device_train_batch_size", "4", "--max_steps", fmt.Sprint(steps),
		"--learning_rate", "1e-3", "--warmup_steps", "0", "--lr_scheduler_type", "constant",
		"--logging_steps", "1", "--save_strategy", "no", "--seed", "11", "--device", "go"}
}

// scratchLosses reads the per-step training losses of trainer_state.json.
func scratchLosses(t *testing.T, out string) []float64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(out, "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		LogHistory []map[string]any `json:"log_history"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	var losses []float64
	for _, e := range st.LogHistory {
		if l, ok := e["loss"].(float64); ok {
			losses = append(losses, l)
		}
	}
	return losses
}

// checkScratchRun holds a from-scratch run to what run_clm.py would show: HF's "Training new
// model from scratch" line with the parameter count, a first loss near ln(vocab) (a random model's
// cross-entropy: ln 50257 = 10.82, within 0.5), finite losses, and a fit: the mean of the last 5
// losses at least 0.5 below the mean of the first 5 (0.98 was seen at seed 11).
func checkScratchRun(t *testing.T, out, errOut string) {
	t.Helper()
	want := fmt.Sprintf("Training new model from scratch - Total size=%.2fM params", float64(scratchParams())/(1<<20))
	if !strings.Contains(errOut, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errOut)
	}
	losses := scratchLosses(t, out)
	if len(losses) != 20 {
		t.Fatalf("%d logged losses, want 20: %v", len(losses), losses)
	}
	mean := func(xs []float64) float64 {
		s := 0.0
		for _, x := range xs {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("non-finite loss in %v", losses)
			}
			s += x
		}
		return s / float64(len(xs))
	}
	first, last := mean(losses[:5]), mean(losses[15:])
	t.Logf("losses %.3f … %.3f (first 5 mean %.3f, last 5 mean %.3f)", losses[0], losses[19], first, last)
	if math.Abs(losses[0]-math.Log(50257)) > 0.5 {
		t.Errorf("first loss %.3f, want a random model's ≈ ln(50257) = %.3f", losses[0], math.Log(50257))
	}
	if last > first-0.5 {
		t.Errorf("loss did not decrease: first 5 mean %.3f, last 5 mean %.3f", first, last)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("output dir: %v", err)
		}
	}
}

// checkScratchOutputLoads evaluates the saved model with `gotpu eval` (its own tokenizer, saved
// beside it) and scores one example with `gotpu score`: both load the directory as a pretrained
// model, and the eval loss is the fitted model's, well below a random one's.
func checkScratchOutputLoads(t *testing.T, out, textFile string) {
	t.Helper()
	stdout, errOut, code := runGotpu(t, nil, "eval", "--model_name_or_path", out, "--validation_file", textFile,
		"--block_size", "32", "--output_dir", filepath.Join(t.TempDir(), "eval"), "--device", "go")
	if code != 0 {
		t.Fatalf("gotpu eval of the trained model: exit %d\n%s", code, errOut)
	}
	var metrics map[string]float64
	if err := json.Unmarshal([]byte(stdout), &metrics); err != nil {
		t.Fatalf("eval output %q: %v", stdout, err)
	}
	if l := metrics["eval_loss"]; math.IsNaN(l) || l <= 0 || l > math.Log(50257)-1 {
		t.Errorf("eval_loss %v: want finite and at least 1 below a random model's %.3f", l, math.Log(50257))
	}
	stdout, errOut, code = runGotpuStdin(t, `{"input_ids": [464, 2068, 7586, 21831, 18045]}`+"\n", "score", "--model", out, "--device", "go")
	if code != 0 || !strings.Contains(stdout, "loss") {
		t.Errorf("gotpu score of the trained model: exit %d\nstdout %s\nstderr %s", code, stdout, errOut)
	}
	t.Logf("eval_loss %.4f; score: %s", metrics["eval_loss"], strings.TrimSpace(stdout))
}

// TestTrainFromScratchConfigName: `gotpu train --config_name DIR` (a directory with only
// config.json) --tokenizer_name trains a new model from scratch, as run_clm.py does, and the
// output directory loads as a pretrained model in eval and score.
func TestTrainFromScratchConfigName(t *testing.T) {
	dir := t.TempDir()
	cfgDir := filepath.Join(dir, "cfg")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(scratchConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	text := scratchTextFile(t, dir)
	out := filepath.Join(dir, "out")
	_, errOut, code := runGotpu(t, nil, append(scratchTrainArgs(text, out, 20), "--config_name", cfgDir)...)
	if code != 0 {
		t.Fatalf("gotpu train --config_name: exit %d\n%s", code, errOut)
	}
	checkScratchRun(t, out, errOut)
	checkScratchOutputLoads(t, out, text)
}

// TestTrainFromScratchModelType: --model_type gpt2 --config_overrides builds GPT2Config() with the
// overrides (the saved config.json has them, and the class defaults elsewhere: vocab_size 50257),
// trains from scratch, and the output loads.
func TestTrainFromScratchModelType(t *testing.T) {
	dir := t.TempDir()
	text := scratchTextFile(t, dir)
	out := filepath.Join(dir, "out")
	_, errOut, code := runGotpu(t, nil, append(scratchTrainArgs(text, out, 20), "--model_type", "gpt2", "--config_overrides", scratchOverrides)...)
	if code != 0 {
		t.Fatalf("gotpu train --model_type: exit %d\n%s", code, errOut)
	}
	checkScratchRun(t, out, errOut)
	if !strings.Contains(errOut, "You are instantiating a new config instance from scratch.") {
		t.Errorf("stderr lacks run_clm's warning about a new config:\n%s", errOut)
	}
	raw, err := os.ReadFile(filepath.Join(out, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 64, "vocab_size": 50257, "resid_pdrop": 0, "layer_norm_epsilon": 1e-5} {
		if cfg[k] != want {
			t.Errorf("saved config.json %s = %v, want %v", k, cfg[k], want)
		}
	}
	checkScratchOutputLoads(t, out, text)
}

// TestTrainFromScratchSeed: the initial weights are drawn from --seed (run_clm.py's set_seed runs
// before the model is built): two runs at learning rate 0 with seed 5 save byte-identical weights,
// and seed 6 different ones.
func TestTrainFromScratchSeed(t *testing.T) {
	dir := t.TempDir()
	text := scratchTextFile(t, dir)
	weights := func(seed string) []byte {
		out := filepath.Join(t.TempDir(), "out")
		args := append(scratchTrainArgs(text, out, 1), "--model_type", "gpt2", "--config_overrides", scratchOverrides,
			"--learning_rate", "0", "--seed", seed)
		_, errOut, code := runGotpu(t, nil, args...)
		if code != 0 {
			t.Fatalf("seed %s: exit %d\n%s", seed, code, errOut)
		}
		b, err := os.ReadFile(filepath.Join(out, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a, b, c := weights("5"), weights("5"), weights("6")
	if !bytes.Equal(a, b) {
		t.Error("seed 5 twice: the initial weights differ")
	}
	if bytes.Equal(a, c) {
		t.Error("seeds 5 and 6: the same initial weights")
	}
}

// TestTrainFromScratchRefusals: the arguments run_clm.py refuses, and those gotpu cannot honour
// for a model from scratch, fail before anything is built, with exit 2 and a message naming the
// flag and what to do.
func TestTrainFromScratchRefusals(t *testing.T) {
	dir := t.TempDir()
	text := scratchTextFile(t, dir)
	cfgDir := filepath.Join(dir, "cfg")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "config.json"), []byte(scratchConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	base := func(extra ...string) []string {
		return append(scratchTrainArgs(text, filepath.Join(t.TempDir(), "out"), 1), extra...)
	}
	noTokenizer := []string{"train", "--train_file", text, "--output_dir", filepath.Join(dir, "o"), "--max_steps", "1",
		"--device", "go", "--model_type", "gpt2", "--config_overrides", scratchOverrides}
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"overrides with config_name", base("--config_name", cfgDir, "--config_overrides", "n_layer=1"),
			[]string{"--config_overrides can't be used in combination with --config_name or --model_name_or_path"}},
		{"overrides with model_name_or_path", base("--model_name_or_path", filepath.Join("..", "..", "testdata", "models", "gpt2-tiny"), "--config_overrides", "n_layer=1"),
			[]string{"--config_overrides can't be used in combination with --config_name or --model_name_or_path"}},
		{"unknown model_type", base("--model_type", "t5"),
			[]string{"--model_type", `"t5"`, "gpt2, llama, mistral, qwen2, qwen3, gemma3_text"}},
		{"unknown override key", base("--model_type", "gpt2", "--config_overrides", "n_embed=32"),
			[]string{"--config_overrides", "key n_embed isn't in the original config dict of gpt2"}},
		{"no tokenizer", noTokenizer,
			[]string{"--tokenizer_name", "new tokenizer from scratch", "run_clm.py does not support"}},
		{"config without weights as model_name_or_path", base("--model_name_or_path", cfgDir),
			[]string{"--model_name_or_path " + cfgDir, "no weights", "--config_name " + cfgDir}},
		{"config_name with model_name_or_path", base("--model_name_or_path", filepath.Join("..", "..", "testdata", "models", "gpt2-tiny"), "--config_name", cfgDir),
			[]string{"--config_name", "drop --config_name"}},
		{"no model at all", base(),
			[]string{"--model_name_or_path: required", "--config_name / --model_type"}},
		{"lora on a new model", base("--model_type", "gpt2", "--config_overrides", scratchOverrides, "--use_peft"),
			[]string{"--use_peft", "from scratch"}},
		{"bert from scratch", base("--model_type", "bert"),
			[]string{"--model_type", `"bert"`}},
		{"eval of a config", []string{"eval", "--config_name", cfgDir, "--validation_file", text, "--device", "go"},
			[]string{"only `gotpu train`", "`gotpu eval` needs --model_name_or_path"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errOut, code := runGotpu(t, nil, c.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2 (usage)\n%s", code, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut)
				}
			}
			if regexp.MustCompile(`panic|goroutine \d+`).MatchString(errOut) {
				t.Errorf("crashed:\n%s", errOut)
			}
		})
	}
}
