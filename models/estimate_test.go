package models

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/membudget"
	"github.com/gotpu/gotpu/models/bert"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/llama"
)

// paramSums are what a built model's Params() say: elements, Adafactor state, largest tensor.
func paramSums(ps []Param) (params, factored, largest int64) {
	for _, p := range ps {
		n := int64(p.NumElements())
		params += n
		largest = max(largest, n)
		if len(p.Shape) >= 2 {
			rows, cols := int64(1), int64(p.Shape[len(p.Shape)-1])
			for _, d := range p.Shape[:len(p.Shape)-1] {
				rows *= int64(d)
			}
			for _, d := range p.Shape[:len(p.Shape)-2] {
				cols *= int64(d)
			}
			factored += rows + cols
		} else {
			factored += n
		}
	}
	return params, factored, largest
}

func checkFootprint(t *testing.T, name string, m Model) {
	t.Helper()
	fp, err := EstimateFootprint(m.Config())
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	params, factored, largest := paramSums(m.Params())
	if fp.Params != params || fp.AdafactorState != factored || fp.LargestParam != largest {
		t.Errorf("%s: footprint params %d, adafactor %d, largest %d; the built model has %d, %d, %d",
			name, fp.Params, fp.AdafactorState, fp.LargestParam, params, factored, largest)
	}
}

// TestFootprintMatchesBuiltModels: the footprint computed from a config alone counts exactly the
// parameters the built model has, for every fixture and for the config variants that change the
// table (untied heads, n_inner, biases, the bare BERT, grouped-query attention).
func TestFootprintMatchesBuiltModels(t *testing.T) {
	rt := openGo(t)
	ctx := context.Background()
	dirs, _ := filepath.Glob(filepath.Join("..", "testdata", "models", "*", "config.json"))
	if len(dirs) < 4 {
		t.Fatalf("found %d fixtures", len(dirs))
	}
	for _, cfgPath := range dirs {
		dir := filepath.Dir(cfgPath)
		m, err := Load(ctx, rt, dir, LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		checkFootprint(t, filepath.Base(dir), m)
	}

	for name, cfg := range configVariants() {
		m, err := New(ctx, rt, cfg, NewOptions{Seed: 1})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkFootprint(t, name, m)
	}
}

// TestAbsurdDimsRefusedByName: a config.json whose dimensions are beyond gotpu's limits is an
// error naming the file and the field, from ParseConfig, before an architecture parses per layer
// or per label (llama's sliding-window table, BERT's id2label) and before Load maps anything.
func TestAbsurdDimsRefusedByName(t *testing.T) {
	cases := []struct{ fixture, old, new, field string }{
		{"gpt2-tiny", `"n_embd": 64`, `"n_embd": 1073741824`, "n_embd"},
		{"gpt2-tiny", `"n_layer": 2`, `"n_layer": 1e12`, "n_layer"},
		{"gpt2-tiny", `"vocab_size": 1000`, `"vocab_size": 99999999999`, "vocab_size"},
		{"llama-tiny", `"num_hidden_layers": 2`, `"num_hidden_layers": 10000000000`, "num_hidden_layers"},
		{"bert-tiny", `"hidden_size": 64`, `"hidden_size": 9223372036854775807`, "hidden_size"},
	}
	rt := openGo(t)
	for _, c := range cases {
		dir := copyFixture(t, c.fixture)
		editConfig(t, dir, c.old, c.new)
		_, err := ParseConfig(filepath.Join(dir, core.ConfigFile))
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), `field "`+c.field+`"`) ||
			!strings.Contains(err.Error(), "config.json") {
			t.Errorf("%s %s: ParseConfig: %v", c.fixture, c.new, err)
		}
		if _, err := Load(context.Background(), rt, dir, LoadOptions{}); !errors.Is(err, ErrTooLarge) {
			t.Errorf("%s %s: Load: %v", c.fixture, c.new, err)
		}
	}
}

