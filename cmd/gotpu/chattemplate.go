package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gotpu/gotpu/data/chat"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/internal/cli"
)

// maxChatLine bounds one input line of chat-template: a render's inputs plus room for the
// line's other keys.
const maxChatLine = chat.MaxInputBytes + 1<<20

// chatOut is one output line of chat-template.
type chatOut struct {
	Text           *string  `json:"text,omitempty"`
	Error          *string  `json:"error,omitempty"`
	InputIDs       []uint32 `json:"input_ids,omitempty"`
	AssistantMasks []int    `json:"assistant_masks,omitempty"`
}

// runChatTemplate implements `gotpu chat-template`: it renders the conversations of JSON lines
// `{"messages": [...]}` on stdin (other keys ignored) with a tokenizer_config.json's chat
// template, as transformers' apply_chat_template(tokenize=False) does, and writes one JSON line
// per input line, in order: `{"text": ...}`, or `{"error": ...}` when the template raised (its
// message exactly) or the line is bad. With --tokenizer the line also has "input_ids" (the text
// encoded without added special tokens) and "assistant_masks" (1 for tokens in a
// {% generation %} block; all 0 for templates without one). A line whose render reaches the
// template's limits gets an error naming the template and the limit; SIGINT or SIGTERM stops a
// render in progress (chat.Template.Render takes the command's context), and the command exits
// saying so.
func runChatTemplate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("chat-template")
	cfgPath := fs.String("tokenizer_config", "", "tokenizer_config.json holding chat_template (a chat_template.jinja beside it takes precedence)")
	name := fs.String("template", "", `template name when chat_template is a list of {"name", "template"} (default: "default")`)
	agp := fs.Bool("add_generation_prompt", false, "append the assistant header after the conversation")
	date := fs.String("date", "", "fixed clock for strftime_now: YYYY-MM-DD (00:00:00) or YYYY-MM-DDTHH:MM:SS (default: now, local time)")
	tokPath := fs.String("tokenizer", "", "tokenizer.json file or directory: also write input_ids and assistant_masks")
	if err := parse(fs, args, stderr, "--tokenizer_config FILE [--template NAME] [--add_generation_prompt] [--date YYYY-MM-DD] [--tokenizer tokenizer.json] < in.jsonl > out.jsonl"); err != nil {
		return err
	}
	if *cfgPath == "" {
		return cli.UsageError("--tokenizer_config: required")
	}
	if fs.NArg() > 0 {
		return cli.UsageError("unexpected arguments %q", fs.Args())
	}
	var now time.Time
	if *date != "" {
		var err error
		if now, err = time.Parse("2006-01-02", *date); err != nil {
			if now, err = time.Parse("2006-01-02T15:04:05", *date); err != nil {
				return cli.UsageError("--date %q: want YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS", *date)
			}
		}
	}
	tm, err := chat.LoadTemplate(*cfgPath, *name)
	if err != nil {
		return err
	}
	var tok tokenizer.Tokenizer
	if *tokPath != "" {
		p, err := tokenizer.FromFile(*tokPath)
		if err != nil {
			return err
		}
		defer p.Close()
		tok = p
	}
	in := bufio.NewReaderSize(newCancelableReader(ctx, os.Stdin), 1<<20)
	out := bufio.NewWriterSize(stdout, 1<<20)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	opts := chat.RenderOptions{AddGenerationPrompt: *agp, Now: now}
	// stopped writes out the lines rendered before the context's end, then returns its error.
	stopped := func(err error) error {
		out.Flush()
		return err
	}
	for n := 1; ; n++ {
		line, err := readChatLine(in)
		if errors.Is(err, io.EOF) && line == nil {
			break
		}
		if err != nil && !errors.Is(err, errLineTooLong) && !errors.Is(err, io.EOF) {
			if ctx.Err() != nil {
				return stopped(err)
			}
			return fmt.Errorf("reading stdin: line %d: %w", n, err)
		}
		var o chatOut
		if errors.Is(err, errLineTooLong) {
			o = chatError(fmt.Sprintf("line %d: %v", n, err))
		} else if o, err = chatLine(ctx, tm, tok, line, n, opts); err != nil {
			return stopped(err) // no line is written for the render the context's end stopped
		}
		if err := enc.Encode(o); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return stopped(ctx.Err())
		}
	}
	return out.Flush()
}

var errLineTooLong = fmt.Errorf("longer than %d bytes", maxChatLine)

// readChatLine reads one line without its newline, at most maxChatLine bytes; a longer line
// is skipped to its end and reported as errLineTooLong. At the end of input it returns the
// last line (if any) with io.EOF.
func readChatLine(r *bufio.Reader) ([]byte, error) {
	var buf []byte
	long := false
	for {
		frag, err := r.ReadSlice('\n')
		if !long {
			if len(buf)+len(frag) > maxChatLine+1 {
				long, buf = true, nil
			} else {
				buf = append(buf, frag...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && !errors.Is(err, io.EOF):
			return nil, err
		}
		if long {
			return []byte{}, errLineTooLong
		}
		if err != nil && len(buf) == 0 {
			return nil, io.EOF
		}
		buf = bytes.TrimSuffix(buf, []byte("\n"))
		buf = bytes.TrimSuffix(buf, []byte("\r"))
		return buf, err
	}
}

func chatError(msg string) chatOut { return chatOut{Error: &msg} }

// chatLine renders one input line under ctx. Its error is ctx's, once ctx is done; every other
// failure is the line's output.
func chatLine(ctx context.Context, tm *chat.Template, tok tokenizer.Tokenizer, line []byte, n int, opts chat.RenderOptions) (chatOut, error) {
	var in struct {
		Messages *[]json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(line, &in); err != nil {
		return chatError(fmt.Sprintf("line %d: %v", n, err)), nil
	}
	if in.Messages == nil {
		return chatError(fmt.Sprintf("line %d: no \"messages\" list", n)), nil
	}
	r, err := tm.Render(ctx, *in.Messages, opts)
	var raised *chat.RaiseError
	switch {
	case errors.As(err, &raised):
		return chatError(raised.Message), nil
	case err != nil && ctx.Err() != nil:
		return chatOut{}, fmt.Errorf("line %d: %w", n, err)
	case err != nil:
		return chatError(fmt.Sprintf("line %d: %v", n, err)), nil
	}
	o := chatOut{Text: &r.Text}
	if tok != nil {
		e, err := tok.Encode(r.Text, false)
		if err != nil {
			return chatError(fmt.Sprintf("line %d: tokenizing: %v", n, err)), nil
		}
		offs := make([][2]int, len(e.ByteOffsets))
		for i, b := range e.ByteOffsets {
			offs[i] = b
		}
		o.InputIDs = e.IDs
		o.AssistantMasks = chat.AssistantMask(r, offs)
		if o.InputIDs == nil {
			o.InputIDs, o.AssistantMasks = []uint32{}, []int{}
		}
	}
	return o, nil
}
