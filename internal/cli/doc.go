// Package cli holds the command-line plumbing shared by gotpu's commands: Hugging Face style flag
// parsing on top of the standard flag package, and the exit-code conventions.
//
// HF's scripts (HfArgumentParser) accept `--learning_rate 3e-4`, `--learning-rate 3e-4`,
// `--do_train` and `--bf16 True`; Go's flag package accepts only some of these. Parse rewrites the
// arguments into the flag package's form first, so every gotpu command takes what an HF user
// types. Nothing here keeps state between calls.
package cli
