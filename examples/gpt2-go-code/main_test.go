package main

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/checkpoint"
)

// TestMainJobShort is the shortened main job CI runs (-max_steps 30): it trains on the real Go
// standard library, and checks what a user is promised — held-out perplexity falls at least 3×,
// checkpoint-30 is committed and verifies, the loss-curve PNG decodes, generated text is printed.
func TestMainJobShort(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes the 30 training steps ~10× slower; the plain go test runs it")
	}
	wd, _ := os.Getwd()
	o := defaultOptions()
	o.maxSteps = 30
	o.outputDir = t.TempDir()
	o.tokenizerPath = filepath.Join(wd, "..", "..", "testdata", "tokenizers", "gpt2", "tokenizer.json.gz")
	o.device = "go"
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + out.String())
	m := regexp.MustCompile(`held-out perplexity: ([0-9.]+) before training, ([0-9.]+) after`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no perplexity line in:\n%s", out.String())
	}
	before, _ := strconv.ParseFloat(m[1], 64)
	after, _ := strconv.ParseFloat(m[2], 64)
	if before/after < 3 {
		t.Errorf("perplexity fell %.2f× (%.1f → %.1f), want ≥ 3×", before/after, before, after)
	}
	if _, err := checkpoint.Open(filepath.Join(o.outputDir, "checkpoint-30"), "model.safetensors", "config.json", "trainer_state.json"); err != nil {
		t.Error(err)
	}
	f, err := os.Open(filepath.Join(o.outputDir, "loss.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if cfg, err := png.DecodeConfig(f); err != nil || cfg.Width < 400 {
		t.Errorf("loss.png: %+v, %v", cfg, err)
	}
	if !regexp.MustCompile(`(?s)--- generated from ".+":\n.+\n---`).MatchString(out.String()) {
		t.Error("no generated text")
	}
}

// TestMainJobResume: -resume_from_checkpoint true continues from the latest committed checkpoint
// of -output_dir (a small model and corpus: this checks the wiring, not the learning).
func TestMainJobResume(t *testing.T) {
	if raceEnabled {
		t.Skip("slow under the race detector; the plain go test runs it")
	}
	wd, _ := os.Getwd()
	o := defaultOptions()
	o.outputDir = t.TempDir()
	o.tokenizerPath = filepath.Join(wd, "..", "..", "testdata", "tokenizers", "gpt2", "tokenizer.json.gz")
	o.device = "go"
	o.trainBytes, o.vocab, o.embd, o.blockSize, o.batch, o.evalEvery = 200<<10, 512, 64, 32, 4, 1000
	o.maxSteps, o.saveSteps = 3, 3
	var out bytes.Buffer
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	o.maxSteps, o.resume = 6, "true"
	out.Reset()
	if err := run(context.Background(), o, &out); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out.Bytes(), []byte("after resuming and training to step 6")) {
		t.Errorf("resumed run printed:\n%s", out.String())
	}
	for _, step := range []string{"checkpoint-3", "checkpoint-6"} {
		if _, err := checkpoint.Open(filepath.Join(o.outputDir, step), "model.safetensors"); err != nil {
			t.Error(err)
		}
	}
	// The resume really reads the checkpoint: a damaged one is an error naming the file.
	f := filepath.Join(o.outputDir, "checkpoint-6", "model.safetensors")
	if err := os.WriteFile(f, []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	o.maxSteps = 9
	if err := run(context.Background(), o, &out); err == nil || !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("resuming from a damaged checkpoint: %v", err)
	}
}
