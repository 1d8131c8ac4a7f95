package sft

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/data/chat"
	"github.com/gotpu/gotpu/data/tokenizer"
)

// Tokenizer is what Prepare needs of a tokenizer; *tokenizer.Pipeline implements it.
type Tokenizer interface {
	Encode(text string, addSpecialTokens bool) (*tokenizer.Encoding, error)
	TokenToID(token string) (uint32, bool)
}

// Stats describes a prepared dataset.
type Stats struct {
	Format Format
	// Examples is the number of rows read; Dropped those left with no label to train on after
	// truncation (TRL drops them); Truncated those cut to MaxLength (TruncatedTokens cut off).
	Examples, Dropped, Truncated, TruncatedTokens int
	// Tokens is the number of tokens in the prepared rows; TrainedTokens those whose label is
	// not data.IgnoreIndex (before the collator also ignores the label where a packed example
	// starts).
	Tokens, TrainedTokens int
	// Rows is the number of prepared examples (packed rows when packing); Longest the longest.
	Rows, Longest int
	// PrefixMismatches counts prompt–completion rows whose prompt tokens are not a prefix of
	// the prompt+completion tokens (TRL warns); FirstMismatch names the first.
	PrefixMismatches int
	FirstMismatch    string
}

// PaddingFraction is the share of Rows × blockSize token slots that padding fills once the
// rows are collated to blockSize.
func (s Stats) PaddingFraction(blockSize int) float64 {
	if s.Rows == 0 || blockSize <= 0 {
		return 0
	}
	return 1 - float64(s.Tokens)/float64(s.Rows*blockSize)
}

// maxTokens bounds one row's token count: an Encoding of more ids than this is refused before
// label arrays are made (int32 positions; a row is at most MaxRowBytes anyway).
const maxTokens = math.MaxInt32 / 2

// Prepare turns rows into training examples as TRL's SFTTrainer._prepare_dataset does (see the
// package documentation). tmpl renders conversational rows and may be nil when there are none;
// cfg.EOSToken must be set (the tokenizer's, when the user gave none) for non-conversational
// data. Errors name the row and field; the context is checked between rows, and stops a
// template's render too.
func Prepare(ctx context.Context, rows iter.Seq2[Row, error], tok Tokenizer, tmpl *chat.Template, cfg Config) ([]data.Example, Stats, error) {
	var st Stats
	if err := cfg.Validate(); err != nil {
		return nil, st, err
	}
	if cfg.AssistantOnlyLoss && tmpl != nil && !tmpl.HasGeneration() {
		return nil, st, noGenerationError(tmpl)
	}
	var eosChecked bool
	var completionOnly bool
	var out []data.Example
	for row, err := range rows {
		if err != nil {
			return nil, st, err
		}
		if err := ctx.Err(); err != nil {
			return nil, st, err
		}
		p, err := parseRow(row.JSON, cfg.DatasetTextField)
		if err != nil {
			return nil, st, fmt.Errorf("%s: %w", row.where(), err)
		}
		if st.Examples == 0 {
			// TRL decides these from the dataset's first row.
			st.Format = p.format
			completionOnly = cfg.completionOnly(p.format == PromptCompletion || p.format == ConversationalPromptCompletion)
			if cfg.AssistantOnlyLoss && !p.format.Conversational() {
				return nil, st, fmt.Errorf("%s: assistant_only_loss: the dataset is %s, not conversational; assistant-only loss needs messages rendered with a chat template (TRL refuses it too)", row.where(), p.format)
			}
		} else if p.format != st.Format {
			return nil, st, fmt.Errorf("%s: the row is %s but the first row is %s: a dataset holds one format", row.where(), p.format, st.Format)
		}
		if p.format.Conversational() && tmpl == nil {
			return nil, st, fmt.Errorf("%s: the row is conversational and there is no chat template (give chat_template_path, or a tokenizer with tokenizer_config.json)", row.where())
		}
		if !p.format.Conversational() && !eosChecked {
			if err := checkEOS(tok, cfg.EOSToken); err != nil {
				return nil, st, err
			}
			eosChecked = true
		}
		st.Examples++
		ex, err := tokenizeRow(ctx, tok, tmpl, cfg, p, completionOnly, &st, row)
		if err != nil {
			return nil, st, fmt.Errorf("%s: %w", row.where(), err)
		}
		if cfg.MaxLength > 0 && !cfg.Packing {
			if n := len(ex.InputIDs); n > cfg.MaxLength {
				st.Truncated++
				st.TruncatedTokens += n - cfg.MaxLength
				ex.InputIDs, ex.Labels = ex.InputIDs[:cfg.MaxLength:cfg.MaxLength], ex.Labels[:cfg.MaxLength:cfg.MaxLength]
			}
			if !slices.ContainsFunc(ex.Labels, func(l int32) bool { return l != data.IgnoreIndex }) {
				st.Dropped++ // TRL: "Drop examples left fully masked by truncation"
				continue
			}
		}
		out = append(out, ex)
	}
	if st.Examples == 0 {
		return nil, st, errors.New("no rows: the dataset is empty")
	}
	if cfg.Packing {
		var err error
		if out, err = pack(out, cfg, &st); err != nil {
			return nil, st, err
		}
	}
	st.Rows = len(out)
	for _, ex := range out {
		st.Tokens += len(ex.InputIDs)
		st.Longest = max(st.Longest, len(ex.InputIDs))
		for _, l := range ex.Labels {
			if l != data.IgnoreIndex {
				st.TrainedTokens++
			}
		}
	}
	if st.Rows == 0 {
		return nil, st, fmt.Errorf("max_length %d: all %d examples were dropped: none has a token to train on within max_length", cfg.MaxLength, st.Examples)
	}
	return out, st, nil
}

