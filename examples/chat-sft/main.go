// Command chat-sft fine-tunes a small Qwen3-shaped model on conversations with its real chat
// template, TRL's way (data/sft): every conversation is rendered with the Qwen3 training template
// (the one with {% generation %} blocks, as TRL ships it), tokenized with the Qwen3 tokenizer,
// labelled for assistant-only loss (only the assistant's replies are trained), and packed
// best-fit-decreasing into fixed rows of -max_length tokens where position ids restart per
// conversation and attention never crosses from one conversation to the next. It reports the
// held-out assistant-token loss before and after, the packing figures, the programs compiled
// (one training program for the whole run), and a greedy reply to a held-out question.
//
//	go run ./examples/chat-sft              # about a minute on 2 cores
//	go run ./examples/chat-sft -max_steps 1000 -max_length 512 -turns 4
//
// The conversations are made from the Go standard library's documentation (no download): the
// system prompt asks for one-sentence answers, each user turn asks what an exported function does
// ("What does strings.TrimSpace do?") and the assistant answers with the first sentence of its doc
// comment. Packages are split one in ten held out, so the held-out questions are about functions
// the model never saw. See README.md.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	o := defaultOptions()
	flag.IntVar(&o.maxSteps, "max_steps", o.maxSteps, "optimizer updates")
	flag.IntVar(&o.maxLength, "max_length", o.maxLength, "tokens per packed row (TRL's max_length)")
	flag.IntVar(&o.batch, "per_device_train_batch_size", o.batch, "packed rows per batch")
	flag.IntVar(&o.turns, "turns", o.turns, "question/answer pairs per conversation")
	flag.IntVar(&o.vocab, "vocab", o.vocab, "compact vocabulary of the new model: Qwen3's special tokens, the most frequent training tokens, one id for the rest")
	flag.IntVar(&o.evalEvery, "eval_steps", o.evalEvery, "evaluate the held-out assistant-token loss every N updates")
	flag.Float64Var(&o.lr, "learning_rate", o.lr, "peak learning rate")
	flag.BoolVar(&o.packing, "packing", o.packing, "pack conversations into rows of -max_length (false: one conversation per row, padded)")
	flag.BoolVar(&o.assistantOnly, "assistant_only_loss", o.assistantOnly, "train on the assistant's tokens only (false: on every token)")
	flag.StringVar(&o.outputDir, "output_dir", o.outputDir, "conversations, model and checkpoints")
	flag.StringVar(&o.tokenizerPath, "tokenizer", o.tokenizerPath, "Qwen3 tokenizer.json")
	flag.StringVar(&o.templatePath, "chat_template_path", o.templatePath, "tokenizer_config.json (or .jinja) with a chat template that has {% generation %} blocks")
	flag.StringVar(&o.device, "device", o.device, "go (the embedded pure-Go CPU backend), cpu, cuda, tpu or auto")
	flag.Uint64Var(&o.seed, "seed", o.seed, "seed of the weights and the data order")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o)
	if err != nil {
		slog.Error("chat-sft", "error", err)
		os.Exit(1)
	}
	res.print(os.Stdout)
}

func defaultOptions() options {
	return options{
		maxSteps: 200, maxLength: 256, batch: 8, turns: 2, vocab: 2048, evalEvery: 50,
		lr: 3e-3, packing: true, assistantOnly: true,
		outputDir:     filepath.Join("out", "chat-sft"),
		tokenizerPath: filepath.Join("testdata", "tokenizers", "qwen3", "tokenizer.json.gz"),
		templatePath:  filepath.Join("testdata", "chat", "families", "qwen3-trl-training", "tokenizer_config.json"),
		device:        "go", seed: 42,
	}
}
