// Command gotpu is the command-line face of the gotpu library: list devices, train, evaluate,
// score, generate, merge, tokenize, render chat templates, plan and download with Hugging Face
// style flags (`--learning_rate 3e-4`). Wherever a model, tokenizer, dataset or adapter is named, a
// Hub repo id ("org/name", "org/name@rev") works as well as a local path, through the Hugging Face
// cache shared with Python (package hub; HF_HUB_OFFLINE=1 keeps it off the network).
//
// PEFT LoRA adapters (package models/peft: adapter_config.json + adapter_model.safetensors):
// train and eval take TRL's --use_peft / --lora_* flags and --adapter_name_or_path; score and
// generate take --adapter_name_or_path to run the base model with an adapter attached (the same
// output formats); merge folds an adapter into its base (PEFT's merge_and_unload) and writes a
// plain model directory:
//
//	gotpu merge --model BASE --adapter ADAPTER --output OUT [--dtype D] [--max_shard_size S]
//
// merge writes config.json, model.safetensors (or shards), the base's generation_config.json and
// tokenizer files, built next to OUT and moved into place only when complete; an existing OUT is
// overwritten as save_pretrained overwrites. It prints OUT on stdout.
//
// train and eval prepare data as TRL's SFTTrainer does (package data/sft) when the data is
// conversational ("messages", or ShareGPT "conversations") or prompt-completion ("prompt" and
// "completion"), or when an SFT-only flag is given (--packing, --assistant_only_loss,
// --completion_only_loss, --dataset_text_field, --max_length); otherwise run_clm's path is
// unchanged (text grouped into --block_size blocks, pre-tokenized rows as they are), and the
// other SFT flags (--packing_strategy, --padding_free, --eos_token, --pad_token,
// --chat_template_path) are refused there rather than ignored. The chat template is
// --chat_template_path (a .jinja/.j2 file, or a tokenizer_config.json or its directory), else the
// tokenizer_config.json beside the tokenizer (--tokenizer_name's, or the model's). Batches are
// one shape: rows of --max_length with --packing, else of the longest prepared example of the
// training and evaluation splits, which must fit the model's positions; both splits are
// prepared alike, so eval_loss is the held-out loss on the trained tokens (assistant or
// completion tokens). One log line per split gives examples, tokens, trained tokens, rows and
// the padding fraction.
//
// chat-template renders conversations with a Hugging Face chat template (package data/chat), as
// transformers' apply_chat_template(tokenize=False) does:
//
//	gotpu chat-template --tokenizer_config FILE [--template NAME] [--add_generation_prompt] [--date YYYY-MM-DD] [--tokenizer tokenizer.json] < in.jsonl
//
// It reads JSON lines {"messages": [...]} (other keys ignored) and writes one JSON line per input
// line, in order: {"text": ...}, or {"error": ...} holding the template's raise_exception message
// exactly, or naming the line for a bad line (the command goes on). With --tokenizer the line
// also has "input_ids" (the text encoded without added special tokens) and "assistant_masks" (1
// for tokens that overlap a {% generation %} block, transformers' assistant_masks; all 0 for
// templates without such blocks). The template is chat_template.jinja beside FILE if present,
// else FILE's chat_template (--template picks from a list; "default" otherwise). --date fixes
// strftime_now's clock at midnight of that day (YYYY-MM-DDTHH:MM:SS sets the time too); without
// it the clock is the local time. The golden data of testdata/chat uses 2025-03-14 09:05:07; the
// templates there print only the date.
//
// generate --chat continues a conversation instead of token ids, as transformers'
// apply_chat_template(add_generation_prompt=True) then generate do:
//
//	gotpu generate --model DIR --chat (--messages FILE.json | --prompt TEXT) [--system TEXT] [--chat_template_path FILE] [--tokenizer TOK] [--json]
//
// The conversation is FILE's JSON list of messages (or an object with "messages"; each an object
// with a string "role"), or one user message --prompt, after the system message --system. The
// template is --chat_template_path (a tokenizer_config.json, read as chat-template reads it, or
// a .jinja file rendered with the special tokens of the model's tokenizer_config.json), else the
// tokenizer_config.json / chat_template.jinja of --tokenizer's directory or the model's. The
// rendered text is tokenized without added special tokens (templates write their bos). It
// prints the reply: the generated tokens without the stop token that ended them, decoded with
// skip_special_tokens. With --json: {"prompt_ids", "generated_ids" (the stop token included, as
// without --chat), "prompt" (the rendered text), "reply", "eos_token_ids" (the stop tokens)}.
//
// The stop tokens are the model's eos ids (generation_config.json's eos_token_id, else
// config.json's) plus the template's: the id of tokenizer_config.json's eos_token when the
// tokenizer has it as one token (<|im_end|> for Qwen), and the template's end-of-turn token, the
// first special token the template writes after an assistant message's content (found by
// rendering a probe user/assistant exchange; <|eot_id|> for Llama 3, <end_of_turn> for Gemma,
// whose eos_token is another). A template that ends turns with plain text adds none: the reply
// runs to the model's eos or --max_new_tokens. --eos_token_id replaces the whole set.
//
// Usage:
//
//	gotpu <command> [flags]
//
// Commands: devices (this file's siblings each hold one command). Exit status: 0 on success,
// 1 on a runtime error, 2 on a usage error, 130 or 143 when SIGINT or SIGTERM stopped the command
// (train instead saves a checkpoint and exits 0). Output formats (text and --json) are a contract
// documented per command; errors go to stderr.
//
// The program is a thin shell: each command parses flags, calls the library, prints. The first
// SIGINT or SIGTERM cancels the command's context (reading stdin included) and the command stops
// at its next check; a second one exits at once.
package main
