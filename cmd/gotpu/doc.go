// Command gotpu is the command-line face of the gotpu library: list devices, train, evaluate,
// score, generate, tokenize, plan and download with Hugging Face style flags
// (`--learning_rate 3e-4`). Wherever a model, tokenizer or dataset is named, a Hub repo id
// ("org/name", "org/name@rev") works as well as a local path, through the Hugging Face cache
// shared with Python (package hub; HF_HUB_OFFLINE=1 keeps it off the network).
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
