package main

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/xla"
)

// makeTinyGPT2Dir writes a randomly initialised GPT-2 with the real GPT-2 vocabulary (50257) and
// its tokenizer.json into dir: an HF model directory small enough for tests.
func makeTinyGPT2Dir(t *testing.T, dir string) {
	t.Helper()
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	cfg := gpt2.DefaultConfig()
	cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 32, 1, 2, 64
	cfg.ResidPdrop, cfg.EmbdPdrop, cfg.AttnPdrop = 0, 0, 0
	m, err := models.New(context.Background(), rt, cfg, models.NewOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(dir, models.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	writeTestTokenizer(t, "gpt2", dir)
}

// writeTestTokenizer writes testdata/tokenizers/NAME/tokenizer.json.gz, uncompressed, as
// dir/tokenizer.json: a model directory as the Hub has it.
func writeTestTokenizer(t *testing.T, name, dir string) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "testdata", "tokenizers", name, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
}
