package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/models"
)

// runGenerate implements `gotpu generate` for causal LMs (GPT-2, Llama, Mistral, Qwen2).
//
// Decoding settings start from the model directory's generation_config.json when it has one (as
// HF's generate does), else GenerationConfig's defaults; flags given explicitly override them.
//
// Text output: the generated token ids (not the prompt), space-separated, on one line. With
// --json: {"prompt_ids": [...], "generated_ids": [...]}.
//
// --prompt TEXT (generate_text.go) encodes the text with the model directory's tokenizer.json
// (as `gotpu train` saves it beside the model and in checkpoints) or --tokenizer's, special
// tokens added as tokenizer(text) adds them, and prints the generated continuation decoded with
// skip_special_tokens (the stop token left out); with --json the object also has "prompt" and
// "text".
//
// prompt + max_new_tokens must fit the model's positions (config.json's n_positions /
// max_position_embeddings): HF's generate only warns and then degrades or fails, so a request
// that does not fit is refused, naming the limit and the largest max_new_tokens that fits.
//
// --adapter_name_or_path generates with a PEFT LoRA adapter attached to --model (every decoding
// step, KV cache included, runs the adapted model); the output format is the same.
//
// --chat (generate_chat.go) renders a conversation with the chat template instead of taking
// --prompt_ids, stops at the template's end-of-turn token too, and prints the reply's text; with
// --json the object also has "prompt", "reply" and "eos_token_ids".
func runGenerate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("generate")
	var dev deviceFlags
	dev.register(fs)
	def := models.DefaultGenerateOptions()
	model := fs.String("model", "", "Hugging Face model directory of a causal LM, or a Hub repo id")
	promptIDs := fs.String("prompt_ids", "", `prompt token ids, separated by commas or spaces ("15496, 11")`)
	prompt := fs.String("prompt", "", "prompt text, encoded with the model's tokenizer.json (or --tokenizer's)")
	maxNew := fs.Int("max_new_tokens", def.MaxNewTokens, "tokens to generate at most")
	doSample := fs.Bool("do_sample", def.DoSample, "sample instead of greedy decoding")
	temperature := fs.Float64("temperature", def.Temperature, "sampling temperature")
	topK := fs.Int("top_k", def.TopK, "keep the k most likely tokens when sampling (0: off)")
	topP := fs.Float64("top_p", def.TopP, "nucleus sampling probability mass (1: off)")
	repetition := fs.Float64("repetition_penalty", def.RepetitionPenalty, "HF repetition penalty (1: off)")
	seed := fs.Uint64("seed", 0, "seed of the sampling stream")
	eos := fs.String("eos_token_id", "", `stop tokens, comma-separated ("" = generation_config.json's or config.json's; "none" = never stop)`)
	dtype := fs.String("dtype", "", `variables' dtype: float32 (default), bfloat16, or "auto" (as stored)`)
	revision := fs.String("revision", "", "branch, tag or commit of a Hub repo id given as --model (default main)")
	adapter := fs.String("adapter_name_or_path", "", "PEFT LoRA adapter directory (adapter_config.json + adapter_model.safetensors) or Hub repo id to generate with, on top of --model")
	adapterRevision := fs.String("adapter_revision", "", "branch, tag or commit of a Hub repo id given as --adapter_name_or_path (default main)")
	asJSON := fs.Bool("json", false, "print one JSON object")
	var chatF chatFlags
	chatF.register(fs)
	if err := parse(fs, args, stderr, "--model DIR [--adapter_name_or_path ADAPTER] (--prompt_ids IDS | --prompt TEXT [--tokenizer TOK] | --chat (--messages FILE.json | --prompt TEXT) [--system TEXT] [--chat_template_path FILE] [--tokenizer TOK]) [--max_new_tokens N] [--do_sample] [--temperature T] [--top_k K] [--top_p P] [--seed S] [--json]"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return cli.UsageError("unexpected arguments %q", fs.Args())
	}
	if *model == "" {
		return cli.UsageError("--model is required")
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := chatF.check(set, *prompt); err != nil {
		return err
	}
	modelArg := *model
	dir, err := resolveModelFlag(ctx, *model, *revision, stderr)
	if err != nil {
		return err
	}
	model = &dir
	if *chatF.tokenizer == "" && *adapter != "" && fileExists(filepath.Join(*adapter, "tokenizer.json")) {
		// `gotpu train --use_peft` saves the tokenizer beside the adapter (as HF's Trainer
		// does), where AutoTokenizer.from_pretrained(adapter_dir) finds it: that one wins
		// over the base model's.
		*chatF.tokenizer = *adapter
	}
	var ids []int
	var cp *chatPrompt
	var tp *textPrompt
	switch {
	case *chatF.on:
		if cp, err = prepareChat(ctx, chatF, *prompt, modelArg, dir, *revision, stderr); err != nil {
			return err
		}
		defer cp.tok.Close()
		ids = cp.ids
	case *prompt != "":
		if tp, err = prepareTextPrompt(ctx, *chatF.tokenizer, *prompt, modelArg, dir, *revision, stderr); err != nil {
			return err
		}
		defer tp.tok.Close()
		ids = tp.ids
	default:
		if ids, err = parseIDs(*promptIDs); err != nil {
			return cli.UsageError("--prompt_ids: %v", err)
		}
		if len(ids) == 0 {
			return cli.UsageError("--prompt_ids is required")
		}
	}
	opts := def
	genConfig := ""
	if p := models.GenerationConfigPath(*model); fileExists(p) {
		if opts, err = models.ReadGenerationConfig(p, len(ids)); err != nil {
			return err
		}
		genConfig = p
	}
	if set["max_new_tokens"] {
		opts.MaxNewTokens = *maxNew
	}
	if set["do_sample"] {
		opts.DoSample = *doSample
	}
	if set["temperature"] {
		opts.Temperature = *temperature
	}
	if set["top_k"] {
		opts.TopK = *topK
	}
	if set["top_p"] {
		opts.TopP = *topP
	}
	if set["repetition_penalty"] {
		opts.RepetitionPenalty = *repetition
	}
	opts.Seed = *seed
	switch *eos {
	case "":
	case "none":
		opts.EOSTokenIDs = []int{}
	default:
		if opts.EOSTokenIDs, err = parseIDs(*eos); err != nil {
			return cli.UsageError("--eos_token_id: %v", err)
		}
	}
	if err := validateGenerateOptions(opts, set, *eos != "", genConfig); err != nil {
		return err
	}
	adapterDir := ""
	if *adapter != "" {
		if adapterDir, err = resolveAdapterFlag(ctx, *adapter, *adapterRevision, *model, stderr); err != nil {
			return err
		}
	}
	rt, m, err := openAdapted(ctx, &dev, *model, *dtype, adapterDir)
	if err != nil {
		return err
	}
	defer rt.Close()
	lm, ok := m.(models.CausalLM)
	if !ok {
		return fmt.Errorf("%s: %s is not a causal language model; generate needs GPT-2, Llama, Mistral or Qwen2", *model, m.Architecture())
	}
	if cp != nil || tp != nil {
		for i, id := range ids {
			if id >= lm.VocabSize() {
				return fmt.Errorf("the tokenizer does not fit %s: token %d (prompt position %d) is outside the model's vocabulary [0, %d)", *model, id, i, lm.VocabSize())
			}
		}
	}
	if err := checkPositions(len(ids), opts.MaxNewTokens, lm.MaxPositions(), set["max_new_tokens"], genConfig); err != nil {
		return err
	}
	if cp != nil {
		if *eos == "" {
			base := opts.EOSTokenIDs // generation_config.json's
			if base == nil {
				base = lm.EOSTokenIDs()
			}
			opts.EOSTokenIDs = chatStops(base, cp.stops)
		}
	}
	out, err := models.Generate(ctx, rt, lm, ids, opts)
	if err != nil {
		return err
	}
	if tp != nil {
		stops := opts.EOSTokenIDs
		if stops == nil {
			stops = lm.EOSTokenIDs()
		}
		return tp.print(stdout, out, stops, *asJSON)
	}
	if cp != nil {
		text, err := reply(cp.tok, out, opts.EOSTokenIDs)
		if err != nil {
			return fmt.Errorf("decoding the reply: %w", err)
		}
		if !*asJSON {
			_, err = fmt.Fprintln(stdout, text)
			return err
		}
		if out == nil {
			out = []int{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetEscapeHTML(false)
		return enc.Encode(chatResult{PromptIDs: ids, GeneratedIDs: out, Prompt: cp.text, Reply: text, EOSTokenIDs: opts.EOSTokenIDs})
	}
	if *asJSON {
		if out == nil {
			out = []int{}
		}
		return json.NewEncoder(stdout).Encode(map[string][]int{"prompt_ids": ids, "generated_ids": out})
	}
	parts := make([]string, len(out))
	for i, id := range out {
		parts[i] = strconv.Itoa(id)
	}
	_, err = fmt.Fprintln(stdout, strings.Join(parts, " "))
	return err
}

// validateGenerateOptions checks the decoding options before a device is opened or the model
// loaded (models.GenerateOptions.Validate, the library's rule, so the service applies the same).
// A bad value the command line gave is a usage error naming the flag (exit status 2); one that
// came from the model's generation_config.json is an error naming that file (exit status 1).
func validateGenerateOptions(opts models.GenerateOptions, set map[string]bool, eosFlag bool, genConfig string) error {
	err := opts.Validate()
	var oe *models.GenerateOptionError
	if err == nil || !errors.As(err, &oe) {
		return err
	}
	name, _, _ := strings.Cut(oe.Field, "[") // eos_token_id[1] is --eos_token_id
	if set[name] || (name == "eos_token_id" && eosFlag) || genConfig == "" {
		return cli.UsageError("--%s %v: %s", name, oe.Value, oe.Reason)
	}
	return fmt.Errorf("%s: %w (override it with --%s)", genConfig, err, name)
}

// parseIDs reads token ids separated by commas and/or spaces.
func parseIDs(s string) ([]int, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' })
	ids := make([]int, 0, len(fields))
	for _, f := range fields {
		v, err := strconv.Atoi(f)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q is not a token id", f)
		}
		ids = append(ids, v)
	}
	return ids, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}
