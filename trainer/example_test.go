package trainer_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

// Example trains a small randomly initialised GPT-2 for a few steps on two replicas (virtual
// devices of the pure-Go backend) and checks that the loss went down. The runtime is named
// once, to models.New: the trainer runs the model on the runtime it was built with.
func Example() {
	ctx := context.Background()
	rt, err := xla.Open(ctx, xla.Config{Device: "go", NumDevices: 2})
	if err != nil {
		panic(err)
	}
	defer rt.Close()

	cfg := gpt2.DefaultConfig()
	cfg.VocabSize, cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 64, 32, 2, 2, 16
	cfg.ResidPdrop, cfg.EmbdPdrop, cfg.AttnPdrop = 0, 0, 0
	model, err := models.New(ctx, rt, cfg, models.NewOptions{Seed: 1})
	if err != nil {
		panic(err)
	}
	// A toy corpus: counting sequences, easy to learn.
	var train data.SliceDataset
	for i := range 32 {
		ids := make([]int32, 16)
		for j := range ids {
			ids[j] = int32((i + j) % 64)
		}
		train = append(train, data.Example{InputIDs: ids})
	}

	args := trainer.DefaultTrainingArguments()
	dir, err := os.MkdirTemp("", "gotpu-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	args.OutputDir = dir // only log_history.jsonl is written: save_strategy no
	args.SaveStrategy = trainer.SaveNo
	args.PerDeviceTrainBatchSize = 4
	args.LearningRate = 3e-3
	args.MaxSteps = 20
	args.LoggingSteps = 5
	args.SetDisableTqdm(true) // no progress bar or console log lines
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	tr, err := trainer.New(args, model, train, nil, trainer.Options{Logger: quiet})
	if err != nil {
		panic(err)
	}
	out, err := tr.Train(ctx)
	if err != nil {
		panic(err)
	}
	var losses []float64
	for _, e := range tr.State().LogHistory {
		if l, ok := e.Loss(); ok {
			losses = append(losses, l)
		}
	}
	fmt.Println("steps:", out.GlobalStep, "replicas:", tr.NumReplicas(), "logged losses:", len(losses))
	fmt.Println("loss decreased:", losses[len(losses)-1] < losses[0])
	// Output:
	// steps: 20 replicas: 2 logged losses: 4
	// loss decreased: true
}
