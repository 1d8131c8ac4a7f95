package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/models"
)

// runScore implements `gotpu score`.
//
// Input (--input FILE, "-" for stdin): one JSON object per line,
//
//	{"input_ids": [...], "attention_mask"?: [...], "token_type_ids"?: [...], "labels"?: [...] | n}
//
// Output (stdout): one JSON line per input line, {"loss": x} (HF's loss for that example alone;
// null without labels). Causal LMs default labels to input_ids and shift them inside, as HF does;
// classifiers take an integer class (a float for regression, a list for multi-label).
//
// --logits FILE also writes all logits to one safetensors file: tensor "logits", F32,
// [lines, seq, vocab] for causal LMs (zeros past a line's length), [lines, num_labels] for
// classifiers.
//
// --adapter_name_or_path scores the model with a PEFT LoRA adapter attached (a directory or Hub
// repo id, as PeftModel.from_pretrained takes): the output is the same contract, computed by the
// adapted model. --revision applies to --model, --adapter_revision to the adapter's repo id.
func runScore(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("score")
	var dev deviceFlags
	dev.register(fs)
	model := fs.String("model", "", "Hugging Face model directory (config.json + model.safetensors or shards), or a Hub repo id")
	input := fs.String("input", "-", `JSON-lines file of examples ("-": standard input)`)
	logits := fs.String("logits", "", "also write every example's logits to this safetensors file")
	dtype := fs.String("dtype", "", `variables' dtype: float32 (default), bfloat16, or "auto" (as stored)`)
	revision := fs.String("revision", "", "branch, tag or commit of a Hub repo id given as --model (default main)")
	adapter := fs.String("adapter_name_or_path", "", "PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors) or Hub repo id to score with, on top of --model")
	adapterRevision := fs.String("adapter_revision", "", "branch, tag or commit of a Hub repo id given as --adapter_name_or_path (default main)")
	if err := parse(fs, args, stderr, "--model DIR [--adapter_name_or_path ADAPTER] [--input FILE] [--logits FILE] [--dtype D] [--device D]"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageError("unexpected arguments %q", fs.Args())
	}
	if *model == "" {
		return cli.UsageError("--model is required")
	}
	dir, err := resolveModelFlag(ctx, *model, *revision, stderr)
	if err != nil {
		return err
	}
	model = &dir
	adapterDir := ""
	if *adapter != "" {
		if adapterDir, err = resolveAdapterFlag(ctx, *adapter, *adapterRevision, dir, stderr); err != nil {
			return err
		}
	}
	// Scoring reads all of its input before the first example runs: a read of a pipe that is slow
	// or never closed must end when ctx does.
	var in io.Reader = newCancelableReader(ctx, os.Stdin)
	if *input != "-" {
		f, err := os.Open(*input)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	rt, m, err := openAdapted(ctx, &dev, *model, *dtype, adapterDir)
	if err != nil {
		return err
	}
	defer rt.Close()
	if err := models.ScoreJSONLines(ctx, rt, m, in, stdout, *logits); err != nil {
		if *input != "-" {
			return fmt.Errorf("%s: %w", *input, err)
		}
		return err
	}
	return nil
}
