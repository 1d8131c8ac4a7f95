package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/qwen3"
	"github.com/gotpu/gotpu/xla"
)

// Qwen3's <|endoftext|> and <|im_end|>, in the tokenizer of testdata/tokenizers/qwen3.
const (
	qwenEndOfText = 151643
	qwenImEnd     = 151645
)

// makeChatModelDir writes a randomly initialised tiny Qwen3 whose vocabulary is the real Qwen3
// tokenizer's (added tokens included, so every id the template's special tokens get is the
// model's), with that tokenizer.json and Qwen3's tokenizer_config.json (its chat template) from
// testdata: a model directory `generate --chat` takes as it takes a Hub Qwen3. config.json's
// eos_token_id is <|endoftext|>, as Qwen3 base models have it; there is no
// generation_config.json, so the stop tokens are config.json's plus the template's.
func makeChatModelDir(t *testing.T) (string, *tokenizer.Pipeline) {
	t.Helper()
	dir := t.TempDir()
	writeTestTokenizer(t, "qwen3", dir)
	copyTestFile(t, filepath.Join("..", "..", "testdata", "chat", "families", "qwen3", "tokenizer_config.json"), filepath.Join(dir, "tokenizer_config.json"))
	tok, err := tokenizer.FromFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tok.Close() })

	rt, err := xla.Open(context.Background(), xla.Config{Device: "go"})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	c := qwen3.DefaultConfig()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = tok.VocabSize(true), 16, 32, 1
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.MaxPositionEmbeddings = 2, 1, 8, 256
	c.UseSlidingWindow, c.SlidingWindow = false, nil
	c.EOSTokenID = []int{qwenEndOfText}
	m, err := models.New(context.Background(), rt, c, models.NewOptions{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(dir, models.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return dir, tok
}

func copyTestFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// generateChatJSON runs `gotpu generate --chat --json` and decodes its output.
func generateChatJSON(t *testing.T, args ...string) chatResult {
	t.Helper()
	out, errOut, code := runGotpu(t, nil, append([]string{"generate", "--device", "go", "--chat", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("gotpu generate --chat %v: exit %d\n%s", args, code, errOut)
	}
	var r chatResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	return r
}

// TestGenerateChat runs the gotpu binary on a tiny Qwen3 with the real Qwen3 tokenizer and chat
// template.
//
// (1) The prompt the model gets is `gotpu chat-template --add_generation_prompt --tokenizer`'s
// input_ids for the same conversation (Qwen3's template writes no bos; the ids end with
// "<|im_start|>assistant\n"), whether the conversation comes from --messages or from --system
// and --prompt.
//
// (2) The stop rule: a free run (--eos_token_id none) gives 8 greedy tokens; the token at the
// first step k ≥ 2 whose token appears nowhere before it (nor any other stop token) becomes
// eos_token of a copy of tokenizer_config.json given as --chat_template_path. Then exactly k+1
// tokens come out, the last that token, and the reply is the text of the first k without it.
// Without the template's stop (the free run) the same prompt gives 8, so the stop cannot hold
// vacuously. --eos_token_id still overrides the rule.
func TestGenerateChat(t *testing.T) {
	dir, tok := makeChatModelDir(t)
	tmp := t.TempDir()
	conv := `[{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a colour."}]`
	msgs := writeFile(t, filepath.Join(tmp, "conv.json"), conv)

	free := generateChatJSON(t, "--model", dir, "--messages", msgs, "--max_new_tokens", "8", "--eos_token_id", "none")
	ct, errOut, code := runGotpuStdin(t, `{"messages": `+conv+`}`+"\n", "chat-template", "--tokenizer_config",
		filepath.Join(dir, "tokenizer_config.json"), "--add_generation_prompt", "--tokenizer", dir)
	if code != 0 {
		t.Fatalf("chat-template: exit %d: %s", code, errOut)
	}
	var rendered chatOut
	if err := json.Unmarshal([]byte(ct), &rendered); err != nil || rendered.Text == nil {
		t.Fatalf("chat-template output %q: %v", ct, err)
	}
	want := make([]int, len(rendered.InputIDs))
	for i, id := range rendered.InputIDs {
		want[i] = int(id)
	}
	if !slices.Equal(free.PromptIDs, want) || free.Prompt != *rendered.Text {
		t.Fatalf("prompt:\n got %v %q\nwant %v %q (chat-template --add_generation_prompt)", free.PromptIDs, free.Prompt, want, *rendered.Text)
	}
	if !strings.HasSuffix(free.Prompt, "<|im_start|>assistant\n") || !strings.HasPrefix(free.Prompt, "<|im_start|>system\nYou are terse.<|im_end|>") {
		t.Errorf("rendered prompt %q: want Qwen3's ChatML with the assistant header at the end", free.Prompt)
	}
	if len(free.GeneratedIDs) != 8 || len(free.EOSTokenIDs) != 0 {
		t.Fatalf("--eos_token_id none: generated %v, eos_token_ids %v; want 8 tokens and no stop", free.GeneratedIDs, free.EOSTokenIDs)
	}
	t.Logf("prompt: %d ids; free run: %v %q", len(free.PromptIDs), free.GeneratedIDs, free.Reply)

	// --system and --prompt make the same conversation.
	sp := generateChatJSON(t, "--model", dir, "--system", "You are terse.", "--prompt", "Name a colour.", "--max_new_tokens", "1")
	if !slices.Equal(sp.PromptIDs, want) {
		t.Errorf("--system/--prompt prompt ids %v, want %v", sp.PromptIDs, want)
	}

	// Default rule on the untouched template: config.json's <|endoftext|>, then eos_token
	// <|im_end|> (also the template's end of turn).
	def := generateChatJSON(t, "--model", dir, "--messages", msgs, "--max_new_tokens", "8")
	if !slices.Equal(def.EOSTokenIDs, []int{qwenEndOfText, qwenImEnd}) {
		t.Errorf("eos_token_ids %v, want [%d %d] (config.json's eos, then the template's <|im_end|>)", def.EOSTokenIDs, qwenEndOfText, qwenImEnd)
	}

	k := -1
	for i := 2; i < len(free.GeneratedIDs); i++ {
		if slices.ContainsFunc(free.GeneratedIDs[:i+1], func(id int) bool { return id == qwenEndOfText || id == qwenImEnd }) {
			break
		}
		if !slices.Contains(free.GeneratedIDs[:i], free.GeneratedIDs[i]) {
			k = i
			break
		}
	}
	if k < 0 {
		t.Fatalf("free run %v has no step ≥ 2 with a new token: change the model's seed", free.GeneratedIDs)
	}
	target := free.GeneratedIDs[k]
	tokStr, ok := tok.IDToToken(uint32(target))
	if !ok {
		t.Fatalf("token %d has no string", target)
	}
	var cfg map[string]any
	b, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["eos_token"] = tokStr
	b, _ = json.Marshal(cfg)
	eotDir := t.TempDir()
	eotCfg := writeFile(t, filepath.Join(eotDir, "tokenizer_config.json"), string(b))

	got := generateChatJSON(t, "--model", dir, "--messages", msgs, "--max_new_tokens", "8", "--chat_template_path", eotCfg)
	wantReply, err := tok.Decode(toU32(free.GeneratedIDs[:k]), true)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.PromptIDs, free.PromptIDs) || !slices.Equal(got.GeneratedIDs, free.GeneratedIDs[:k+1]) ||
		got.Reply != wantReply || !slices.Contains(got.EOSTokenIDs, target) {
		t.Fatalf("eos_token %q (%d): generated %v reply %q eos %v; want %v, reply %q",
			tokStr, target, got.GeneratedIDs, got.Reply, got.EOSTokenIDs, free.GeneratedIDs[:k+1], wantReply)
	}
	withStop, _ := tok.Decode(toU32(free.GeneratedIDs[:k+1]), true)
	if withStop == wantReply {
		t.Fatalf("token %q decodes to nothing: the reply check is vacuous", tokStr)
	}
	t.Logf("eos_token %q = %d at step %d: %d tokens, reply %q", tokStr, target, k+1, len(got.GeneratedIDs), got.Reply)

	// Text output: the reply on one line.
	out, errOut, code := runGotpu(t, nil, "generate", "--device", "go", "--chat", "--model", dir, "--messages", msgs,
		"--max_new_tokens", "8", "--chat_template_path", eotCfg)
	if code != 0 || out != wantReply+"\n" {
		t.Errorf("text output %q (exit %d, %s), want %q", out, code, errOut, wantReply+"\n")
	}
	// --eos_token_id overrides the rule.
	over := generateChatJSON(t, "--model", dir, "--messages", msgs, "--max_new_tokens", "8", "--chat_template_path", eotCfg, "--eos_token_id", "none")
	if !slices.Equal(over.GeneratedIDs, free.GeneratedIDs) {
		t.Errorf("--eos_token_id none over the template's stop: %v, want %v", over.GeneratedIDs, free.GeneratedIDs)
	}

	// A bare .jinja template: rendered with the model directory's special tokens.
	jinja := writeFile(t, filepath.Join(tmp, "plain.jinja"),
		"{% for m in messages %}<|im_start|>{{ m.role }}: {{ m.content }}{{ eos_token }}\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant: {% endif %}")
	j := generateChatJSON(t, "--model", dir, "--prompt", "Hi", "--max_new_tokens", "2", "--chat_template_path", jinja)
	if j.Prompt != "<|im_start|>user: Hi<|im_end|>\n<|im_start|>assistant: " || !slices.Contains(j.EOSTokenIDs, qwenImEnd) {
		t.Errorf(".jinja template: prompt %q eos %v", j.Prompt, j.EOSTokenIDs)
	}
}

func toU32(ids []int) []uint32 {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out
}

// TestGenerateChatErrors: each bad input is an error that says what is wrong where, before any
// generation: usage mistakes exit 2, bad files exit 1 naming the file and field.
func TestGenerateChatErrors(t *testing.T) {
	dir, _ := makeChatModelDir(t)
	tmp := t.TempDir()
	bare := filepath.Join(tmp, "no-template")
	if err := os.Mkdir(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		copyTestFile(t, filepath.Join(dir, f), filepath.Join(bare, f))
	}
	bad := func(name, content string) string { return writeFile(t, filepath.Join(tmp, name), content) }
	noRole := bad("norole.json", `{"messages": [{"role": "user", "content": "hi"}, {"content": "no role"}]}`)
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no template", []string{"--model", bare, "--chat", "--prompt", "hi"}, 1, []string{bare, "--chat_template_path", "no chat template"}},
		{"message without role", []string{"--model", dir, "--chat", "--messages", noRole}, 1, []string{noRole, "messages[1]", `"role"`}},
		{"role not a string", []string{"--model", dir, "--chat", "--messages", bad("role.json", `[{"role": 3, "content": "x"}]`)}, 1, []string{"role.json", "messages[0].role"}},
		{"message not an object", []string{"--model", dir, "--chat", "--messages", bad("str.json", `["hello"]`)}, 1, []string{"str.json", "messages[0]", "not a JSON object"}},
		{"not JSON", []string{"--model", dir, "--chat", "--messages", bad("broken.json", `[{"role": "user",`)}, 1, []string{"broken.json"}},
		{"no messages field", []string{"--model", dir, "--chat", "--messages", bad("obj.json", `{"conversation": []}`)}, 1, []string{"obj.json", `"messages"`}},
		{"empty", []string{"--model", dir, "--chat", "--messages", bad("empty.json", `[]`)}, 1, []string{"empty.json", "empty"}},
		{"missing file", []string{"--model", dir, "--chat", "--messages", filepath.Join(tmp, "nope.json")}, 1, []string{"nope.json"}},
		{"template raises", []string{"--model", dir, "--chat", "--messages", bad("tool.json", `[{"role": "tool", "content": "x"}]`),
			"--chat_template_path", bad("raise.jinja", `{{ raise_exception("roles must be user or assistant") }}`)}, 1, []string{"tool.json", "roles must be user or assistant"}},
		{"two system messages", []string{"--model", dir, "--chat", "--system", "a", "--messages", bad("sys.json", `[{"role": "system", "content": "b"}]`)}, 2, []string{"--system", "sys.json"}},
		{"prompt_ids with chat", []string{"--model", dir, "--chat", "--prompt_ids", "1,2"}, 2, []string{"--prompt_ids", "--chat"}},
		{"no conversation", []string{"--model", dir, "--chat"}, 2, []string{"--messages", "--prompt"}},
		{"messages without chat", []string{"--model", dir, "--prompt_ids", "1", "--messages", noRole}, 2, []string{"--messages needs --chat"}},
	} {
		out, errOut, code := runGotpu(t, nil, append([]string{"generate", "--device", "go"}, c.args...)...)
		ok := code == c.code && out == ""
		for _, w := range c.want {
			ok = ok && strings.Contains(errOut, w)
		}
		if !ok {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d naming %q", c.name, code, out, errOut, c.code, c.want)
		}
		t.Logf("%s: %s", c.name, strings.TrimSpace(errOut))
	}
}
