// Command gpt2-go-code trains a small GPT-2 from scratch on the Go standard library's own sources
// (present on every machine that has Go) on gotpu's embedded pure-Go backend, then reports
// held-out perplexity and generates Go code from a prompt.
//
//	go run ./examples/gpt2-go-code                       # a few minutes on 2 cores
//	go run ./examples/gpt2-go-code -max_steps 30         # a quick check
//	go run ./examples/gpt2-go-code -device tpu -max_steps 5000 -output_dir /mnt/out
//
// The GPT-2 tokenizer's 50257-entry vocabulary would make the output layer dominate a small model
// on a CPU, so the example keeps the 4095 token ids most frequent in the training files and maps
// the rest to one "unknown" id (a remapping it saves beside the model as vocab_map.json).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/internal/lossplot"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/trainer"
	"github.com/gotpu/gotpu/xla"
)

type options struct {
	maxSteps, blockSize, batch, vocab, layers, embd, evalEvery, trainBytes, saveSteps int
	lr                                                                                float64
	outputDir, tokenizerPath, device, goBackend, prompt, resume                       string
	numDevices                                                                        int
	seed                                                                              uint64
	lockstep                                                                          bool
}

// defaultOptions returns the flags' defaults.
func defaultOptions() options {
	var o options
	register(flag.NewFlagSet("gpt2-go-code", flag.ContinueOnError), &o)
	return o
}

func register(fs *flag.FlagSet, o *options) {
	fs.IntVar(&o.maxSteps, "max_steps", 200, "optimizer updates")
	fs.IntVar(&o.blockSize, "block_size", 128, "tokens per training sequence")
	fs.IntVar(&o.batch, "per_device_train_batch_size", 8, "sequences per device per step")
	fs.IntVar(&o.vocab, "vocab", 4096, "model vocabulary: the most frequent GPT-2 token ids, plus unknown")
	fs.IntVar(&o.layers, "n_layer", 2, "transformer layers")
	fs.IntVar(&o.embd, "n_embd", 128, "model width")
	fs.IntVar(&o.evalEvery, "eval_steps", 50, "evaluate held-out perplexity every N steps")
	fs.IntVar(&o.trainBytes, "train_bytes", 3<<20, "bytes of Go source to train on")
	fs.Float64Var(&o.lr, "learning_rate", 2e-3, "peak learning rate (warmup 5%, cosine decay)")
	fs.StringVar(&o.outputDir, "output_dir", filepath.Join("out", "gpt2-go-code"), "checkpoints, final model and logs")
	fs.StringVar(&o.tokenizerPath, "tokenizer", filepath.Join("testdata", "tokenizers", "gpt2", "tokenizer.json.gz"), "GPT-2 tokenizer.json")
	fs.StringVar(&o.device, "device", "auto", "auto, tpu, cuda, cpu or go")
	fs.IntVar(&o.numDevices, "num_devices", 0, "devices to use (0: all)")
	fs.StringVar(&o.goBackend, "go_backend", "", "pure-Go backend for -device go (and auto without an accelerator): gotpu (the default) or simplego")
	fs.StringVar(&o.prompt, "prompt", "func (b *Buffer) Len() int {", "prompt for the generation at the end")
	fs.Uint64Var(&o.seed, "seed", 42, "seed of the weights and the data order")
	fs.IntVar(&o.saveSteps, "save_steps", 0, "save a checkpoint every N steps (0: at the end only; SIGTERM/Ctrl-C always saves)")
	fs.StringVar(&o.resume, "resume_from_checkpoint", "", `continue from a checkpoint directory, or "true" for the latest in -output_dir`)
	fs.BoolVar(&o.lockstep, "lockstep", false, "turn the input/device pipeline off (trainer.Options.Lockstep), to see what it saves")
}

