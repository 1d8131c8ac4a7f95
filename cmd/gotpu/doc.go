// Command gotpu is the command-line face of the gotpu library: list devices, train, evaluate,
// score, generate, merge, tokenize, plan and download with Hugging Face style flags
// (`--learning_rate 3e-4`). Wherever a model, tokenizer, dataset or adapter is named, a Hub repo
// id ("org/name", "org/name@rev") works as well as a local path, through the Hugging Face cache
// shared with Python (package hub; HF_HUB_OFFLINE=1 keeps it off the network).
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
