package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/gotpu/gotpu/internal/jinja"
)

// Size limits: a template source, a tokenizer_config.json, and the JSON of one render's
// messages, tools, documents and extra arguments together.
const (
	MaxTemplateBytes = 4 << 20
	MaxConfigBytes   = 64 << 20
	MaxInputBytes    = 64 << 20
)

// specialTokenKeys are the single-token attributes of transformers' special_tokens_map, in its
// order; additional_special_tokens is the list that follows them.
var specialTokenKeys = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}

// Template is a compiled chat template with the special tokens it is rendered with. It is safe
// for concurrent use.
type Template struct {
	name       string // where the source came from, for error messages
	tmpl       *jinja.Template
	generation bool
	specials   map[string]string
	additional []string
}

// Name is where the template came from: a file, or a file and the template's name in it.
func (t *Template) Name() string { return t.name }

// HasGeneration reports whether the template marks assistant output with
// {% generation %} ... {% endgeneration %}; only such templates give assistant masks
// (transformers' return_assistant_tokens_mask, TRL's assistant_only_loss).
func (t *Template) HasGeneration() bool { return t.generation }

// parseOptions are transformers' Jinja2 environment: trim_blocks and lstrip_blocks, one
// trailing newline dropped.
var parseOptions = jinja.ParseOptions{TrimBlocks: true, LStripBlocks: true}

// Parse compiles a chat template. name says where src came from (a file name) and is used in
// errors; specials are the special tokens passed to the template as variables (bos_token,
// eos_token, ...). A template that does not parse is an error naming name and the line.
func Parse(src, name string, specials map[string]string) (*Template, error) {
	if len(src) > MaxTemplateBytes {
		return nil, fmt.Errorf("chat template %s: %d bytes, more than the limit of %d", name, len(src), MaxTemplateBytes)
	}
	tm, err := jinja.Parse(src, parseOptions)
	if err != nil {
		var se *jinja.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("chat template %s: line %d: %s", name, se.Line, se.Msg)
		}
		return nil, fmt.Errorf("chat template %s: %w", name, err)
	}
	sp := make(map[string]string, len(specials))
	for k, v := range specials {
		sp[k] = v
	}
	return &Template{name: name, tmpl: tm, generation: tm.HasTag("generation"), specials: sp}, nil
}

// LoadTemplate reads a chat template the way transformers' tokenizer does from a
// tokenizer_config.json: a chat_template.jinja file beside it takes precedence over the
// config's chat_template (transformers >= 4.49 reads it and overwrites the config's entry);
// otherwise chat_template is a string, or a list of {"name", "template"} of which name picks
// one ("" means "default"). Special tokens (bos_token, eos_token, unk_token, sep_token,
// pad_token, cls_token, mask_token, additional_special_tokens) come from the config, as
// strings or {"content": ...} objects; null ones are left undefined.
func LoadTemplate(tokenizerConfigPath string, name string) (*Template, error) {
	cfg, err := readLimited(tokenizerConfigPath, MaxConfigBytes)
	if err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(cfg, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", tokenizerConfigPath, err)
	}
	specials, err := specialTokens(tokenizerConfigPath, raw)
	if err != nil {
		return nil, err
	}
	var additional []string
	if v, ok := raw["additional_special_tokens"]; ok && string(v) != "null" {
		var list []json.RawMessage
		if err := json.Unmarshal(v, &list); err != nil {
			return nil, fmt.Errorf("%s: field additional_special_tokens: %w", tokenizerConfigPath, err)
		}
		for i, e := range list {
			s, set, err := tokenContent(e)
			if err != nil || !set {
				return nil, fmt.Errorf("%s: field additional_special_tokens[%d]: not a token: %s", tokenizerConfigPath, i, e)
			}
			additional = append(additional, s)
		}
	}

	var src, srcName string
	jinjaPath := filepath.Join(filepath.Dir(tokenizerConfigPath), "chat_template.jinja")
	if b, err := readLimited(jinjaPath, MaxTemplateBytes); err == nil {
		if name != "" && name != "default" {
			return nil, fmt.Errorf("%s: template %q not found: the file holds one template (default)", jinjaPath, name)
		}
		src, srcName = string(b), jinjaPath
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	} else {
		src, srcName, err = configTemplate(tokenizerConfigPath, raw["chat_template"], name)
		if err != nil {
			return nil, err
		}
	}
	t, err := Parse(src, srcName, specials)
	if err != nil {
		return nil, err
	}
	t.additional = additional
	return t, nil
}

