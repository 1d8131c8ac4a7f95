package jinja

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fuzzLimits keep one fuzzed render small and short.
var fuzzLimits = Limits{MaxOutputBytes: 1 << 20, MaxBytes: 8 << 20, MaxSteps: 200_000, MaxDepth: 50}

func addGoldenSeeds(f *testing.F, withCtx bool) {
	for _, file := range []string{"golden.jsonl", "probes.jsonl"} {
		for _, c := range readGolden(f, file) {
			if withCtx {
				f.Add(c.Tpl, string(c.Ctx))
			} else {
				f.Add(c.Tpl)
			}
		}
	}
}

// FuzzParse: Parse never panics (a recovered panic is an "internal error").
func FuzzParse(f *testing.F) {
	addGoldenSeeds(f, false)
	f.Fuzz(func(t *testing.T, src string) {
		_, err := Parse(src, transformersOptions)
		if err != nil && strings.Contains(err.Error(), "internal error") {
			t.Fatal(err)
		}
		var se *SyntaxError
		if err != nil && (!errors.As(err, &se) || se.Line < 1) {
			t.Fatalf("not a SyntaxError with a line: %v", err)
		}
	})
}

// FuzzRender: rendering never panics, the limits hold, and generation spans lie in the text.
func FuzzRender(f *testing.F) {
	addGoldenSeeds(f, true)
	f.Fuzz(func(t *testing.T, src, ctx string) {
		tm, err := Parse(src, transformersOptions)
		if err != nil {
			return
		}
		vars := map[string]Value{}
		if v, err := FromJSON([]byte(ctx)); err == nil {
			if d, ok := v.AsDict(); ok {
				for i, k := range d.Keys() {
					if s, ok := k.AsString(); ok {
						vars[s] = d.Values()[i]
					}
				}
			}
		}
		res, err := tm.Render(context.Background(), vars, fuzzLimits)
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatal(err)
			}
			return
		}
		if int64(len(res.Text)) > fuzzLimits.MaxOutputBytes {
			t.Fatalf("output of %d bytes", len(res.Text))
		}
		for _, g := range res.Generation {
			if g[0] < 0 || g[0] > g[1] || g[1] > len(res.Text) {
				t.Fatalf("span %v outside %d bytes", g, len(res.Text))
			}
		}
	})
}

// qwen3Conversation is 25 messages: a system prompt and 12 rounds, some with tool calls and
// thinking.
func qwen3Conversation() []Value {
	var msgs []any
	msgs = append(msgs, map[string]any{"role": "system", "content": "You are a helpful assistant. Answer concisely and cite sources when you can."})
	for i := range 12 {
		msgs = append(msgs, map[string]any{"role": "user", "content": fmt.Sprintf("Question %d: what is the capital of country number %d, and how many people live there?", i, i)})
		a := map[string]any{"role": "assistant", "content": fmt.Sprintf("<think>\nThe user asks about country %d. Let me recall.\n</think>\n\nThe capital of country %d has about %d million inhabitants.", i, i, i+1)}
		if i%4 == 3 {
			a["tool_calls"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "lookup", "arguments": map[string]any{"country": i, "field": "population"}}}}
		}
		msgs = append(msgs, a)
	}
	b, _ := json.Marshal(msgs)
	v, err := FromJSON(b)
	if err != nil {
		panic(err)
	}
	return v.Items()
}

// BenchmarkRenderQwen3: the Qwen3 chat template on a 25-message conversation.
func BenchmarkRenderQwen3(b *testing.B) {
	raw, err := os.ReadFile(filepath.Join("..", "..", "testdata", "chat", "families", "qwen3", "tokenizer_config.json"))
	if err != nil {
		b.Fatal(err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		b.Fatal(err)
	}
	tm, err := Parse(cfg.ChatTemplate, transformersOptions)
	if err != nil {
		b.Fatal(err)
	}
	vars := map[string]Value{"messages": List(qwen3Conversation()...), "add_generation_prompt": Bool(true), "tools": None()}
	res, err := tm.Render(context.Background(), vars, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(res.Text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tm.Render(context.Background(), vars, Limits{}); err != nil {
			b.Fatal(err)
		}
	}
}
