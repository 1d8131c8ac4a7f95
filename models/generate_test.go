package models

import (
	"context"
	"slices"
	"testing"

	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/internal/reftest"
	"github.com/gotpu/gotpu/xla"
)

// greedyNoCache decodes by re-running the whole sequence through Forward at every step.
func greedyNoCache(t *testing.T, rt *xla.Runtime, m Model, prompt []int, n int) []int {
	seq := slices.Clone(prompt)
	var out []int
	for range n {
		ids := ints(seq, 1, len(seq))
		res, err := core.Run(rt.Backend(), m.(core.Forwarder), core.Inputs{InputIDs: ids}, false)
		if err != nil {
			t.Fatal(err)
		}
		l := reftest.Float64s(t, res.Logits)
		V := res.Logits.Shape().Dim(2)
		last := l[(len(seq)-1)*V:]
		best := 0
		for i, v := range last {
			if v > last[best] {
				best = i
			}
		}
		out = append(out, best)
		seq = append(seq, best)
	}
	return out
}

func TestGenerateMatchesFullRecompute(t *testing.T) {
	rt := openGo(t)
	for _, name := range []string{"gpt2-tiny", "gpt2-tiny-affine", "llama-tiny", "gemma3-tiny", "qwen3-tiny"} {
		t.Run(name, func(t *testing.T) {
			ref := reftest.Read(t, name)
			m, err := Load(context.Background(), rt, fixtureDir(t, name), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			lm := m.(CausalLM)
			prompt := ref.InputIDs[0][:5]
			opts := DefaultGenerateOptions()
			opts.MaxNewTokens, opts.EOSTokenIDs = 12, []int{}
			got, err := Generate(context.Background(), rt, lm, prompt, opts)
			if err != nil {
				t.Fatal(err)
			}
			want := greedyNoCache(t, rt, m, prompt, 12)
			t.Logf("%s greedy: %v", name, got)
			if !slices.Equal(got, want) {
				t.Fatalf("KV-cache greedy %v, full recompute %v", got, want)
			}
			// Sampling: reproducible by seed, different across seeds, and top_k=1 is greedy.
			opts.DoSample, opts.Seed = true, 1
			a, _ := Generate(context.Background(), rt, lm, prompt, opts)
			b, _ := Generate(context.Background(), rt, lm, prompt, opts)
			opts.Seed = 2
			c, _ := Generate(context.Background(), rt, lm, prompt, opts)
			if !slices.Equal(a, b) || slices.Equal(a, c) {
				t.Errorf("sampling: seed 1 %v / %v, seed 2 %v", a, b, c)
			}
			opts.TopK = 1
			if k1, _ := Generate(context.Background(), rt, lm, prompt, opts); !slices.Equal(k1, want) {
				t.Errorf("top_k=1 sampling %v, greedy %v", k1, want)
			}
			// Stopping at an end-of-sequence token (returned, as HF does).
			opts = DefaultGenerateOptions()
			opts.EOSTokenIDs = []int{want[2]}
			first := slices.Index(want, want[2])
			if stop, _ := Generate(context.Background(), rt, lm, prompt, opts); !slices.Equal(stop, want[:first+1]) {
				t.Errorf("eos %d: %v, want %v", want[2], stop, want[:first+1])
			}
		})
	}
}

func TestChooseTokenProcessors(t *testing.T) {
	logits := []float32{1, 3, 2, 3, -1}
	o := GenerateOptions{}
	if got := chooseToken(logits, nil, o, nil); got != 1 {
		t.Errorf("greedy picks the first maximum: %d", got)
	}
	o.RepetitionPenalty = 2
	if got := chooseToken(logits, []int{1}, o, nil); got != 3 {
		t.Errorf("repetition penalty: %d", got)
	}
	// top_p 0.5 keeps only the two tied best tokens (each ~0.4 of the mass... their sum reaches p).
	o = GenerateOptions{DoSample: true, TopP: 0.5, Seed: 1}
	counts := map[int]int{}
	rng := newRNG(3)
	for range 200 {
		counts[chooseToken(logits, nil, o, rng)]++
	}
	for tok := range counts {
		if tok != 1 && tok != 3 {
			t.Errorf("top_p sampled token %d", tok)
		}
	}
}

func TestReadGenerationConfigs(t *testing.T) {
	o, err := ReadGenerationConfig(hfConfig(t, "llama3.1-8b_generation_config.json"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !o.DoSample || o.Temperature != 0.6 || o.TopP != 0.9 || o.TopK != 50 || !slices.Equal(o.EOSTokenIDs, []int{128001}) {
		t.Errorf("llama3.1: %+v", o)
	}
	o, err = ReadGenerationConfig(hfConfig(t, "qwen2_v5_generation_config.json"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if o.TopK != 20 || o.RepetitionPenalty != 1.1 || !slices.Equal(o.EOSTokenIDs, []int{151645, 151643}) {
		t.Errorf("qwen2: %+v", o)
	}
}
