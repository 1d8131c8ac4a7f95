package chat

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/data/tokenizer"
)

// SpecialToken is the special token the template is rendered with under name ("eos_token",
// "bos_token", ...), as the tokenizer_config.json it came from gives it; false when unset.
func (t *Template) SpecialToken(name string) (string, bool) {
	s, ok := t.specials[name]
	return s, ok && s != ""
}

// StopTokenizer is what StopTokens needs of a tokenizer; *tokenizer.Pipeline implements it.
type StopTokenizer interface {
	Encode(text string, addSpecialTokens bool) (*tokenizer.Encoding, error)
	Decode(ids []uint32, skipSpecialTokens bool) (string, error)
	TokenToID(token string) (uint32, bool)
}

// turnEndProbe stands for an assistant reply in StopTokens' probe conversation: plain ASCII
// words, so that no template or tokenizer merges it with what follows.
const turnEndProbe = "gotpu turn end probe"

// StopTokens are the token ids at which a reply generated after this template's generation
// prompt ends, to be added to the model's own eos ids (generation_config.json's eos_token_id):
//
//   - the id of the template's eos_token, when the tokenizer has it as one token
//     (transformers registers eos_token as a special token; Qwen's is <|im_end|>);
//   - the template's end-of-turn token: the first special token it writes after an assistant
//     message's content, found by rendering a probe exchange (user, then assistant) and
//     tokenizing what follows the probe, whitespace-only tokens skipped. Llama 3's eos_token is
//     <|end_of_text|> while its turns end with <|eot_id|>, Gemma's <eos> while they end with
//     <end_of_turn>: generation_config.json lists those too, but a model directory without one
//     would otherwise run on past the reply.
//
// A template that ends turns with plain text adds no end-of-turn token, and one that refuses
// the probe (a raise_exception on its shape) only the eos rule: the reply then runs to the
// model's eos or the token budget.
//
// The probe is rendered under ctx: the only error is ctx's, once it is done (a template that
// fails on the probe, by raise_exception or a limit, just adds no end-of-turn token).
func (t *Template) StopTokens(ctx context.Context, tok StopTokenizer) ([]int, error) {
	var stops []int
	if eos, ok := t.SpecialToken("eos_token"); ok {
		if id, ok := tok.TokenToID(eos); ok {
			stops = append(stops, int(id))
		}
	}
	id, ok := t.turnEndToken(ctx, tok)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ok && !slices.Contains(stops, id) {
		stops = append(stops, id)
	}
	return stops, nil
}

// turnEndToken renders [user, assistant(probe)] and returns the first special token after the
// probe, skipping tokens that decode to whitespace only; false when the template refuses the
// probe or writes text first.
func (t *Template) turnEndToken(ctx context.Context, tok StopTokenizer) (int, bool) {
	r, err := t.Render(ctx, []json.RawMessage{TextMessage("user", "Hello"), TextMessage("assistant", turnEndProbe)}, RenderOptions{})
	if err != nil {
		return 0, false
	}
	i := strings.LastIndex(r.Text, turnEndProbe)
	if i < 0 {
		return 0, false
	}
	e, err := tok.Encode(r.Text[i+len(turnEndProbe):], false)
	if err != nil {
		return 0, false
	}
	for _, id := range e.IDs {
		plain, err1 := tok.Decode([]uint32{id}, false)
		skipped, err2 := tok.Decode([]uint32{id}, true)
		switch {
		case err1 != nil || err2 != nil:
			return 0, false
		case plain != "" && skipped == "": // a special token
			return int(id), true
		case strings.TrimSpace(plain) != "":
			return 0, false // text first: the template ends turns with text
		}
	}
	return 0, false
}

// TextMessage is the message {"role": role, "content": text}.
func TextMessage(role, text string) json.RawMessage {
	b, _ := json.Marshal(struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	}{role, text})
	return b
}

// MessageError is a message that is not one: Field is "" for the message itself or ".role",
// Problem says what is wrong.
type MessageError struct {
	Field, Problem string
}

func (e *MessageError) Error() string {
	if e.Field == "" {
		return e.Problem
	}
	return e.Field + ": " + e.Problem
}

// CheckMessage checks what Render requires of a message: a JSON object with a string "role".
// The error is a *MessageError.
func CheckMessage(m json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(m, &obj); err != nil || obj == nil {
		return &MessageError{Problem: fmt.Sprintf("not a JSON object: %.60s", m)}
	}
	role, ok := obj["role"]
	if !ok {
		return &MessageError{Problem: `no "role"`}
	}
	var s string
	if err := json.Unmarshal(role, &s); err != nil {
		return &MessageError{Field: ".role", Problem: fmt.Sprintf("not a string: %.60s", role)}
	}
	return nil
}
