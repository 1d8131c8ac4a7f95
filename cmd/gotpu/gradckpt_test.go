package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ckptTrain runs `gotpu train` on the gpt2-tiny fixture with extra flags and returns the output
// directory and stderr.
func ckptTrain(t *testing.T, dir, name string, extra ...string) (string, string) {
	t.Helper()
	return ckptTrainEnv(t, dir, name, nil, extra...)
}

// ckptTrainEnv is ckptTrain with env added to the process's environment.
func ckptTrainEnv(t *testing.T, dir, name string, env []string, extra ...string) (string, string) {
	t.Helper()
	train := filepath.Join(dir, "train.jsonl")
	if _, err := os.Stat(train); err != nil {
		writeExamples(t, train, 24)
	}
	out := filepath.Join(dir, name)
	args := append([]string{"train", "--model_name_or_path", tinyModelDir(t), "--train_file", train, "--output_dir", out,
		"--per_device_train_batch_size", "2", "--max_steps", "6", "--logging_steps", "1", "--seed", "3",
		"--disable_tqdm", "true", "--save_strategy", "no"}, extra...)
	_, errOut, code := runGotpu(t, env, args...)
	if code != 0 {
		t.Fatalf("gotpu %s: exit %d\n%s", strings.Join(args, " "), code, errOut)
	}
	return out, errOut
}

// ckptLosses reads the logged losses of a run's trainer_state.json, as written (strings of the
// JSON numbers, so that equality is bitwise).
func ckptLosses(t *testing.T, out string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(out, "trainer_state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		LogHistory []map[string]json.RawMessage `json:"log_history"`
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatal(err)
	}
	var losses []string
	for _, e := range st.LogHistory {
		if l, ok := e["loss"]; ok {
			losses = append(losses, string(l))
		}
	}
	if len(losses) == 0 {
		t.Fatalf("%s: no losses logged", out)
	}
	return losses
}

// `gotpu train --gradient_checkpointing true` on gotpu's backend (2 devices, data parallel and
// FSDP full_shard) logs the same losses and saves byte for byte the model of the same run without
// it. (That it recomputes
// rather than doing nothing: TestGradientCheckpointingRecomputesLayers and the XLA memory figures
// of TestTrainGradientCheckpointingOnXLACPU.)
func TestTrainGradientCheckpointing(t *testing.T) {
	dir := t.TempDir()
	for _, layout := range [][]string{{"--device", "go", "--num_devices", "2"}, {"--device", "go", "--num_devices", "2", "--fsdp", "full_shard"}} {
		name := strings.Join(layout[4:], "")
		off, _ := ckptTrain(t, dir, "off"+name, append(layout, "--gradient_checkpointing", "false")...)
		on, _ := ckptTrain(t, dir, "on"+name, append(layout, "--gradient_checkpointing", "true")...)
		lo, ln := ckptLosses(t, off), ckptLosses(t, on)
		if strings.Join(lo, ",") != strings.Join(ln, ",") {
			t.Errorf("%v: losses %v without checkpointing, %v with", layout, lo, ln)
		}
		a, err := os.ReadFile(filepath.Join(off, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(on, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%v: model.safetensors differs with checkpointing", layout)
		}
		t.Logf("%v: losses %v with and without checkpointing; model.safetensors equal (%d bytes)", layout, ln, len(a))
	}
}

// Under a 4 GiB address-space limit, a 12-layer GPT-2 (n_embd 64, vocabulary 1000) trained on 4
// sequences of 1024 tokens is refused before anything is allocated — its activations alone are
// estimated at 5.5 GiB, and the error names gradient_checkpointing among the settings to change —
// and with --gradient_checkpointing true the same run fits the budget and trains.
func TestTrainGradientCheckpointingFitsBudget(t *testing.T) {
	dir := t.TempDir()
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "models", "gpt2-tiny", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]any{"n_layer": 12, "n_positions": 1024, "n_ctx": 1024, "n_embd": 64, "n_head": 4} {
		cfg[k] = v
	}
	raw, err = json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config.json")
	if err := os.WriteFile(config, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	for i := range 8 {
		ids := make([]int, 1024)
		for j := range ids {
			ids[j] = (i*7 + j) % 1000
		}
		b, _ := json.Marshal(map[string]any{"input_ids": ids})
		sb.Write(append(b, '\n'))
	}
	train := filepath.Join(dir, "train.jsonl")
	if err := os.WriteFile(train, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	args := func(out string) []string {
		return []string{"train", "--device", "go", "--config_name", config, "--train_file", train, "--output_dir", filepath.Join(dir, out),
			"--per_device_train_batch_size", "4", "--max_steps", "1", "--disable_tqdm", "true"}
	}
	runLimited(t, args("off")...).refused(t, "over the memory budget", "activations 5.5", "set gradient_checkpointing")
	r := runLimited(t, append(args("on"), "--gradient_checkpointing", "true")...)
	if r.code != 0 || !strings.Contains(r.stdout, "trained 1 steps") {
		t.Fatalf("with gradient_checkpointing: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	t.Logf("with gradient_checkpointing: trained under the limit, peak RSS %d MiB", r.maxRSS>>20)
}
