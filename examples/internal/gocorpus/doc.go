// Package gocorpus is the data of the Llama examples, examples/llama-finetune and
// examples/lora-finetune: text from the Go standard library, tokenized with the Mistral
// tokenizer, mapped to a compact vocabulary and cut into training blocks. Both programs are
// package main; they take this code from one place so that they read the same files in the same
// order, encode them to the same bytes and give them the same vocabulary ids, and a model one of
// them saves (with its vocab_map.json) is read by the other with the ids it was trained on.
//
// # Corpus
//
// Documents walks GoRootSrc ($(go env GOROOT)/src, or the GOROOT the binary was built with when
// the go command is not on PATH) and takes every non-test .go file, skipping testdata and vendor
// directories. Files are split by the FNV-1a (32-bit) hash of their slash-separated path relative
// to that root: a hash divisible by 20 puts a file on the held-out side, so no file is on both
// sides, and a given GOROOT gives the same split on every run and for both corpora. Files are
// read in hash order (ties by path), a sample across the whole library rather than its first
// directories alphabetically, until the training side holds budget bytes and the held-out side
// budget/20 (the file that reaches a budget is taken whole); empty documents are skipped.
//
// Each file gives one document, of one of two kinds:
//
//   - Code: the file's source, byte for byte.
//   - Comments: the English text of its comments (CommentText): markers removed, each comment
//     trimmed and ended by a newline, a blank line between comment groups (a blank line or code
//     between two comments separates them, go/ast's rule). Compiler directives (//go:build,
//     //go:linkname, // +build, //line, //export, …) and the licence header every file repeats
//     are dropped: they would teach a model boilerplate, not English.
//
// Tokenize encodes documents with the tokenizer's special tokens (Mistral's <s> before each) and
// concatenates them; Blocks cuts the result into fixed-length examples, the remainder dropped
// (run_clm's tokenize_function and group_texts). Examples does that for both sides of a corpus
// after the vocabulary map, keeping a fixed number of held-out blocks for a quick evaluation.
//
// # Vocabulary
//
// Mistral's 32000-entry output layer would be most of a small model's compute on a CPU, so a new
// model gets a compact vocabulary: a VocabMap from Mistral ids to compact ids. NewVocabMap puts
// the tokenizer's special tokens first, in the tokenizer's order (SpecialIDs: <unk>, <s>, </s>
// keep ids 0, 1, 2, which config.json's bos/eos ids name), then the most frequent ids of the
// training tokens (ties by the smaller Mistral id), and one last "other" id for every token left
// out. Apply maps ids (a nil map is the identity: a model with the tokenizer's full vocabulary),
// OtherRate measures the share that falls in the "other" id, and ModelVocabSize is the
// vocabulary a model needs for the mapped ids. The map is saved as JSON in VocabFile
// (vocab_map.json) beside the model, compact id i standing for Mistral id
// mistral_ids_by_compact_id[i]; LoadVocabMap reads it back and validates it, and Equal tells
// whether two maps agree (a resumed run must find the map it was started with). CheckModel tells
// whether a loaded causal LM can take the data: enough vocabulary rows for the mapped ids and
// enough positions for a block.
//
// # Errors
//
// Errors about a setting name the examples' flag (-corpus, -vocab, -train_bytes, -block_size),
// since both programs take them under these names; errors about a file name the file (an
// unterminated comment gives the scanner's position, "bad.go:1:1: comment not terminated"; a
// malformed vocab_map.json its path). A missing vocab_map.json is not an error: LoadVocabMap
// returns a nil map, which Apply, OtherRate, ModelVocabSize and Equal accept (Size and Save
// need a map). When its context is cancelled, Tokenize returns an error wrapping ctx.Err().
//
// # Concurrency
//
// The package has no global state, and its functions may be called from several goroutines at
// once. Tokenize encodes on all cores through the tokenizer's EncodeBatch. A VocabMap is not
// changed after NewVocabMap or LoadVocabMap returns it, so its methods are safe for concurrent
// use.
package gocorpus