// noGenerationError is the refusal of assistant_only_loss with a template that cannot mark
// the assistant's tokens (transformers' return_assistant_tokens_mask needs the blocks).
func noGenerationError(tmpl *chat.Template) error {
	return fmt.Errorf("assistant_only_loss: the chat template %s has no {%% generation %%} blocks, so the assistant's tokens cannot be told apart; "+
		"use a training template that marks them (e.g. TRL's trl/chat_templates/*_training.jinja) with chat_template_path", tmpl.Name())
}

// checkEOS refuses an EOS token the tokenizer does not know, as SFTTrainer does.
func checkEOS(tok Tokenizer, eos string) error {
	if eos == "" {
		return errors.New("eos_token: not set and the tokenizer has none (tokenizer_config.json's eos_token): language-modeling and prompt-completion text ends with it; give eos_token")
	}
	if _, ok := tok.TokenToID(eos); !ok {
		return fmt.Errorf("eos_token: %q is not in the tokenizer's vocabulary", eos)
	}
	return nil
}

// tokenizeRow is TRL's add_eos, tokenize_fn and build_labels for one row; its templates render
// under ctx.
func tokenizeRow(ctx context.Context, tok Tokenizer, tmpl *chat.Template, cfg Config, p parsed, completionOnly bool, st *Stats, row Row) (data.Example, error) {
	opts := chat.RenderOptions{Tools: p.tools, Extra: p.kwargs}
	var ids []int32
	var assistant []int // assistant_masks, when assistant_only_loss
	promptLen := -1     // tokens of the prompt, prompt–completion only
	switch p.format {
	case Text:
		text := p.text
		// TRL's add_eos tests the column literally named "text", not dataset_text_field: with
		// another field name no EOS is appended. Kept as TRL does it.
		if cfg.DatasetTextField == "text" && !strings.HasSuffix(text, cfg.EOSToken) {
			text += cfg.EOSToken
		}
		e, err := encode(tok, text, true, cfg.DatasetTextField)
		if err != nil {
			return data.Example{}, err
		}
		ids = e
	case Messages:
		r, err := tmpl.Render(ctx, p.messages, opts)
		if err != nil {
			return data.Example{}, fmt.Errorf("field \"messages\": %w", err)
		}
		var enc *tokenizer.Encoding
		if ids, enc, err = encodeWith(tok, r.Text, false, "messages"); err != nil {
			return data.Example{}, err
		}
		if cfg.AssistantOnlyLoss {
			assistant = chat.AssistantMask(r, byteOffsets(enc))
		}
	case PromptCompletion:
		completion := p.completion
		if !strings.HasSuffix(completion, cfg.EOSToken) {
			completion += cfg.EOSToken
		}
		prompt, err := encode(tok, p.prompt, true, "prompt")
		if err != nil {
			return data.Example{}, err
		}
		if ids, err = encode(tok, p.prompt+completion, true, "completion"); err != nil {
			return data.Example{}, err
		}
		promptLen = len(prompt)
		checkPrefix(prompt, ids, st, row)
	case ConversationalPromptCompletion:
		pr, err := tmpl.Render(ctx, p.messages, chat.RenderOptions{AddGenerationPrompt: true, Tools: p.tools, Extra: p.kwargs})
		if err != nil {
			return data.Example{}, fmt.Errorf("field \"prompt\": %w", err)
		}
		prompt, err := encode(tok, pr.Text, false, "prompt")
		if err != nil {
			return data.Example{}, err
		}
		all := append(slices.Clip(p.messages), p.completionMessages...)
		r, err := tmpl.Render(ctx, all, opts)
		if err != nil {
			return data.Example{}, fmt.Errorf("fields \"prompt\" + \"completion\": %w", err)
		}
		var enc *tokenizer.Encoding
		if ids, enc, err = encodeWith(tok, r.Text, false, "completion"); err != nil {
			return data.Example{}, err
		}
		if cfg.AssistantOnlyLoss {
			assistant = chat.AssistantMask(r, byteOffsets(enc))
		}
		promptLen = len(prompt)
		checkPrefix(prompt, ids, st, row)
	}
	if assistant != nil && !slices.Contains(assistant, 1) {
		return data.Example{}, fmt.Errorf("assistant_only_loss: the conversation has no assistant tokens (no {%% generation %%} block rendered: no assistant message?); TRL refuses such a row too")
	}
	labels := make([]int32, len(ids))
	for i, id := range ids {
		labels[i] = id
		if completionOnly && promptLen >= 0 && i < promptLen {
			labels[i] = data.IgnoreIndex
		}
		if assistant != nil && assistant[i] == 0 {
			labels[i] = data.IgnoreIndex
		}
	}
	return data.Example{InputIDs: ids, Labels: labels}, nil
}

