package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"sort"
	"sync"
	"syscall"

	"github.com/gotpu/gotpu/internal/aslimit"
	"github.com/gotpu/gotpu/internal/cli"
	"github.com/gotpu/gotpu/internal/progress"
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
		{"cache", "list or clear the persistent compilation cache (--compilation_cache_dir)", runCache},
		{"score", "score JSON-lines examples: per-example loss, optional logits file", runScore},
		{"generate", "generate tokens from a causal LM (greedy or sampled, KV cache)", runGenerate},
		{"merge", "merge a PEFT LoRA adapter into its base model and save a plain HF model (merge_and_unload)", runMerge},
		{"train", "train a Hugging Face model with HF TrainingArguments (flags or --args FILE.json)", runTrain},
		{"eval", "evaluate a Hugging Face model on a validation file", runEval},
		{"tokenize", "encode or decode JSON lines with a Hugging Face tokenizer.json", runTokenize},
		{"chat-template", "render JSON-lines conversations with a Hugging Face chat template (apply_chat_template)", runChatTemplate},
		{"plan", "plan a run's memory per device on TPU and GPU targets, with or without FSDP", runPlan},
		{"download", "download a Hugging Face Hub repo (or some of its files) into the shared HF cache", runDownload},
		{"version", "print gotpu's version, commit, Go version and compiled-in backends", runVersion},
	}
}

func main() {
	// Under `ulimit -v` the heap gets what the runtime's and malloc's reservations leave; the
	// collector then works to stay below it (the arenas were capped when the binary loaded).
	aslimit.SoftLimit()
	ctx, stop := notifySignals(context.Background(), os.Stderr)
	code := run(ctx, commands(), os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit status: 0 on success, 1 on a runtime error,
// 2 on a usage error, 128+N when signal N (SIGINT: 130, SIGTERM: 143) stopped a command that
// then returned an error. A command that stops on a signal and returns nil has done what stopping
// means for it (`gotpu train` commits a checkpoint) and exits 0.
func run(ctx context.Context, cmds []command, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr, cmds)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
	}
	for _, c := range cmds {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		var sig *interrupt
		switch {
		case err == nil:
			return 0
		case errors.As(context.Cause(ctx), &sig):
			// Whatever the command was doing when it saw the cancellation, the signal is why it
			// stopped; its own error is shown only when it says more than "context canceled".
			if errors.Is(err, context.Canceled) {
				fmt.Fprintf(stderr, "gotpu %s: stopped by %s\n", c.name, sig.name())
			} else {
				fmt.Fprintf(stderr, "gotpu %s: stopped by %s: %v\n", c.name, sig.name(), err)
			}
			return sig.status()
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
	names := make([]string, len(cmds))
	for i, c := range cmds {
		names[i] = c.name
	}
	fmt.Fprintf(stderr, "gotpu: unknown command %q%s\n", args[0], cli.SuggestCommand(args[0], names))
	usage(stderr, cmds)
	return 2
}

func usage(w io.Writer, cmds []command) {
	fmt.Fprintln(w, "gotpu trains Hugging Face models on TPUs, GPUs and CPUs, in Go.")
	fmt.Fprintln(w, "\nUsage: gotpu <command> [flags]\n\nCommands:")
	cs := slices.Clone(cmds)
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'gotpu <command> --help' for a command's flags.")
}

// interrupt is the cause of a context cancelled by a signal.
type interrupt struct{ sig os.Signal }

func (i *interrupt) Error() string { return "stopped by " + i.name() }

func (i *interrupt) name() string {
	switch i.sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return i.sig.String()
}

// status is the shell's convention for a process ended by a signal: 128 + its number.
func (i *interrupt) status() int {
	if n, ok := i.sig.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 1
}

// notifySignals returns a context that the first SIGINT or SIGTERM cancels, with an *interrupt as
// its cause, so that the command stops at its next check (`gotpu train` commits a checkpoint
// first). It says so on stderr at once, since stopping can take a while (a step, a checkpoint),
// and a second signal then ends the process at once with status 128+N: a command that is slow to
// stop, or stuck, never needs a SIGKILL. stop releases the signals (call it when the command has
// returned).
func notifySignals(parent context.Context, stderr io.Writer) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	// Two slots: the second signal must not be dropped while the first is being handled.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case s := <-sigs:
			first := &interrupt{s}
			// On a terminal the progress bar (and the echoed ^C) hold the current line: erase
			// it first so that the message gets a line of its own; the bar redraws below it.
			lead := ""
			if progress.IsTerminal(stderr) {
				lead = "\r\x1b[K"
			}
			fmt.Fprintf(stderr, "%sgotpu: %s received: stopping (send it again to exit at once)\n", lead, first.name())
			cancel(first)
		case <-done:
			return
		}
		select {
		case s := <-sigs:
			second := &interrupt{s}
			fmt.Fprintf(stderr, "gotpu: second signal (%s): exiting now\n", second.name())
			os.Exit(second.status())
		case <-done:
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			signal.Stop(sigs)
			close(done)
			<-exited
			cancel(nil)
		})
	}
}

// cancelableReader makes reads of r return as soon as ctx is done, even while r.Read blocks (a
// pipe or terminal with nothing to read; such a read cannot be interrupted portably, and
// commands read standard input before they can check anything). It reads r on a goroutine of its
// own, one chunk ahead of the caller; once ctx is done, a read still blocked on r stays blocked
// until r returns or the process exits. Use it for standard input, which the process owns for its
// whole life, not for readers that must be closed and reused.
type cancelableReader struct {
	ctx    context.Context
	r      io.Reader
	once   sync.Once
	chunks chan chunk
	buf    []byte // the unread rest of the last chunk
	err    error  // r's error, returned once buf is empty
}

type chunk struct {
	b   []byte
	err error
}

func newCancelableReader(ctx context.Context, r io.Reader) *cancelableReader {
	return &cancelableReader{ctx: ctx, r: r, chunks: make(chan chunk)}
}

func (c *cancelableReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	// Started on the first read, so that a command that never reads leaves no goroutine behind.
	c.once.Do(func() { go c.pump() })
	for len(c.buf) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		if err := c.ctx.Err(); err != nil {
			return 0, err
		}
		select {
		case <-c.ctx.Done():
			return 0, c.ctx.Err()
		case ch := <-c.chunks:
			c.buf, c.err = ch.b, ch.err
		}
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

// pump reads r into buffers of its own (never the caller's p, which the caller owns again once
// Read has returned on cancellation) and hands them over until r fails or ctx is done.
func (c *cancelableReader) pump() {
	for {
		b := make([]byte, 64<<10)
		n, err := c.r.Read(b)
		select {
		case c.chunks <- chunk{b[:n], err}:
		case <-c.ctx.Done():
			return
		}
		if err != nil {
			return
		}
	}
}
