package sft

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/gotpu/gotpu/data/table"
)

// Format is the kind of SFT data a row holds (TRL's dataset types).
type Format int

// The formats Prepare reads.
const (
	// Text is language modelling: one string field (Config.DatasetTextField).
	Text Format = iota + 1
	// Messages is conversational language modelling: "messages" (or ShareGPT's "conversations").
	Messages
	// PromptCompletion is "prompt" and "completion" strings.
	PromptCompletion
	// ConversationalPromptCompletion is "prompt" and "completion" message lists.
	ConversationalPromptCompletion
)

func (f Format) String() string {
	switch f {
	case Text:
		return "language modeling (text)"
	case Messages:
		return "conversational language modeling (messages)"
	case PromptCompletion:
		return "prompt-completion"
	case ConversationalPromptCompletion:
		return "conversational prompt-completion"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// Conversational reports whether rows of the format are rendered with a chat template.
func (f Format) Conversational() bool { return f == Messages || f == ConversationalPromptCompletion }

// Row is one raw row: a JSON object, and where it came from for error messages.
type Row struct {
	Source string // the file
	// Line is the 1-based line of a JSON-lines row (0 when not from lines); Index the 0-based row
	// index otherwise.
	Line  int
	Index int64
	JSON  json.RawMessage
}

// where names the row in errors: "file.jsonl: line 3" or "file.parquet: row 12".
func (r Row) where() string {
	src := r.Source
	if src == "" {
		src = "input"
	}
	if r.Line > 0 {
		return fmt.Sprintf("%s: line %d", src, r.Line)
	}
	return fmt.Sprintf("%s: row %d", src, r.Index)
}

// parsed is a row's content after format detection and validation.
type parsed struct {
	format             Format
	text               string            // Text
	prompt, completion string            // PromptCompletion
	messages           []json.RawMessage // Messages; the prompt of ConversationalPromptCompletion
	completionMessages []json.RawMessage // ConversationalPromptCompletion
	tools              []json.RawMessage // "tools", passed to the template (TRL json.loads a string)
	kwargs             map[string]json.RawMessage
}

// present reports whether a key is there and not null (a column missing from a row of a
// dataset with a unioned schema is null in HF datasets, so null counts as absent).
func present(obj map[string]json.RawMessage, key string) bool {
	v, ok := obj[key]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// parseRow detects a row's format from its keys, as TRL does, and validates the fields it
// reads. Errors name the field.
func parseRow(raw []byte, textField string) (parsed, error) {
	if err := table.CheckJSONRecord(raw, 0); err != nil {
		return parsed{}, err
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return parsed{}, fmt.Errorf("not a JSON object: %w", err)
	}
	var p parsed
	hasText := present(obj, textField)
	msgKey := ""
	for _, k := range []string{"messages", "conversations"} {
		if present(obj, k) {
			if msgKey != "" {
				return parsed{}, fmt.Errorf("fields \"messages\" and \"conversations\" both given: keep one")
			}
			msgKey = k
		}
	}
	hasPrompt, hasCompletion := present(obj, "prompt"), present(obj, "completion")
	var kinds []string
	if hasText {
		kinds = append(kinds, fmt.Sprintf("%q (language modeling)", textField))
	}
	if msgKey != "" {
		kinds = append(kinds, fmt.Sprintf("%q (conversational)", msgKey))
	}
	if hasPrompt || hasCompletion {
		kinds = append(kinds, `"prompt"/"completion" (prompt-completion)`)
	}
	if len(kinds) > 1 {
		return parsed{}, fmt.Errorf("mixes formats: %s; a row holds one", strings.Join(kinds, " and "))
	}
	switch {
	case hasPrompt || hasCompletion:
		if !hasPrompt || !hasCompletion {
			have, miss := "prompt", "completion"
			if !hasPrompt {
				have, miss = miss, have
			}
			return parsed{}, fmt.Errorf("field %q without %q (prompt-only data is for GRPO and DPO, not SFT)", have, miss)
		}
		pl, cl := isList(obj["prompt"]), isList(obj["completion"])
		switch {
		case pl && cl:
			p.format = ConversationalPromptCompletion
			var err error
			if p.messages, err = parseMessages("prompt", obj["prompt"], false); err != nil {
				return parsed{}, err
			}
			if p.completionMessages, err = parseMessages("completion", obj["completion"], false); err != nil {
				return parsed{}, err
			}
		case pl != cl:
			return parsed{}, fmt.Errorf("field \"prompt\" is %s but \"completion\" is %s: both strings or both message lists",
				kindOf(obj["prompt"]), kindOf(obj["completion"]))
		default:
			p.format = PromptCompletion
			var err error
			if p.prompt, err = stringField(obj, "prompt"); err != nil {
				return parsed{}, err
			}
			if p.completion, err = stringField(obj, "completion"); err != nil {
				return parsed{}, err
			}
		}
	case msgKey != "":
		p.format = Messages
		var err error
		if p.messages, err = parseMessages(msgKey, obj[msgKey], msgKey == "conversations"); err != nil {
			return parsed{}, err
		}
	case hasText:
		p.format = Text
		var err error
		if p.text, err = stringField(obj, textField); err != nil {
			return parsed{}, err
		}
	default:
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return parsed{}, fmt.Errorf("no %q, \"messages\", or \"prompt\" and \"completion\" field (fields: %s)", textField, strings.Join(keys, ", "))
	}
	if p.format.Conversational() {
		var err error
		if p.tools, err = parseTools(obj["tools"]); err != nil {
			return parsed{}, err
		}
		if present(obj, "chat_template_kwargs") {
			if err := json.Unmarshal(obj["chat_template_kwargs"], &p.kwargs); err != nil {
				return parsed{}, fmt.Errorf("field \"chat_template_kwargs\": %s, want an object", kindOf(obj["chat_template_kwargs"]))
			}
		}
	}
	return p, nil
}

// isList reports whether a JSON value is an array.
func isList(v json.RawMessage) bool {
	v = bytes.TrimSpace(v)
	return len(v) > 0 && v[0] == '['
}

// kindOf names a JSON value's type for error messages.
func kindOf(v json.RawMessage) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "missing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '[':
		return "a list"
	case '{':
		return "an object"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// stringField reads a field that must be a string.
func stringField(obj map[string]json.RawMessage, key string) (string, error) {
	var s string
	if kindOf(obj[key]) != "a string" || json.Unmarshal(obj[key], &s) != nil {
		return "", fmt.Errorf("field %q: %s, want a string", key, kindOf(obj[key]))
	}
	return s, nil
}

// parseMessages validates a message list: objects with a string "role" and a "content" that is
// a string, a list of parts, null or absent (assistant turns with tool_calls). fromValue
// converts ShareGPT's {"from", "value"} to {"role", "content"} (TRL's maybe_convert_to_chatml).
func parseMessages(field string, raw json.RawMessage, fromValue bool) ([]json.RawMessage, error) {
	msgs, err := messageList(field, raw)
	if err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, fmt.Errorf("field %q: an empty list of messages", field)
	}
	for i, m := range msgs {
		var obj map[string]json.RawMessage
		if kindOf(m) != "an object" {
			return nil, fmt.Errorf("field %q: message %d: %s, want an object with \"role\"", field, i, kindOf(m))
		}
		if err := table.CheckJSONRecord(m, 0); err != nil {
			return nil, fmt.Errorf("field %q: message %d: %w", field, i, err)
		}
		if json.Unmarshal(m, &obj) != nil {
			return nil, fmt.Errorf("field %q: message %d: %s, want an object with \"role\"", field, i, kindOf(m))
		}
		if fromValue {
			if v, ok := obj["from"]; ok {
				obj["role"] = v
				delete(obj, "from")
			}
			if v, ok := obj["value"]; ok {
				obj["content"] = v
				delete(obj, "value")
			}
			b, err := json.Marshal(obj)
			if err != nil {
				return nil, fmt.Errorf("field %q: message %d: %w", field, i, err)
			}
			msgs[i] = b
		}
		role, ok := obj["role"]
		if !ok {
			return nil, fmt.Errorf("field %q: message %d: no \"role\"", field, i)
		}
		if kindOf(role) != "a string" {
			return nil, fmt.Errorf("field %q: message %d: \"role\" is %s, want a string", field, i, kindOf(role))
		}
		if c, ok := obj["content"]; ok {
			switch kindOf(c) {
			case "a string", "a list", "null":
			default:
				return nil, fmt.Errorf("field %q: message %d: \"content\" is %s, want a string, a list of parts or null", field, i, kindOf(c))
			}
		}
	}
	return msgs, nil
}

// parseTools reads "tools": a list of tool schemas, or a string holding that list as JSON
// (TRL json.loads a string), or null.
func parseTools(raw json.RawMessage) ([]json.RawMessage, error) {
	if kindOf(raw) == "missing" || kindOf(raw) == "null" {
		return nil, nil
	}
	if kindOf(raw) == "a string" {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("field \"tools\": %w", err)
		}
		raw = json.RawMessage(s)
	}
	var tools []json.RawMessage
	if !isList(raw) || json.Unmarshal(raw, &tools) != nil {
		return nil, fmt.Errorf("field \"tools\": %s, want a list of tools (or a string of one in JSON)", kindOf(raw))
	}
	return tools, nil
}

// MaxMessages bounds the messages of one conversation. A row's bytes are bounded
// (MaxRowBytes), but decoding a list holds a slice header per element: 64 MiB of "0," made
// 32M of them (780 MB) before the first was found not to be a message.
const MaxMessages = 1 << 16

// messageList decodes a list of messages one element at a time, stopping at the first element
// that is not an object and at MaxMessages.
func messageList(field string, raw json.RawMessage) ([]json.RawMessage, error) {
	notList := fmt.Errorf("field %q: %s, want a list of messages", field, kindOf(raw))
	if !isList(raw) {
		return nil, notList
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil, notList
	}
	var msgs []json.RawMessage
	for dec.More() {
		if len(msgs) == MaxMessages {
			return nil, fmt.Errorf("field %q: more than %d messages (sft.MaxMessages, the most a conversation may hold): %w", field, MaxMessages, table.ErrTooLarge)
		}
		var m json.RawMessage
		if err := dec.Decode(&m); err != nil {
			return nil, notList
		}
		if kindOf(m) != "an object" {
			return nil, fmt.Errorf("field %q: message %d: %s, want an object with \"role\"", field, len(msgs), kindOf(m))
		}
		msgs = append(msgs, m)
	}
	return msgs, nil
}