// checkPrefix counts a prompt whose tokens are not the start of the prompt+completion tokens
// (TRL logs "Mismatch between tokenized prompt and the start of tokenized prompt+completion").
func checkPrefix(prompt, all []int32, st *Stats, row Row) {
	if len(prompt) <= len(all) && slices.Equal(prompt, all[:len(prompt)]) {
		return
	}
	st.PrefixMismatches++
	if st.FirstMismatch == "" {
		st.FirstMismatch = row.where()
	}
}

func encode(tok Tokenizer, text string, special bool, field string) ([]int32, error) {
	ids, _, err := encodeWith(tok, text, special, field)
	return ids, err
}

// encodeWith tokenizes text and converts the ids, checking the count first.
func encodeWith(tok Tokenizer, text string, special bool, field string) ([]int32, *tokenizer.Encoding, error) {
	e, err := tok.Encode(text, special)
	if err != nil {
		return nil, nil, fmt.Errorf("field %q: tokenizing: %w", field, err)
	}
	if len(e.IDs) > maxTokens {
		return nil, nil, fmt.Errorf("field %q: %d tokens, more than %d", field, len(e.IDs), maxTokens)
	}
	ids := make([]int32, len(e.IDs))
	for i, id := range e.IDs {
		if id > math.MaxInt32 {
			return nil, nil, fmt.Errorf("field %q: token id %d does not fit int32", field, id)
		}
		ids[i] = int32(id)
	}
	return ids, e, nil
}

// byteOffsets converts an encoding's byte offsets for chat.AssistantMask.
func byteOffsets(e *tokenizer.Encoding) [][2]int {
	offs := make([][2]int, len(e.ByteOffsets))
	for i, o := range e.ByteOffsets {
		offs[i] = o
	}
	return offs
}