// copyFixture copies testdata/models/name into a temporary directory.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dst := t.TempDir()
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "models", name, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// TestFootprintOverflowAndBadDims: dimensions within each limit whose product overflows, and
// non-positive ones, are errors naming a field; nothing is allocated on the way.
func TestFootprintOverflowAndBadDims(t *testing.T) {
	l := llama.DefaultConfig(llama.TypeLlama)
	l.HiddenSize, l.NumAttentionHeads, l.NumKeyValueHeads, l.HeadDim, l.IntermediateSize = MaxWidth, MaxWidth, MaxWidth, MaxWidth, MaxWidth
	l.NumHiddenLayers = MaxLayers
	if _, err := EstimateFootprint(l); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "overflows") {
		t.Errorf("overflowing llama: %v", err)
	}
	g := gpt2.DefaultConfig()
	g.NHead = -3
	if _, err := EstimateFootprint(g); err == nil || !strings.Contains(err.Error(), `field "n_head"`) {
		t.Errorf("negative n_head: %v", err)
	}
	if _, err := EstimateFootprint(nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("nil config: %v", err)
	}
}

// TestParamMemoryCheck: New refuses a model whose parameters exceed the host's memory, saying
// what it needs and what is available; on an unknown host it does not guess.
func TestParamMemoryCheck(t *testing.T) {
	rt := openGo(t)
	g := gpt2.DefaultConfig() // 124M parameters: 0.5 GB of float32
	host := membudget.Host{Available: 100 << 20, Known: true, Source: "test"}
	err := checkParamMemory(rt, g, 4, "models.New", host)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "0.1 GiB are available on the host (test)") ||
		!strings.Contains(err.Error(), "needs about 0.8 GiB") {
		t.Errorf("gpt2 in 100 MiB: %v", err)
	}
	if err := checkParamMemory(rt, g, 2, "models.New", membudget.Host{Available: 1 << 30, Known: true}); err != nil {
		t.Errorf("gpt2 in bfloat16 in 1 GiB: %v", err)
	}
	if err := checkParamMemory(rt, g, 4, "models.New", membudget.Host{}); err != nil {
		t.Errorf("unknown host: %v", err)
	}
}

// TestActivationBytes: activations grow with batch and sequence, halve in bf16 but for the
// float32 logits, are smaller in evaluation, and overflow is reported, not wrapped.
func TestActivationBytes(t *testing.T) {
	fp, err := EstimateFootprint(gpt2.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	f32, _ := fp.ActivationBytes(8, 1024, 4, true)
	bf16, _ := fp.ActivationBytes(8, 1024, 2, true)
	double, _ := fp.ActivationBytes(16, 1024, 4, true)
	eval, _ := fp.ActivationBytes(8, 1024, 4, false)
	logits := int64(8*1024) * fp.Vocab * actLogits * 4
	if double != 2*f32 || bf16-logits != (f32-logits)/2 || eval >= f32 {
		t.Errorf("f32 %d, bf16 %d, batch 16 %d, eval %d", f32, bf16, double, eval)
	}
	if _, ok := fp.ActivationBytes(1e9, 1e9, 4, true); ok {
		t.Error("a batch of 10^18 tokens did not overflow")
	}
}

// configAllocBound is the most parsing a config.json and estimating its footprint may allocate,
// beyond 64 bytes per input byte (encoding/json's own work): the largest tables the limits allow
// (65536 sliding-window entries, 65536 BERT labels as two maps) fit in it.
const configAllocBound = 32 << 20

// FuzzConfigFootprint drives config.json bytes through parsing (with the dimension limits) and
// EstimateFootprint and ActivationBytes: no panic, no allocation above configAllocBound +
// 64 × len(input), and a footprint only for dimensions within the limits.
//
//	go test -run '^$' -fuzz FuzzConfigFootprint -fuzztime 60s ./models/
func FuzzConfigFootprint(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "models", "*", "config.json"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b, int64(8), int64(512))
		}
	}
	f.Add([]byte(`{"model_type":"gpt2","n_embd":1073741824,"n_head":1}`), int64(1), int64(1))
	f.Add([]byte(`{"model_type":"llama","num_hidden_layers":65536,"sliding_window":4}`), int64(1000000000), int64(1000000000))
	f.Add([]byte(`{"model_type":"bert","num_labels":65536,"hidden_size":1048576,"num_attention_heads":1}`), int64(-1), int64(0))
	f.Add([]byte(`{"model_type":"qwen2","use_sliding_window":true,"max_window_layers":-5,"sliding_window":1,"num_hidden_layers":3}`), int64(2), int64(9))
	f.Fuzz(func(t *testing.T, js []byte, batch, seq int64) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		raw, err := core.ParseRawConfig("fuzz/config.json", js)
		var cfg Config
		if err == nil {
			var modelType, arch string
			if modelType, arch, err = identify(raw); err == nil {
				cfg, err = parseTyped("fuzz/config.json", raw, modelType, arch)
			}
		}
		var fp Footprint
		if err == nil {
			if fp, err = EstimateFootprint(cfg); err == nil {
				fp.ActivationBytes(batch, seq, 4, true)
				fp.ActivationBytes(batch, seq, 2, false)
			}
		}
		runtime.ReadMemStats(&after)
		if d := after.TotalAlloc - before.TotalAlloc; d > configAllocBound+64*uint64(len(js)) {
			t.Fatalf("allocated %d bytes for a %d-byte config", d, len(js))
		}
		if err == nil && (fp.Params <= 0 || fp.Layers > MaxLayers || fp.Hidden > MaxWidth || fp.Vocab > MaxVocab) {
			t.Fatalf("footprint %+v for %s", fp, js)
		}
	})
}

