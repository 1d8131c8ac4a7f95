package main

import (
	"bufio"
	"context"
	"io"
	"os"

	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/internal/cli"
)

// runTokenize implements `gotpu tokenize`: JSON lines in on stdin, JSON lines out on stdout.
//
// Encoding reads `{"text": ..., "text_pair"?: ...}` and writes `{"ids": [...], "tokens": [...],
// "offsets": [[start, end], ...]}` (offsets in Unicode code points of the input, as Hugging
// Face's tokenizers report them). With --decode it reads `{"ids": [...]}` and writes
// `{"text": ...}`. Errors name the input line.
func runTokenize(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tokenize")
	path := fs.String("tokenizer", "", "tokenizer.json file, or a directory holding one (a Hugging Face model directory), or a Hub repo id")
	special := fs.Bool("add_special_tokens", false, "add the post-processor's special tokens ([CLS] ... [SEP], <s>, ...)")
	pair := fs.Bool("pair", false, `encode "text" with "text_pair" as a pair`)
	decode := fs.Bool("decode", false, `decode {"ids": [...]} lines to {"text": ...}`)
	skip := fs.Bool("skip_special_tokens", false, "with --decode: drop special tokens")
	if err := parse(fs, args, stderr, "--tokenizer FILE_OR_DIR [--add_special_tokens] [--pair] [--decode] < in.jsonl > out.jsonl"); err != nil {
		return err
	}
	if *path == "" {
		return cli.UsageError("--tokenizer: required")
	}
	if fs.NArg() > 0 {
		return cli.UsageError("unexpected arguments %q", fs.Args())
	}
	var opts0 tokenizer.HubOptions
	if !isLocal(*path) {
		c, err := newHubClient(hubFlags{}, stderr)
		if err != nil {
			return err
		}
		opts0.Hub = c
	}
	tok, err := tokenizer.FromPretrained(ctx, *path, opts0)
	if err != nil {
		return err
	}
	defer tok.Close()
	// The library checks ctx between batches of lines; reading stdin is where the command waits
	// longest (a producer that is slow or never closes the pipe), so that wait must end with ctx too.
	in := bufio.NewReaderSize(newCancelableReader(ctx, os.Stdin), 1<<20)
	out := bufio.NewWriterSize(stdout, 1<<20)
	opts := tokenizer.JSONLinesOptions{AddSpecialTokens: *special, Pair: *pair, SkipSpecialTokens: *skip}
	if *decode {
		err = tokenizer.DecodeJSONLines(ctx, tok, in, out, opts)
	} else {
		err = tokenizer.EncodeJSONLines(ctx, tok, in, out, opts)
	}
	if err != nil && ctx.Err() != nil {
		// Stopped by a signal: the output is cut short anyway, and flushing it could block on a
		// reader that has stopped reading. (Work that completed is flushed, signal or not.)
		return err
	}
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	return err
}
