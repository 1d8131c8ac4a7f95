// Command quickstart is the library example of the README, verbatim (a test keeps the two equal):
// a GPT-2 trained from scratch for 20 steps on the README's own text.
package main

import (
	"context"
	"fmt"
	"log"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

func main() {
	ctx := context.Background()
	rt, err := xla.Open(ctx, xla.DefaultConfig()) // a TPU if libtpu is installed, else CUDA, else pure Go
	check(err)
	defer rt.Close()
	tok, err := tokenizer.FromFile("testdata/tokenizers/gpt2/tokenizer.json.gz")
	check(err)
	train, err := data.GroupTexts(ctx, tok, data.TextLines("README.md"), 64, false) // HF's group_texts
	check(err)
	cfg := gpt2.DefaultConfig()
	cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 64, 2, 2, 64
	model, err := models.New(ctx, rt, cfg, models.NewOptions{Seed: 1})
	check(err)
	args := trainer.DefaultTrainingArguments() // HF's names and defaults
	args.OutputDir, args.MaxSteps, args.LearningRate = "out/quickstart", 20, 1e-3
	tr, err := trainer.New(args, model, train, nil, trainer.Options{Runtime: rt})
	check(err)
	out, err := tr.Train(ctx)
	check(err)
	fmt.Printf("%d steps, training loss %.3f\n", out.GlobalStep, out.TrainingLoss)
	check(tr.SaveModel(args.OutputDir)) // config.json + model.safetensors, as save_pretrained writes
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
