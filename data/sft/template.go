package sft

import (
	"fmt"
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
	sp, err := chat.ReadSpecialTokens(path)
	if err != nil {
		return TokenizerConfig{}, err
	}
	return TokenizerConfig{Path: path, Specials: sp}, nil
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
		return chat.ParseFile(path, specials)
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
