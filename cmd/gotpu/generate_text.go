package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/internal/cli"
)

// textPrompt is `generate --prompt TEXT` without --chat: the text and its ids.
type textPrompt struct {
	tok  *tokenizer.Pipeline
	text string
	ids  []int
}

// prepareTextPrompt encodes the prompt with --tokenizer's tokenizer, else the model's. Special
// tokens are added as tokenizer(text) adds them by default (input_ids for model.generate, and
// the text-generation pipeline's default): Llama's <s> first, none for GPT-2.
func prepareTextPrompt(ctx context.Context, tokFlag, prompt, modelArg, dir, revision string, stderr io.Writer) (*textPrompt, error) {
	tok, _, err := loadGenerateTokenizer(ctx, tokFlag, modelArg, dir, revision, stderr)
	if err != nil {
		return nil, fmt.Errorf("--prompt: %w", err)
	}
	e, err := tok.Encode(prompt, true)
	if err != nil {
		tok.Close()
		return nil, fmt.Errorf("--prompt: tokenizing: %w", err)
	}
	if len(e.IDs) == 0 {
		tok.Close()
		return nil, cli.UsageError("--prompt %q: the tokenizer gives no tokens for it; give a non-empty prompt", prompt)
	}
	tp := &textPrompt{tok: tok, text: prompt, ids: make([]int, len(e.IDs))}
	for i, id := range e.IDs {
		tp.ids[i] = int(id)
	}
	return tp, nil
}

// textResult is generate --prompt --json's output: generate's prompt_ids and generated_ids
// (the stop token included, as HF's generate returns it), the prompt and the decoded text.
type textResult struct {
	PromptIDs    []int  `json:"prompt_ids"`
	GeneratedIDs []int  `json:"generated_ids"`
	Prompt       string `json:"prompt"`
	Text         string `json:"text"`
}

// print writes the continuation: generated ids without the stop token that ended them, decoded
// with skip_special_tokens (tokenizer.decode(ids, skip_special_tokens=True)); the prompt is not
// repeated (as --chat prints only the reply and without --prompt only the new ids).
func (tp *textPrompt) print(stdout io.Writer, out, stops []int, asJSON bool) error {
	text, err := reply(tp.tok, out, stops)
	if err != nil {
		return fmt.Errorf("decoding the generated tokens: %w", err)
	}
	if !asJSON {
		_, err = fmt.Fprintln(stdout, text)
		return err
	}
	if out == nil {
		out = []int{}
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(textResult{PromptIDs: tp.ids, GeneratedIDs: out, Prompt: tp.text, Text: text})
}

// checkPositions refuses a generation that cannot fit the model's positions: a prompt of
// promptLen tokens leaves positions-promptLen for new ones. HF's generate warns when
// max_length exceeds max_position_embeddings and goes on (past the learned positions, or an
// index error); gotpu would cut the generation short, so the request is refused instead and the
// message names the limit and what fits. A max_new_tokens given as --max_new_tokens makes it a
// usage error (exit 2); one from generation_config.json or the default (20) an ordinary error
// saying where it came from.
func checkPositions(promptLen, maxNew, positions int, flagSet bool, genConfig string) error {
	if positions <= 0 || promptLen+maxNew <= positions {
		return nil
	}
	if promptLen >= positions {
		return cli.UsageError("the prompt is %d tokens, and the model has %d positions (config.json's n_positions / max_position_embeddings): no room for a new token; shorten the prompt to %d tokens or fewer",
			promptLen, positions, positions-1)
	}
	fits := positions - promptLen
	if flagSet {
		return cli.UsageError("--max_new_tokens %d: the prompt's %d tokens + %d new ones exceed the model's %d positions (config.json's n_positions / max_position_embeddings); give --max_new_tokens %d or less",
			maxNew, promptLen, maxNew, positions, fits)
	}
	from := "the default max_new_tokens"
	if genConfig != "" {
		from = genConfig + "'s max_new_tokens / max_length"
	}
	return fmt.Errorf("%s (%d): the prompt's %d tokens + %d new ones exceed the model's %d positions (config.json's n_positions / max_position_embeddings); give --max_new_tokens %d or less",
		from, maxNew, promptLen, maxNew, positions, fits)
}
