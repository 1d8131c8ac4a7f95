package chat

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data/tokenizer"
)

func loadTok(t *testing.T, name string) *tokenizer.Pipeline {
	t.Helper()
	p, err := tokenizer.FromFile(filepath.Join("..", "..", "testdata", "tokenizers", name, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStopTokens: the eos_token of the config plus the special token a template writes after
// an assistant's content; nothing for a template that ends turns with text.
func TestStopTokens(t *testing.T) {
	qwen := loadTok(t, "qwen3")
	mistral := loadTok(t, "mistral-7b")
	load := func(family string) *Template {
		tm, err := LoadTemplate(filepath.Join(chatDir, "families", family, "tokenizer_config.json"), "")
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	for _, c := range []struct {
		name string
		tm   *Template
		tok  StopTokenizer
		want []int
	}{
		// Qwen3: eos_token <|im_end|> (151645) is also what ends a turn.
		{"qwen3", load("qwen3"), qwen, []int{151645}},
		// Mistral v0.1: eos_token </s> (2) ends each [INST] answer.
		{"mistral-7b-v0.1", load("mistral-7b-v0.1"), mistral, []int{2}},
		// eos <|endoftext|> (151643), while turns end with <|im_end|> (151645): both stop.
		{"eos and turn end differ", mustParseWith(t, "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}",
			map[string]string{"eos_token": "<|endoftext|>"}), qwen, []int{151643, 151645}},
		// Turns end with text: no stop token beyond the model's own.
		{"text turn end", mustParseWith(t, "{% for m in messages %}{{ m.role }}: {{ m.content }}\nEND\n{% endfor %}", nil), qwen, nil},
	} {
		if got, err := c.tm.StopTokens(t.Context(), c.tok); err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: StopTokens = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
	// A context already done: its error, not a set of stops missing the template's.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if got, err := load("qwen3").StopTokens(ctx, qwen); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: StopTokens = %v, %v; want context.Canceled", got, err)
	}
}

func mustParseWith(t *testing.T, src string, specials map[string]string) *Template {
	t.Helper()
	tm, err := Parse(src, "test.jinja", specials)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// TestCheckMessage: what Render requires of a message, with the field named.
func TestCheckMessage(t *testing.T) {
	for _, c := range []struct{ msg, field, problem string }{
		{`{"role": "user", "content": "x"}`, "", ""},
		{`5`, "", "not a JSON object: 5"},
		{`{"content": "x"}`, "", `no "role"`},
		{`{"role": 3}`, ".role", "not a string: 3"},
	} {
		err := CheckMessage([]byte(c.msg))
		var me *MessageError
		switch {
		case c.problem == "" && err != nil:
			t.Errorf("%s: %v", c.msg, err)
		case c.problem != "" && (!errors.As(err, &me) || me.Field != c.field || me.Problem != c.problem):
			t.Errorf("%s: %v, want field %q problem %q", c.msg, err, c.field, c.problem)
		}
	}
}

// TestParseFileAndSpecialTokens: a bare template file rendered with a config's special tokens
// (what generate --chat and SFT's chat_template_path do); an oversized file is refused, naming it.
func TestParseFileAndSpecialTokens(t *testing.T) {
	sp, err := ReadSpecialTokens(filepath.Join(chatDir, "families", "qwen3", "tokenizer_config.json"))
	if err != nil || sp["eos_token"] != "<|im_end|>" {
		t.Fatalf("special tokens %v, %v", sp, err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "t.jinja")
	if err := os.WriteFile(path, []byte("{{ messages[0].content }}{{ eos_token }}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tm, err := ParseFile(path, sp)
	if err != nil {
		t.Fatal(err)
	}
	r, err := tm.Render(t.Context(), []json.RawMessage{TextMessage("user", "hi")}, RenderOptions{})
	if err != nil || r.Text != "hi<|im_end|>" {
		t.Fatalf("render %q, %v", r.Text, err)
	}
	big := filepath.Join(dir, "big.jinja")
	if err := os.WriteFile(big, make([]byte, MaxTemplateBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseFile(big, nil); err == nil || !strings.Contains(err.Error(), big) {
		t.Fatalf("oversized template: %v", err)
	}
}
