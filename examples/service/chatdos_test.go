package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// doublingChatTemplate builds two equal values of 2^40 leaves apart ({% set x = [x, x] %} in a
// loop: a few hundred steps) and compares them, which walks every path through both unless the
// walk is charged: about a second to the render's MaxSteps now, hours before (issue 38,
// finding 2). Then it renders the conversation as a template would.
const doublingChatTemplate = `{% set ns = namespace(v=[1]) %}{% for i in range(40) %}{% set x = ns.v %}{% set ns.v = [x, x] %}{% endfor %}{% set x = ns.v %}` +
	`{% set ns = namespace(v=[1]) %}{% for i in range(40) %}{% set y = ns.v %}{% set ns.v = [y, y] %}{% endfor %}{% set y = ns.v %}` +
	`{% if x == y %}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}<|im_start|>assistant\n{% endif %}`

// dosWait bounds the waits below: it exists only so that a regression (a render deaf to its
// limits and to its request, holding the only generation slot for hours) fails instead of
// hanging the test; it is not a speed assertion.
const dosWait = time.Minute

// TestGenerateChatDoublingTemplate: a chat /generate whose model directory carries a template
// that doubles a value is answered 400 naming the messages, the template file and the limit
// (the old render walked the value for hours, at 100% CPU, holding the generation slot); a
// client that leaves during such a render frees the slot (the render stops with the request's
// context); and an ordinary chat request on the same server, whose one generation slot both
// took, is answered normally after each.
func TestGenerateChatDoublingTemplate(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "qwen3-chat")
	chatModelDir(t, dir)
	hostile := filepath.Join(tmp, "doubling")
	if err := os.Mkdir(hostile, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors", "tokenizer.json"} {
		if err := os.Link(filepath.Join(dir, f), filepath.Join(hostile, f)); err != nil {
			t.Fatal(err)
		}
	}
	tmplPath := filepath.Join(hostile, "chat_template.jinja")
	if err := os.WriteFile(tmplPath, []byte(doublingChatTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, openRuntime(t), Config{DataDir: filepath.Join(tmp, "data"), InputRoots: []string{tmp}, BaseDir: tmp, MaxGenerating: 1})
	conv := `[{"role": "user", "content": "Name a colour."}]`
	ordinary := func(what string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), dosWait)
		defer cancel()
		code, body := post(t, ctx, ts.url+"/generate", fmt.Sprintf(`{"model": %q, "messages": %s, "max_new_tokens": 2}`, dir, conv))
		var ans generateResponse
		if code != http.StatusOK || json.Unmarshal(body, &ans) != nil || len(ans.TokenIDs) != 2 || ans.Reply == nil {
			t.Fatalf("%s: ordinary chat request: %d %s", what, code, body)
		}
	}
	ordinary("before")

	// The template reaches the render's step limit: a 400 naming it.
	ctx, cancel := context.WithTimeout(t.Context(), dosWait)
	defer cancel()
	start := time.Now()
	code, body := post(t, ctx, ts.url+"/generate", fmt.Sprintf(`{"model": %q, "messages": %s}`, hostile, conv))
	var eb errorBody
	_ = json.Unmarshal(body, &eb)
	t.Logf("doubling template: %d after %v: %s", code, time.Since(start).Round(time.Millisecond), body)
	if code != http.StatusBadRequest || len(eb.Fields) == 0 || eb.Fields[0].Field != "messages" ||
		!strings.Contains(eb.Error, tmplPath) || !strings.Contains(eb.Error, "MaxSteps") {
		t.Fatalf("doubling template: %d %s; want 400 naming messages, %s and MaxSteps", code, body, tmplPath)
	}
	ordinary("after the 400")

	// A client that gives up during the render: the render stops with the request.
	ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if code, body := post(t, ctx, ts.url+"/generate", fmt.Sprintf(`{"model": %q, "messages": %s}`, hostile, conv)); code != 0 {
		t.Logf("the client meant to leave was answered first: %d %s", code, body)
	}
	ordinary("after a client left")
}

// post makes one POST under ctx and returns the status and body; status 0 when ctx ended first.
func post(t *testing.T, ctx context.Context, url, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
		return 0, nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil
		}
		t.Fatal(err)
	}
	return resp.StatusCode, b
}
