package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

// TestTrainFSDPCheckpointLoadsInPyTorch is the CLI contract of FSDP: `gotpu train ...
// --num_devices 8 --fsdp full_shard --fsdp_config FILE.json` trains the GPT-2 fixture with its
// parameters and optimizer state sharded over 8 virtual devices and saves a checkpoint whose
// model.safetensors holds whole tensors: byte for byte what gotpu writes for the same model on one
// device, and loaded by the independent PyTorch reference with identical logits.
func TestTrainFSDPCheckpointLoadsInPyTorch(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(8, 9))
	var sb strings.Builder
	for range 64 {
		ids := make([]int, 16)
		for i := range ids {
			ids[i] = rng.IntN(1000)
		}
		b, _ := json.Marshal(map[string]any{"input_ids": ids})
		sb.Write(append(b, '\n'))
	}
	train := filepath.Join(dir, "train.jsonl")
	cfg := filepath.Join(dir, "fsdp_config.json")
	if err := os.WriteFile(train, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte(`{"fsdp_min_num_params": 0, "xla": true, "xla_fsdp_v2": true, "xla_fsdp_grad_ckpt": false}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join("..", "..", "testdata", "models", "gpt2-tiny")
	out := filepath.Join(dir, "out")
	stdout, errOut, code := runGotpu(t, nil, "train", "--model_name_or_path", fixture, "--train_file", train,
		"--per_device_train_batch_size", "1", "--max_steps", "6", "--save_steps", "3", "--logging_steps", "1",
		"--learning_rate", "1e-3", "--device", "go", "--num_devices", "8",
		"--fsdp", "full_shard", "--fsdp_config", cfg, "--output_dir", out)
	if code != 0 {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout, errOut)
	}
	ckpt := filepath.Join(out, "checkpoint-6")
	args, err := os.ReadFile(filepath.Join(ckpt, "training_args.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(args, []byte(`"full_shard"`)) {
		t.Errorf("training_args.json does not record fsdp full_shard:\n%s", args)
	}

	// The same parameters loaded on one device and saved again: the same bytes.
	rt, err := xla.Open(context.Background(), xla.Config{Device: xla.DeviceGo})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	m, err := models.Load(context.Background(), rt, ckpt, models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again := filepath.Join(dir, "again")
	if err := m.Save(again, models.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(ckpt, "model.safetensors"))
	b, _ := os.ReadFile(filepath.Join(again, "model.safetensors"))
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("the FSDP checkpoint's model.safetensors (%d bytes) differs from a one-device save of the same model (%d bytes)", len(a), len(b))
	}

	py := "/usr/bin/python3"
	if out, err := exec.Command(py, "-c", "import torch, numpy").CombinedOutput(); err != nil {
		t.Skipf("skipping the PyTorch half: %s cannot import torch (apt-get install python3-torch python3-numpy): %s", py, strings.TrimSpace(string(out)))
	}
	ref := filepath.Join(fixture, "reference.json")
	jobs, _ := json.Marshal([]map[string]string{
		{"kind": "gpt2", "dir": ckpt, "ref": ref},
		{"kind": "gpt2", "dir": fixture, "ref": ref},
	})
	jobsPath, outPath := filepath.Join(dir, "jobs.json"), filepath.Join(dir, "logits.json")
	if err := os.WriteFile(jobsPath, jobs, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join("..", "..", "testdata", "models", "reference", "run_saved.py")
	if out, err := exec.Command(py, script, jobsPath, outPath).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	var res []struct {
		Logits []float64 `json:"logits"`
	}
	raw, _ := os.ReadFile(outPath)
	if err := json.Unmarshal(raw, &res); err != nil || len(res) != 2 {
		t.Fatalf("%d results: %v", len(res), err)
	}
	ours, err := modelLogits(rt, m, ref)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(res[0].Logits, res[1].Logits) {
		t.Error("PyTorch logits of the trained checkpoint equal the untrained fixture's: nothing was trained")
	}
	worst := 0.0
	for i := range ours {
		worst = max(worst, abs(ours[i]-res[0].Logits[i]))
	}
	t.Logf("PyTorch reference logits from the FSDP checkpoint vs gotpu's: max |diff| %.3g over %d logits", worst, len(ours))
	if len(ours) != len(res[0].Logits) || worst > 1e-4 {
		t.Errorf("PyTorch logits differ from gotpu's by %.3g (%d vs %d values)", worst, len(res[0].Logits), len(ours))
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// modelLogits runs m on the input ids of a fixture's reference.json through `gotpu score`'s code
// (models.ScoreJSONLines with a logits file) and returns the logits flattened, as run_saved.py
// prints them (the fixture's rows all have the same length, so no position is padding).
func modelLogits(rt *xla.Runtime, m models.Model, refPath string) ([]float64, error) {
	raw, err := os.ReadFile(refPath)
	if err != nil {
		return nil, err
	}
	var ref struct {
		InputIDs [][]int `json:"input_ids"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		return nil, err
	}
	var in bytes.Buffer
	for _, ids := range ref.InputIDs {
		b, _ := json.Marshal(map[string]any{"input_ids": ids})
		in.Write(append(b, '\n'))
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("gotpu-fsdp-logits-%d.safetensors", os.Getpid()))
	defer os.Remove(path)
	if err := models.ScoreJSONLines(context.Background(), rt, m, &in, io.Discard, path); err != nil {
		return nil, err
	}
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := f.Bytes("logits")
	if err != nil {
		return nil, err
	}
	out := make([]float64, len(b)/4)
	for i := range out {
		out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
	}
	return out, nil
}
