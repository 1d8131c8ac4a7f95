// Command bert-classify fine-tunes a small BERT sequence classifier (the bert-tiny fixture's
// shape) from scratch to tell which part of the Go standard library a snippet of source code
// comes from (crypto/…, encoding/…, net/…, runtime/…), with the bert-base-uncased tokenizer and
// gotpu's Trainer, then reports held-out accuracy against the majority-class baseline.
//
//	go run ./examples/bert-classify                         # a few minutes on 2 cores
//	go run ./examples/bert-classify -max_steps 40           # a quick check
//	go run ./examples/bert-classify -classes crypto,math,net,os,runtime
//
// See README.md for the data, the split and the figures measured.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

func main() {
	o := defaultOptions()
	var classes string
	flag.IntVar(&o.maxSteps, "max_steps", o.maxSteps, "optimizer updates (early stopping may end the run sooner)")
	flag.IntVar(&o.maxSeqLength, "max_seq_length", o.maxSeqLength, "tokens per snippet, [CLS] and [SEP] included (longer ones are truncated)")
	flag.IntVar(&o.batch, "per_device_train_batch_size", o.batch, "snippets per device per step")
	flag.IntVar(&o.evalEvery, "eval_steps", o.evalEvery, "evaluate (and checkpoint) every N steps")
	flag.IntVar(&o.patience, "early_stopping_patience", o.patience, "stop after N evaluations without a better accuracy (0: never)")
	flag.IntVar(&o.corpus.lines, "snippet_lines", o.corpus.lines, "source lines per snippet")
	flag.IntVar(&o.corpus.trainPerClass, "train_per_class", o.corpus.trainPerClass, "training snippets per class")
	flag.IntVar(&o.corpus.evalPerClass, "eval_per_class", o.corpus.evalPerClass, "held-out snippets per class")
	flag.StringVar(&classes, "classes", strings.Join(o.corpus.classes, ","), "package families (directories under GOROOT/src) to tell apart")
	flag.Float64Var(&o.lr, "learning_rate", o.lr, "peak learning rate (linear warmup 10%, linear decay)")
	flag.StringVar(&o.outputDir, "output_dir", o.outputDir, "checkpoints, final model and logs")
	flag.StringVar(&o.tokenizerPath, "tokenizer", o.tokenizerPath, "bert-base-uncased tokenizer.json")
	flag.StringVar(&o.device, "device", o.device, "auto, tpu, cuda, cpu or go")
	flag.IntVar(&o.numDevices, "num_devices", o.numDevices, "devices to use (0: all)")
	flag.Uint64Var(&o.seed, "seed", o.seed, "seed of the weights, the sampling of snippets and the data order")
	flag.Parse()
	o.corpus.classes = strings.Split(classes, ",")
	o.corpus.seed = o.seed

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			slog.Warn("interrupted", "output_dir", o.outputDir)
			os.Exit(130)
		}
		slog.Error("bert-classify", "error", err)
		os.Exit(1)
	}
	res.print(os.Stdout)
}

func defaultOptions() options {
	return options{
		maxSteps: 300, maxSeqLength: 64, batch: 32, evalEvery: 50, patience: 3, lr: 2e-3,
		outputDir:     filepath.Join("out", "bert-classify"),
		tokenizerPath: filepath.Join("testdata", "tokenizers", "bert-base-uncased", "tokenizer.json.gz"),
		device:        "auto", seed: 42,
		corpus: corpusConfig{
			classes: []string{"crypto", "encoding", "net", "runtime"}, lines: 6, heldOutEvery: 5,
			trainPerClass: 1000, evalPerClass: 150,
		},
	}
}
