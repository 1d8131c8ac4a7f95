// Command quickstart is the library example of the README, verbatim (a test keeps the two equal):
// a GPT-2 trained from scratch for 20 steps on this program's own source. It runs from any
// module: the tokenizer comes from the Hugging Face Hub (or its cache) and the text is embedded.
package main

import (
	"context"
	_ "embed"
	"fmt"
	"log"
	"strings"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

//go:embed main.go
var source string // the training text: this file

func main() {
	ctx := context.Background()
	rt, err := xla.Open(ctx, xla.DefaultConfig()) // a TPU if libtpu is installed, else CUDA, else pure Go
	check(err)
	defer rt.Close()
	tok, err := tokenizer.FromPretrained(ctx, "openai-community/gpt2", tokenizer.HubOptions{}) // via the HF cache
	check(err)
	tokFiles, err := tokenizer.FilesFromPretrained(ctx, "openai-community/gpt2", tokenizer.HubOptions{}) // saved with the model
	check(err)
	docs := data.TextLinesFrom(strings.NewReader(source), "main.go")
	train, err := data.GroupTexts(ctx, tok, docs, 64, data.GroupOptions{}) // HF's group_texts
	check(err)
	cfg := gpt2.DefaultConfig()
	cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 64, 2, 2, 64
	model, err := models.New(ctx, rt, cfg, models.NewOptions{Seed: 1}) // the model keeps rt
	check(err)
	args := trainer.DefaultTrainingArguments() // HF's names and defaults
	args.OutputDir, args.MaxSteps, args.LearningRate = "out/quickstart", 20, 1e-3
	tr, err := trainer.New(args, model, train, nil, trainer.Options{Tokenizer: tokFiles}) // on the model's runtime
	check(err)
	out, err := tr.Train(ctx)
	check(err)
	fmt.Printf("%d steps, training loss %.3f\n", out.GlobalStep, out.TrainingLoss)
	check(tr.SaveModel(args.OutputDir)) // config.json, model.safetensors, tokenizer.json: save_pretrained's files
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