// ReadSpecialTokens reads the special tokens a template is rendered with from a
// tokenizer_config.json (at most MaxConfigBytes): bos_token, eos_token, unk_token, sep_token,
// pad_token, cls_token and mask_token, as strings or {"content": ...} objects; unset and null
// ones are left out. LoadTemplate reads the same; this serves a bare template file rendered with
// a tokenizer's tokens (ParseFile).
func ReadSpecialTokens(tokenizerConfigPath string) (map[string]string, error) {
	cfg, err := readLimited(tokenizerConfigPath, MaxConfigBytes)
	if err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(cfg, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", tokenizerConfigPath, err)
	}
	return specialTokens(tokenizerConfigPath, raw)
}

// specialTokens picks the single special tokens out of a parsed tokenizer_config.json.
func specialTokens(path string, raw map[string]json.RawMessage) (map[string]string, error) {
	specials := map[string]string{}
	for _, k := range specialTokenKeys {
		v, ok := raw[k]
		if !ok {
			continue
		}
		s, set, err := tokenContent(v)
		if err != nil {
			return nil, fmt.Errorf("%s: field %s: %w", path, k, err)
		}
		if set {
			specials[k] = s
		}
	}
	return specials, nil
}

// ParseFile reads a template file (chat_template.jinja, a .jinja or .j2 file) of at most
// MaxTemplateBytes and parses it with specials (ReadSpecialTokens; nil: none), naming the file
// in errors.
func ParseFile(path string, specials map[string]string) (*Template, error) {
	b, err := readLimited(path, MaxTemplateBytes)
	if err != nil {
		return nil, err
	}
	return Parse(string(b), path, specials)
}

// configTemplate picks the template from tokenizer_config.json's chat_template field.
func configTemplate(path string, v json.RawMessage, name string) (src, srcName string, err error) {
	if len(v) == 0 || string(v) == "null" {
		return "", "", fmt.Errorf("%s: no chat_template field and no chat_template.jinja beside it", path)
	}
	if err := json.Unmarshal(v, &src); err == nil {
		if name != "" && name != "default" {
			return "", "", fmt.Errorf("%s: field chat_template: template %q not found: the field holds one template (default)", path, name)
		}
		return src, path + " (chat_template)", nil
	}
	var list []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(v, &list); err != nil {
		return "", "", fmt.Errorf("%s: field chat_template: neither a string nor a list of {\"name\", \"template\"}: %w", path, err)
	}
	if name == "" {
		name = "default"
	}
	var names []string
	for i, e := range list {
		if e.Name == nil || e.Template == nil {
			return "", "", fmt.Errorf("%s: field chat_template[%d]: needs \"name\" and \"template\" strings", path, i)
		}
		if *e.Name == name {
			return *e.Template, fmt.Sprintf("%s (chat_template %q)", path, name), nil
		}
		names = append(names, strconv.Quote(*e.Name))
	}
	sort.Strings(names)
	return "", "", fmt.Errorf("%s: field chat_template: no template named %q; the file has %s", path, name, strings.Join(names, ", "))
}

// tokenContent reads a special token: a string, an AddedToken {"content": ...}, or null (set false).
func tokenContent(v json.RawMessage) (string, bool, error) {
	if string(v) == "null" {
		return "", false, nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return s, true, nil
	}
	var tok struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(v, &tok); err != nil || tok.Content == nil {
		return "", false, fmt.Errorf("neither a string nor an object with a \"content\" string: %.80s", v)
	}
	return *tok.Content, true, nil
}

// readLimited reads a file of at most limit bytes.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: more than the limit of %d bytes", path, limit)
	}
	return b, nil
}
