// Command lora-finetune fine-tunes a Llama-shaped causal language model with LoRA (PEFT's
// semantics and files, models/peft) on the embedded pure-Go CPU backend: only the adapter's
// lora_A/lora_B tensors are trained, the base model stays frozen. It reports the held-out
// perplexity before and after, the trainable and total parameter counts and the optimizer state
// of the LoRA run against full fine-tuning, saves the adapter (adapter_config.json +
// adapter_model.safetensors), merges it into the base weights (peft.Merge, PEFT's
// merge_and_unload), saves the merged model and reloads it with models.Load as a plain model,
// whose held-out perplexity is the adapted model's.
//
//	go run ./examples/lora-finetune                          # about a minute on 2 cores
//	go run ./examples/lora-finetune -lora_target_modules q_proj,v_proj
//	go run ./examples/lora-finetune -model_name_or_path out/llama-finetune -corpus code
//
// No pretrained Llama small enough for a CPU demo ships with the repository, so without
// -model_name_or_path the run first trains a base model in full on the Go standard library's
// source code (-base_steps), then adapts it with LoRA to the library's English comments. See
// README.md.
package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/gotpu/gotpu/examples/internal/gocorpus"
	"github.com/gotpu/gotpu/models/peft"
)

func main() {
	o := defaultOptions()
	flag.IntVar(&o.baseSteps, "base_steps", o.baseSteps, "updates of full training of the new base model on -base_corpus (0: LoRA on the random initialisation); unused with -model_name_or_path")
	flag.IntVar(&o.maxSteps, "max_steps", o.maxSteps, "LoRA updates")
	flag.IntVar(&o.blockSize, "block_size", o.blockSize, "tokens per training sequence")
	flag.IntVar(&o.batch, "per_device_train_batch_size", o.batch, "sequences per micro-batch")
	flag.IntVar(&o.gradAccum, "gradient_accumulation_steps", o.gradAccum, "micro-batches per optimizer update")
	flag.IntVar(&o.vocab, "vocab", o.vocab, "vocabulary of a new base model: Mistral's special tokens, the most frequent training tokens, one id for the rest")
	flag.IntVar(&o.evalEvery, "eval_steps", o.evalEvery, "evaluate the held-out loss every N LoRA updates")
	flag.IntVar(&o.saveEvery, "save_steps", o.saveEvery, "save an adapter checkpoint every N LoRA updates")
	flag.IntVar(&o.trainBytes, "train_bytes", o.trainBytes, "bytes of text per corpus to train on (the held-out text is a twentieth of it)")
	flag.IntVar(&o.evalBlocks, "eval_blocks", o.evalBlocks, "held-out sequences to evaluate on")
	flag.Float64Var(&o.baseLR, "base_learning_rate", o.baseLR, "peak learning rate of the base model's full training")
	flag.Float64Var(&o.lr, "learning_rate", o.lr, "peak learning rate of the adapter")
	flag.IntVar(&o.loraR, "lora_r", o.loraR, "LoRA rank r")
	flag.Float64Var(&o.loraAlpha, "lora_alpha", o.loraAlpha, "LoRA alpha (scaling alpha/r)")
	flag.Float64Var(&o.loraDropout, "lora_dropout", o.loraDropout, "dropout on the LoRA branch's input, in training")
	flag.StringVar(&o.targets, "lora_target_modules", o.targets, "comma-separated module names (q_proj,v_proj) or all-linear")
	flag.StringVar(&o.baseCorpus, "base_corpus", o.baseCorpus, "what the new base model is trained on: code or comments")
	flag.StringVar(&o.corpus, "corpus", o.corpus, "what the adapter is trained and evaluated on: comments or code")
	flag.StringVar(&o.modelPath, "model_name_or_path", o.modelPath, "a causal-LM directory to adapt (with vocab_map.json if it has a compact vocabulary, as llama-finetune writes); default: train a new base model")
	flag.StringVar(&o.outputDir, "output_dir", o.outputDir, "base model, adapter (and its checkpoints), merged model")
	flag.StringVar(&o.tokenizerPath, "tokenizer", o.tokenizerPath, "Mistral tokenizer.json")
	flag.StringVar(&o.device, "device", o.device, "go (the embedded pure-Go CPU backend), cpu, cuda, tpu or auto")
	flag.Uint64Var(&o.seed, "seed", o.seed, "seed of the weights, the adapter and the data order")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o)
	if err != nil {
		slog.Error("lora-finetune", "error", err)
		os.Exit(1)
	}
	res.print(os.Stdout)
}

func defaultOptions() options {
	return options{
		baseSteps: 120, maxSteps: 60, blockSize: 128, batch: 4, gradAccum: 4, vocab: 2048,
		evalEvery: 20, saveEvery: 20, trainBytes: 1 << 20, evalBlocks: 48,
		baseLR: 3e-3, lr: 1e-2,
		loraR: 8, loraAlpha: 16, loraDropout: 0.05, targets: peft.AllLinear,
		baseCorpus: gocorpus.Code, corpus: gocorpus.Comments,
		outputDir:     filepath.Join("out", "lora-finetune"),
		tokenizerPath: filepath.Join("testdata", "tokenizers", "mistral-7b", "tokenizer.json.gz"),
		device:        "go", seed: 42,
	}
}
