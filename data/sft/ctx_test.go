package sft

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gotpu/gotpu/data/chat"
)

// TestPrepareStopsRendering: a chat template that would render for a second (it compares two
// equal values of 2^40 leaves, built apart by doubling) stops at Prepare's context's deadline,
// with the context's error naming the row. The old code rendered with context.Background().
func TestPrepareStopsRendering(t *testing.T) {
	d := func(name string) string {
		return "{% set ns = namespace(v=[1]) %}{% for i in range(40) %}{% set x = ns.v %}{% set ns.v = [x, x] %}{% endfor %}{% set " + name + " = ns.v %}"
	}
	tm, err := chat.Parse(d("x")+d("y")+"{{ x == y }}{% for m in messages %}{{ m.content }}{% endfor %}", "slow.jinja", nil)
	if err != nil {
		t.Fatal(err)
	}
	tok := qwen3Tok(t)
	path := writeLines(t, `{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ho"}]}`)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, _, err = Prepare(ctx, ReadJSONL(path), tok, tm, DefaultConfig())
	t.Logf("%v after %v", err, time.Since(start).Round(time.Millisecond))
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "chat template slow.jinja") {
		t.Fatalf("got %v, want the context's deadline during the render", err)
	}
}