// TestHugeConfigRefused: a config.json is read only up to MaxConfigSize (16 MiB).
func TestHugeConfigRefused(t *testing.T) {
	dir := copyFixture(t, "gpt2-tiny")
	if err := os.Truncate(filepath.Join(dir, "config.json"), core.MaxConfigSize+1); err != nil {
		t.Skip(err)
	}
	_, err := Load(context.Background(), openGo(t), dir, LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "config.json: larger than 16 MiB") {
		t.Errorf("Load with a 16 MiB config.json: %v", err)
	}
}

// configVariants are configs that differ from the fixtures in what changes the parameter table
// (untied embeddings, n_inner, biases, grouped-query attention, BERT's label head or none), for
// the tests that check a config-only computation against the model built from it.
func configVariants() map[string]Config {
	inner := 40
	g := gpt2.DefaultConfig()
	g.VocabSize, g.NPositions, g.NEmbd, g.NLayer, g.NHead, g.NInner, g.TieWordEmbeddings = 50, 16, 16, 3, 2, &inner, false
	l := llama.DefaultConfig(llama.TypeLlama)
	l.VocabSize, l.HiddenSize, l.IntermediateSize, l.NumHiddenLayers, l.NumAttentionHeads, l.NumKeyValueHeads, l.HeadDim =
		40, 16, 24, 2, 4, 2, 8
	l.AttentionBias, l.MLPBias, l.TieWordEmbeddings = true, true, true
	q := llama.DefaultConfig(llama.TypeQwen2)
	q.VocabSize, q.HiddenSize, q.IntermediateSize, q.NumHiddenLayers, q.NumAttentionHeads, q.NumKeyValueHeads, q.HeadDim =
		40, 16, 24, 2, 4, 1, 4
	b := bert.DefaultConfig()
	b.VocabSize, b.HiddenSize, b.NumHiddenLayers, b.NumAttentionHeads, b.IntermediateSize, b.MaxPositionEmbeddings = 30, 16, 2, 2, 32, 20
	b.SetNumLabels(5)
	bare := bert.DefaultConfig()
	bare.Arch, bare.VocabSize, bare.HiddenSize, bare.NumHiddenLayers, bare.NumAttentionHeads, bare.IntermediateSize = bert.BareModel, 30, 16, 1, 2, 32
	return map[string]Config{"gpt2 untied n_inner": g, "llama biases tied": l, "qwen2 gqa": q, "bert 5 labels": b, "bert bare": bare}
}
