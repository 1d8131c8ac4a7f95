package models

import (
	"context"
	"math"
	"strings"
	"testing"
)

// badGenerateOptions are option sets Generate must refuse up front, each with the HF field name
// the error must carry. Before validation, max_new_tokens -5 reached GoMLX as a negative cache
// shape and the others were used silently.
func badGenerateOptions() []struct {
	name  string
	opts  GenerateOptions
	field string
} {
	d := DefaultGenerateOptions()
	with := func(f func(o *GenerateOptions)) GenerateOptions {
		o := d
		f(&o)
		return o
	}
	return []struct {
		name  string
		opts  GenerateOptions
		field string
	}{
		{"max_new_tokens -5", with(func(o *GenerateOptions) { o.MaxNewTokens = -5 }), "max_new_tokens"},
		{"max_new_tokens 0", with(func(o *GenerateOptions) { o.MaxNewTokens = 0 }), "max_new_tokens"},
		{"top_k -3", with(func(o *GenerateOptions) { o.TopK = -3 }), "top_k"},
		{"top_k -3 sampling", with(func(o *GenerateOptions) { o.TopK, o.DoSample = -3, true }), "top_k"},
		{"temperature -1 sampling", with(func(o *GenerateOptions) { o.Temperature, o.DoSample = -1, true }), "temperature"},
		{"temperature -1 greedy", with(func(o *GenerateOptions) { o.Temperature = -1 }), "temperature"},
		{"temperature 0 sampling", with(func(o *GenerateOptions) { o.Temperature, o.DoSample = 0, true }), "temperature"},
		{"temperature NaN", with(func(o *GenerateOptions) { o.Temperature, o.DoSample = math.NaN(), true }), "temperature"},
		{"temperature +Inf", with(func(o *GenerateOptions) { o.Temperature, o.DoSample = math.Inf(1), true }), "temperature"},
		{"top_p 0 sampling", with(func(o *GenerateOptions) { o.TopP, o.DoSample = 0, true }), "top_p"},
		{"top_p 1.5", with(func(o *GenerateOptions) { o.TopP = 1.5 }), "top_p"},
		{"top_p -0.1", with(func(o *GenerateOptions) { o.TopP = -0.1 }), "top_p"},
		{"top_p NaN", with(func(o *GenerateOptions) { o.TopP, o.DoSample = math.NaN(), true }), "top_p"},
		{"repetition_penalty -1", with(func(o *GenerateOptions) { o.RepetitionPenalty = -1 }), "repetition_penalty"},
		{"repetition_penalty NaN", with(func(o *GenerateOptions) { o.RepetitionPenalty = math.NaN() }), "repetition_penalty"},
		{"eos_token_id -1", with(func(o *GenerateOptions) { o.EOSTokenIDs = []int{2, -1} }), "eos_token_id"},
	}
}

// TestGenerateRejectsBadOptions: Generate refuses each bad option set before building anything,
// with an error naming the field; the library validates, so the CLI and the service share it.
func TestGenerateRejectsBadOptions(t *testing.T) {
	rt := openGo(t)
	m, err := Load(context.Background(), rt, fixtureDir(t, "llama-tiny"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lm := m.(CausalLM)
	for _, c := range badGenerateOptions() {
		t.Run(c.name, func(t *testing.T) {
			out, err := Generate(context.Background(), rt, lm, []int{1, 5, 9}, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.field) {
				t.Fatalf("Generate(%+v) = %v, %v; want an error naming %s", c.opts, out, err, c.field)
			}
			t.Log(err)
		})
	}
	// Options that are valid however odd: a limit far beyond the model's positions stops at the
	// positions (it once overflowed prompt+max_new_tokens); greedy decoding ignores a zero
	// temperature and top_p (the zero values of GenerateOptions).
	huge := DefaultGenerateOptions()
	huge.MaxNewTokens, huge.EOSTokenIDs = math.MaxInt, []int{}
	out, err := Generate(context.Background(), rt, lm, []int{1, 5, 9}, huge)
	if err != nil || len(out) != lm.MaxPositions()-3 {
		t.Fatalf("max_new_tokens MaxInt: %d tokens, %v; want %d", len(out), err, lm.MaxPositions()-3)
	}
	if _, err := Generate(context.Background(), rt, lm, []int{1}, GenerateOptions{MaxNewTokens: 2}); err != nil {
		t.Fatalf("zero-valued greedy options: %v", err)
	}
}
