package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/gotpu/gotpu/internal/cli"
)

// command is one subcommand of gotpu.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists the subcommands; each lives in its own file.
func commands() []command {
	return []command{
		{"devices", "list the backend, plugin and devices gotpu would use", runDevices},
		{"score", "score JSON-lines examples: per-example loss, optional logits file", runScore},
		{"generate", "generate tokens from a causal LM (greedy or sampled, KV cache)", runGenerate},
		{"train", "train a Hugging Face model with HF TrainingArguments (flags or --args FILE.json)", runTrain},
		{"eval", "evaluate a Hugging Face model on a validation file", runEval},
		{"tokenize", "encode or decode JSON lines with a Hugging Face tokenizer.json", runTokenize},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, errHelp):
			return 0
		case errors.Is(err, cli.ErrUsage):
			fmt.Fprintf(stderr, "gotpu %s: %v\nRun 'gotpu %s --help' for usage.\n", c.name, err, c.name)
			return 2
		default:
			fmt.Fprintf(stderr, "gotpu %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "gotpu: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "gotpu trains Hugging Face models on TPUs, GPUs and CPUs, in Go.")
	fmt.Fprintln(w, "\nUsage: gotpu <command> [flags]\n\nCommands:")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'gotpu <command> --help' for a command's flags.")
}
