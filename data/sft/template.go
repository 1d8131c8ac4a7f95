package sft

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/gotpu/gotpu/data/chat"
)

// TokenizerConfig is what SFT reads of a tokenizer_config.json: its special tokens.
type TokenizerConfig struct {
	Path string
	// Specials are bos_token, eos_token, unk_token, sep_token, pad_token, cls_token and
	// mask_token, those set (strings or {"content": ...}).
	Specials map[string]string
}

// EOSToken is the config's eos_token ("" when unset).
func (c TokenizerConfig) EOSToken() string { return c.Specials["eos_token"] }

// PadToken is the config's pad_token ("" when unset).
func (c TokenizerConfig) PadToken() string { return c.Specials["pad_token"] }

// ReadTokenizerConfig reads the special tokens of a tokenizer_config.json (at most
// chat.MaxConfigBytes).
func ReadTokenizerConfig(path string) (TokenizerConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return TokenizerConfig{}, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, chat.MaxConfigBytes+1))
	if err != nil {
		return TokenizerConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	if len(b) > chat.MaxConfigBytes {
		return TokenizerConfig{}, fmt.Errorf("%s: more than %d bytes", path, chat.MaxConfigBytes)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return TokenizerConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	c := TokenizerConfig{Path: path, Specials: map[string]string{}}
	for _, k := range []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"} {
		v, ok := raw[k]
		if !ok || string(v) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			c.Specials[k] = s
			continue
		}
		var tok struct {
			Content *string `json:"content"`
		}
		if err := json.Unmarshal(v, &tok); err != nil || tok.Content == nil {
			return TokenizerConfig{}, fmt.Errorf("%s: field %s: neither a string nor an object with a \"content\" string", path, k)
		}
		c.Specials[k] = *tok.Content
	}
	return c, nil
}

// IsJinja reports whether a chat_template_path names a template file (TRL: a file ending in
// .jinja or .j2) rather than a tokenizer.
func IsJinja(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && (ext == ".jinja" || ext == ".j2")
}

// LoadChatTemplate loads the template a chat_template_path names, as TRL's SFTTrainer reads
// it: a .jinja/.j2 file is the template itself (rendered with specials, the special tokens of
// the tokenizer in use); otherwise the path is a tokenizer — its tokenizer_config.json, or a
// directory holding one — whose template (a chat_template.jinja beside it first) and special
// tokens are taken, as TRL's clone_chat_template does.
func LoadChatTemplate(path string, specials map[string]string) (*chat.Template, error) {
	if IsJinja(path) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, chat.MaxTemplateBytes+1))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return chat.Parse(string(b), path, specials)
	}
	if st, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	} else if st.IsDir() {
		path = filepath.Join(path, "tokenizer_config.json")
	}
	return chat.LoadTemplate(path, "")
}

// ResolvePad picks the padding token as SFTTrainer does: pad_token, else the tokenizer's, else
// its EOS; the token must be in the vocabulary. It returns the token and its id.
func ResolvePad(tok Tokenizer, padToken, tokenizerPad, eos string) (string, int32, error) {
	pad := padToken
	for _, p := range []string{tokenizerPad, eos} {
		if pad == "" {
			pad = p
		}
	}
	if pad == "" {
		return "", 0, fmt.Errorf("pad_token: not set, and the tokenizer has neither a pad nor an EOS token: give pad_token")
	}
	id, ok := tok.TokenToID(pad)
	if !ok {
		return "", 0, fmt.Errorf("pad_token: %q is not in the tokenizer's vocabulary", pad)
	}
	return pad, int32(id), nil
}