func main() {
	var o options
	register(flag.CommandLine, &o)
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		slog.Error("gpt2-go-code", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, stdout io.Writer) error {
	tok, err := tokenizer.FromFile(o.tokenizerPath)
	if err != nil {
		return fmt.Errorf("%w (run from the repository root, or pass -tokenizer)", err)
	}
	trainFiles, evalFiles, err := goSources(o.trainBytes)
	if err != nil {
		return err
	}
	slog.Info("corpus", "train_files", len(trainFiles), "held_out_files", len(evalFiles))
	trainTok, err := tokenize(ctx, tok, trainFiles)
	if err != nil {
		return err
	}
	evalTok, err := tokenize(ctx, tok, evalFiles)
	if err != nil {
		return err
	}
	vm := newVocabMap(trainTok, o.vocab)
	train := blocks(vm.apply(trainTok), o.blockSize)
	eval := blocks(vm.apply(evalTok), o.blockSize)
	if len(eval) > 64 {
		eval = eval[:64] // a fixed held-out sample keeps evaluation quick
	}
	slog.Info("data", "train_blocks", len(train), "eval_blocks", len(eval), "unknown_rate", vm.unknownRate(trainTok))

	cfg := xla.DefaultConfig()
	cfg.Device, cfg.NumDevices, cfg.GoBackend = o.device, o.numDevices, o.goBackend
	rt, err := xla.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer rt.Close()
	mc := gpt2.DefaultConfig()
	mc.VocabSize, mc.NPositions, mc.NEmbd, mc.NLayer, mc.NHead = o.vocab, o.blockSize, o.embd, o.layers, max(o.embd/64, 1)
	mc.ResidPdrop, mc.EmbdPdrop, mc.AttnPdrop = 0, 0, 0
	model, err := models.New(ctx, rt, mc, models.NewOptions{Seed: o.seed})
	if err != nil {
		return err
	}

	args := trainer.DefaultTrainingArguments()
	args.OutputDir = o.outputDir
	args.MaxSteps = o.maxSteps
	args.PerDeviceTrainBatchSize, args.PerDeviceEvalBatchSize = o.batch, o.batch
	args.LearningRate = o.lr
	args.WeightDecay = 0.1
	args.LRSchedulerType = trainer.SchedulerCosine
	args.WarmupRatio = 0.05
	args.LoggingSteps = 10
	args.EvalStrategy = trainer.IntervalSteps
	args.SetEvalSteps(float64(o.evalEvery))
	args.SaveStrategy = trainer.SaveSteps
	args.SaveSteps = float64(o.maxSteps)
	if o.saveSteps > 0 {
		args.SaveSteps = float64(o.saveSteps)
	}
	args.ResumeFromCheckpoint = o.resume
	args.Seed = int(o.seed)
	tr, err := trainer.New(args, model, data.SliceDataset(train), data.SliceDataset(eval), trainer.Options{Lockstep: o.lockstep})
	if err != nil {
		return err
	}
	var first map[string]float64
	if o.resume == "" { // a resumed run's starting point is the checkpoint, evaluated by its run
		if first, err = tr.Evaluate(ctx); err != nil {
			return err
		}
	}
	if _, err := tr.Train(ctx); err != nil {
		return err
	}
	if ctx.Err() != nil {
		// Interrupted (SIGTERM, Ctrl-C): Train saved a checkpoint at the step it reached.
		fmt.Fprintf(stdout, "interrupted at step %d; continue with -resume_from_checkpoint true\n", tr.State().GlobalStep)
		return ctx.Err()
	}
	last, err := tr.Evaluate(ctx)
	if err != nil {
		return err
	}
	lp := math.Exp(last["eval_loss"])
	if first != nil {
		fp := math.Exp(first["eval_loss"])
		fmt.Fprintf(stdout, "held-out perplexity: %.1f before training, %.1f after (%.1fx lower)\n", fp, lp, fp/lp)
	} else {
		fmt.Fprintf(stdout, "held-out perplexity: %.1f after resuming and training to step %d\n", lp, tr.State().GlobalStep)
	}

	if err := tr.SaveModel(o.outputDir); err != nil {
		return err
	}
	if err := tr.SaveState(); err != nil {
		return err
	}
	if err := vm.save(filepath.Join(o.outputDir, "vocab_map.json")); err != nil {
		return err
	}
	png := filepath.Join(o.outputDir, "loss.png")
	trainLoss, evalLoss := lossplot.FromLogHistory(tr.State().LogHistory)
	if err := lossplot.WritePNG(png, "GPT-2 on Go's standard library", trainLoss, evalLoss); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "loss curve: %s\n", png)
	return generate(ctx, stdout, rt, tr.Model(), tok, vm, o.prompt)
}

// generate prints a greedy continuation of the prompt.
func generate(ctx context.Context, stdout io.Writer, rt *xla.Runtime, m models.Model, tok tokenizer.Tokenizer, vm *vocabMap, prompt string) error {
	lm, ok := m.(models.CausalLM)
	if !ok {
		return errors.New("the model is not a causal LM")
	}
	enc, err := tok.Encode(prompt, false)
	if err != nil {
		return err
	}
	ids := vm.applyIDs(enc.IDs)
	opts := models.DefaultGenerateOptions()
	opts.MaxNewTokens = 60
	opts.DoSample, opts.Temperature, opts.TopK, opts.Seed = true, 0.7, 20, 1
	opts.EOSTokenIDs = []int{}
	out, err := models.Generate(ctx, rt, lm, ids, opts)
	if err != nil {
		return err
	}
	text, err := tok.Decode(vm.invert(out), false)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "--- generated from %q:\n%s%s\n---\n", prompt, prompt, text)
	return nil
}
