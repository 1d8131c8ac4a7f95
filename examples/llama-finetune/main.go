// Command llama-finetune trains a causal language model of the Llama architecture (the
// llama-tiny fixture's shape) with the Mistral tokenizer on text from the Go standard library
// (its comments by default), the way HF's run_clm.py is used for fine-tuning: bf16 mixed
// precision, gradient accumulation, a cosine schedule with warmup, periodic checkpoints, and
// resumption of an interrupted run with -resume_from_checkpoint. It prints the held-out loss and
// perplexity before and after.
//
//	go run ./examples/llama-finetune                                  # a few minutes on 2 cores
//	go run ./examples/llama-finetune -resume_from_checkpoint true     # continue an interrupted run
//	go run ./examples/llama-finetune -corpus code -output_dir out/llama-code
//	go run ./examples/llama-finetune -model_name_or_path out/llama-code -output_dir out/llama-comments
//
// Without -model_name_or_path the model starts from HF's random initialisation (seeded): no
// pretrained Llama small enough for a CPU demo ships with the repository. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/gotpu/gotpu/examples/internal/gocorpus"
)

func main() {
	o := defaultOptions()
	flag.IntVar(&o.maxSteps, "max_steps", o.maxSteps, "optimizer updates")
	flag.IntVar(&o.blockSize, "block_size", o.blockSize, "tokens per training sequence")
	flag.IntVar(&o.batch, "per_device_train_batch_size", o.batch, "sequences per device per micro-batch")
	flag.IntVar(&o.gradAccum, "gradient_accumulation_steps", o.gradAccum, "micro-batches per optimizer update")
	flag.IntVar(&o.vocab, "vocab", o.vocab, "model vocabulary of a new model: Mistral's special tokens, the most frequent training tokens, one id for the rest")
	flag.IntVar(&o.evalEvery, "eval_steps", o.evalEvery, "evaluate the held-out loss every N updates")
	flag.IntVar(&o.saveEvery, "save_steps", o.saveEvery, "save a checkpoint every N updates")
	flag.IntVar(&o.trainBytes, "train_bytes", o.trainBytes, "bytes of text to train on (the held-out text is a twentieth of it)")
	flag.IntVar(&o.evalBlocks, "eval_blocks", o.evalBlocks, "held-out sequences to evaluate on")
	flag.Float64Var(&o.lr, "learning_rate", o.lr, "peak learning rate")
	flag.Float64Var(&o.warmupRatio, "warmup_ratio", o.warmupRatio, "share of the updates spent warming up before the cosine decay")
	flag.BoolVar(&o.bf16, "bf16", o.bf16, "bfloat16 compute with float32 master weights")
	flag.StringVar(&o.corpus, "corpus", o.corpus, "comments (the standard library's comments) or code (its source files)")
	flag.StringVar(&o.modelPath, "model_name_or_path", o.modelPath, "an HF causal-LM directory to fine-tune (default: a new llama-tiny-shaped model)")
	flag.StringVar(&o.resume, "resume_from_checkpoint", o.resume, "a checkpoint directory, or true for the latest in -output_dir")
	flag.StringVar(&o.outputDir, "output_dir", o.outputDir, "checkpoints, final model, vocab_map.json and logs")
	flag.StringVar(&o.tokenizerPath, "tokenizer", o.tokenizerPath, "Mistral tokenizer.json")
	flag.StringVar(&o.device, "device", o.device, "auto, tpu, cuda, cpu or go")
	flag.IntVar(&o.numDevices, "num_devices", o.numDevices, "devices to use (0: all)")
	flag.Uint64Var(&o.seed, "seed", o.seed, "seed of the weights and the data order")
	flag.Parse()

	// Ctrl-C or SIGTERM cancels the context: the trainer finishes the update in progress, saves a
	// checkpoint there and returns, and the run says how to resume.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			slog.Warn("interrupted before training started: nothing saved")
			os.Exit(130)
		}
		slog.Error("llama-finetune", "error", err)
		os.Exit(1)
	}
	res.print(os.Stdout)
}

func defaultOptions() options {
	return options{
		maxSteps: 60, blockSize: 128, batch: 4, gradAccum: 4, vocab: 2048,
		evalEvery: 20, saveEvery: 20, trainBytes: 1 << 20, evalBlocks: 48,
		lr: 3e-3, warmupRatio: 0.1, bf16: true, corpus: gocorpus.Comments,
		outputDir:     filepath.Join("out", "llama-finetune"),
		tokenizerPath: filepath.Join("testdata", "tokenizers", "mistral-7b", "tokenizer.json.gz"),
		device:        "auto", seed: 42,
	}
}
