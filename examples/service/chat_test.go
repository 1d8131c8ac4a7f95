package main

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data/chat"
	"github.com/gotpu/gotpu/data/tokenizer"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/qwen3"
)

// chatModelDir writes into dir a randomly initialised tiny Qwen3 whose vocabulary is the real
// Qwen3 tokenizer's (added tokens included), with that tokenizer.json and Qwen3's
// tokenizer_config.json (its chat template) from testdata. config.json's eos_token_id is
// <|endoftext|>; there is no generation_config.json.
func chatModelDir(t *testing.T, dir string) *tokenizer.Pipeline {
	t.Helper()
	root := repoRoot(t)
	f, err := os.Open(filepath.Join(root, "testdata", "tokenizers", "qwen3", "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(filepath.Join(root, "testdata", "chat", "families", "qwen3", "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	rt := openRuntime(t)
	c := qwen3.DefaultConfig()
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = tok.VocabSize(true), 16, 32, 1
	c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim, c.MaxPositionEmbeddings = 2, 1, 8, 256
	c.UseSlidingWindow, c.SlidingWindow = false, nil
	c.EOSTokenID = []int{151643}
	m, err := models.New(context.Background(), rt, c, models.NewOptions{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Save(dir, models.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestGenerateChat: a loopback server answers chat requests on a tiny Qwen3 with the real Qwen3
// tokenizer and template.
//
// POST /generate with {"model", "messages", "max_new_tokens"} and GET /generate with the same
// conversation in messages= give the same answer, whose prompt_ids are the library's
// rendering (add_generation_prompt) tokenized without special tokens, and whose stop tokens are
// config.json's <|endoftext|> and the template's <|im_end|>. The stop is checked so that it
// cannot hold vacuously: a second model directory, the same weights, whose tokenizer_config.json
// names as eos_token the token the first answer generated at step k (the first step ≥ 2 with a
// token not seen before), answers exactly k+1 tokens, the reply without that last one. Bad chat
// requests are 400s naming the field.
func TestGenerateChat(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "qwen3-chat")
	tok := chatModelDir(t, dir)
	ts := startServer(t, openRuntime(t), Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{tmp}, BaseDir: tmp})

	conv := `[{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Name a colour."}]`
	var post generateResponse
	callJSON(t, "POST", ts.url+"/generate", fmt.Sprintf(`{"model": %q, "messages": %s, "max_new_tokens": 8}`, dir, conv), http.StatusOK, &post)

	tm, err := chat.LoadTemplate(filepath.Join(dir, "tokenizer_config.json"), "")
	if err != nil {
		t.Fatal(err)
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal([]byte(conv), &msgs); err != nil {
		t.Fatal(err)
	}
	r, err := tm.Render(t.Context(), msgs, chat.RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := tok.Encode(r.Text, false)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int, len(enc.IDs))
	for i, id := range enc.IDs {
		want[i] = int(id)
	}
	if !slices.Equal(post.PromptIDs, want) || post.Prompt != r.Text || !strings.HasSuffix(post.Prompt, "<|im_start|>assistant\n") {
		t.Fatalf("prompt %q %v, want %q %v", post.Prompt, post.PromptIDs, r.Text, want)
	}
	if !slices.Equal(post.EOSTokenIDs, []int{151643, 151645}) || len(post.TokenIDs) != 8 || post.Reply == nil || post.Text == nil {
		t.Fatalf("answer %+v: want 8 tokens (no stop token among them for this seed), eos_token_ids [151643 151645], a reply", post)
	}
	t.Logf("POST: %d prompt ids, %v, reply %q", len(post.PromptIDs), post.TokenIDs, *post.Reply)

	var get generateResponse
	callJSON(t, "GET", ts.url+"/generate?model="+url.QueryEscape(dir)+"&max_new_tokens=8&messages="+url.QueryEscape(conv), "", http.StatusOK, &get)
	if !slices.Equal(get.PromptIDs, post.PromptIDs) || !slices.Equal(get.TokenIDs, post.TokenIDs) || *get.Reply != *post.Reply {
		t.Fatalf("GET %v %v %q differs from POST", get.PromptIDs, get.TokenIDs, *get.Reply)
	}
	// system= and chat=true&prompt= build the same conversation.
	var sp generateResponse
	callJSON(t, "GET", ts.url+"/generate?model="+url.QueryEscape(dir)+"&max_new_tokens=1&chat=true&prompt=Name+a+colour.&system=You+are+terse.", "", http.StatusOK, &sp)
	if !slices.Equal(sp.PromptIDs, want) {
		t.Fatalf("chat=true&prompt=&system=: prompt ids %v, want %v", sp.PromptIDs, want)
	}

	k := -1
	for i := 2; i < len(post.TokenIDs); i++ {
		if !slices.Contains(post.TokenIDs[:i], post.TokenIDs[i]) {
			k = i
			break
		}
	}
	if k < 0 {
		t.Fatalf("%v has no step ≥ 2 with a new token: change the model's seed", post.TokenIDs)
	}
	target := post.TokenIDs[k]
	tokStr, _ := tok.IDToToken(uint32(target))
	dir2 := filepath.Join(tmp, "qwen3-chat-eot")
	if err := os.Mkdir(dir2, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		if err := os.Link(filepath.Join(dir, f), filepath.Join(dir2, f)); err != nil {
			t.Fatal(err)
		}
	}
	var cfg map[string]any
	b, _ := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["eos_token"] = tokStr
	b, _ = json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir2, "tokenizer_config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	var stopped generateResponse
	callJSON(t, "POST", ts.url+"/generate", fmt.Sprintf(`{"model": %q, "messages": %s, "max_new_tokens": 8}`, dir2, conv), http.StatusOK, &stopped)
	wantReply, _ := tok.Decode(toU32(post.TokenIDs[:k]), true)
	withStop, _ := tok.Decode(toU32(post.TokenIDs[:k+1]), true)
	if !slices.Equal(stopped.TokenIDs, post.TokenIDs[:k+1]) || *stopped.Reply != wantReply || wantReply == withStop ||
		!slices.Contains(stopped.EOSTokenIDs, target) {
		t.Fatalf("eos_token %q (%d): %v reply %q eos %v; want %v reply %q", tokStr, target, stopped.TokenIDs, *stopped.Reply,
			stopped.EOSTokenIDs, post.TokenIDs[:k+1], wantReply)
	}
	t.Logf("eos_token %q = %d: %d tokens, reply %q", tokStr, target, len(stopped.TokenIDs), *stopped.Reply)

	// A model directory with a tokenizer but no template.
	bare := filepath.Join(tmp, "no-template")
	if err := os.Mkdir(bare, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		if err := os.Link(filepath.Join(dir, f), filepath.Join(bare, f)); err != nil {
			t.Fatal(err)
		}
	}
	// A template that refuses every conversation, as a chat_template.jinja alone.
	raises := filepath.Join(tmp, "raises")
	if err := os.Mkdir(raises, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		if err := os.Link(filepath.Join(dir, f), filepath.Join(raises, f)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(raises, "chat_template.jinja"), []byte(`{{ raise_exception("Conversation roles must alternate user/assistant") }}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, method, query, body, field, msg string
	}{
		{"no template", "POST", "", fmt.Sprintf(`{"model": %q, "messages": %s}`, bare, conv), "messages", "no chat template"},
		{"message without role", "POST", "", fmt.Sprintf(`{"model": %q, "messages": [{"role": "user", "content": "a"}, {"content": "b"}]}`, dir), "messages[1]", `no "role"`},
		{"role not a string", "POST", "", fmt.Sprintf(`{"model": %q, "messages": [{"role": 1}]}`, dir), "messages[0].role", "not a string"},
		{"messages not a list", "POST", "", fmt.Sprintf(`{"model": %q, "messages": {"role": "user"}}`, dir), "messages", "JSON list"},
		{"empty conversation", "POST", "", fmt.Sprintf(`{"model": %q, "messages": []}`, dir), "messages", "empty"},
		{"template refuses", "POST", "", fmt.Sprintf(`{"model": %q, "messages": %s}`, raises, conv), "messages", "refused the conversation: Conversation roles must alternate user/assistant"},
		{"prompt_ids with messages", "POST", "", fmt.Sprintf(`{"model": %q, "messages": %s, "prompt_ids": "1,2"}`, dir, conv), "prompt_ids", "chat"},
		{"two system messages", "POST", "", fmt.Sprintf(`{"model": %q, "messages": %s, "system": "x"}`, dir, conv), "system", "already"},
		{"chat without prompt", "GET", "model=" + url.QueryEscape(dir) + "&chat=true&prompt_ids=1", "", "chat", "prompt="},
		{"system without chat", "GET", "model=" + url.QueryEscape(dir) + "&prompt_ids=1&system=x", "", "system", "chat request"},
		{"body not an object", "POST", "", `[1]`, "body", "JSON object"},
		{"list value", "POST", "", fmt.Sprintf(`{"model": %q, "prompt": ["a"]}`, dir), "prompt", "string, number or boolean"},
		{"query on a POST", "POST", "model=x", `{}`, "query", "JSON body"},
	} {
		u := ts.url + "/generate"
		if c.query != "" {
			u += "?" + c.query
		}
		code, ans := call(t, c.method, u, c.body)
		var eb errorBody
		_ = json.Unmarshal(ans, &eb)
		if code != http.StatusBadRequest || len(eb.Fields) == 0 || eb.Fields[0].Field != c.field || !strings.Contains(eb.Error, c.msg) {
			t.Errorf("%s: %d %s; want 400 naming %s with %q", c.name, code, ans, c.field, c.msg)
		}
		t.Logf("%s: %s", c.name, eb.Error)
	}
}

func toU32(ids []int) []uint32 {
	out := make([]uint32, len(ids))
	for i, id := range ids {
		out[i] = uint32(id)
	}
	return out
}
