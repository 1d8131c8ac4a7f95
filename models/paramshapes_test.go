package models

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/models/gemma3"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/llama"
	"github.com/gotpu/gotpu/models/qwen3"
)

// checkParamShapes compares ParamShapes(cfg) with a built model's Params(): the same names and
// shapes in the same order, and an element sum equal to the footprint's parameter count.
func checkParamShapes(t *testing.T, name string, cfg Config, built []Param) {
	t.Helper()
	got, err := ParamShapes(cfg)
	if err != nil {
		t.Fatalf("%s: ParamShapes: %v", name, err)
	}
	if len(got) != len(built) {
		t.Fatalf("%s: ParamShapes lists %d tensors, the built model has %d", name, len(got), len(built))
	}
	var sum int64
	for i := range got {
		if got[i].Name != built[i].Name || !slices.Equal(got[i].Shape, built[i].Shape) || got[i].NoDecay != built[i].NoDecay {
			t.Errorf("%s: tensor %d: ParamShapes %s %v (no_decay %v), built %s %v (no_decay %v)", name, i,
				got[i].Name, got[i].Shape, got[i].NoDecay, built[i].Name, built[i].Shape, built[i].NoDecay)
		}
		sum += int64(got[i].NumElements())
	}
	fp, err := EstimateFootprint(cfg)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if sum != fp.Params {
		t.Errorf("%s: ParamShapes sums to %d elements, Footprint.Params is %d", name, sum, fp.Params)
	}
}

// TestParamShapesMatchBuiltModels: for every fixture in testdata/models (loaded from its files)
// and for the config variants that change the table (untied heads, n_inner, biases, the bare
// BERT, grouped-query attention, Qwen3 biases, an untied Gemma 3), ParamShapes from the config
// alone equals the built model's Params(), and a config parsed from the fixture's config.json
// gives the same list. Tied heads appear once (no lm_head entry).
func TestParamShapesMatchBuiltModels(t *testing.T) {
	rt := openGo(t)
	ctx := context.Background()
	cfgs, _ := filepath.Glob(filepath.Join("..", "testdata", "models", "*", core.ConfigFile))
	if len(cfgs) < 6 {
		t.Fatalf("found %d fixtures", len(cfgs))
	}
	for _, cfgPath := range cfgs {
		dir := filepath.Dir(cfgPath)
		name := filepath.Base(dir)
		m, err := Load(ctx, rt, dir, LoadOptions{})
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		checkParamShapes(t, name+" (loaded)", m.Config(), m.Params())
		parsed, err := ParseConfig(cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		checkParamShapes(t, name+" (config.json)", parsed, m.Params())
		if name == "gpt2-tiny" || name == "gemma3-tiny" {
			for _, p := range m.Params() {
				if p.Name == "lm_head.weight" {
					t.Errorf("%s: tied lm_head listed", name)
				}
			}
		}
	}

	variants := configVariants()

	// Qwen3 and Gemma 3 variants start from the fixtures' configs.
	if c, err := ParseConfig(filepath.Join("..", "testdata", "models", "qwen3-tiny", core.ConfigFile)); err == nil {
		qc := c.(*qwen3.Config)
		qc.AttentionBias, qc.TieWordEmbeddings = true, true
		variants["qwen3 biases tied"] = qc
	} else {
		t.Fatal(err)
	}
	if c, err := ParseConfig(filepath.Join("..", "testdata", "models", "gemma3-tiny", core.ConfigFile)); err == nil {
		gc := c.(*gemma3.Config)
		gc.TieWordEmbeddings = false
		variants["gemma3 untied"] = gc
	} else {
		t.Fatal(err)
	}
	for name, cfg := range variants {
		m, err := New(ctx, rt, cfg, NewOptions{Seed: 1})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkParamShapes(t, name, cfg, m.Params())
	}
}

// TestParamShapesGPT2TiedCountedOnce: GPT-2 124M (the hub's config) has 124,439,808 parameters,
// the figure HF reports for GPT2LMHeadModel (the tied lm_head counted once, with wte).
func TestParamShapesGPT2TiedCountedOnce(t *testing.T) {
	cfg, err := ParseConfig(filepath.Join("..", "testdata", "hf-configs", "gpt2_lmhead_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	ps, err := ParamShapes(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, p := range ps {
		n += int64(p.NumElements())
		if p.Name == "lm_head.weight" {
			t.Errorf("tied lm_head listed")
		}
	}
	if n != 124_439_808 || len(ps) != 2+12*12+2 {
		t.Errorf("GPT-2 124M: %d tensors, %d parameters; want 148, 124439808", len(ps), n)
	}
}

// TestParamShapesRefusals: a nil or unsupported config and absurd dimensions are errors (naming
// the field) before any table is built.
func TestParamShapesRefusals(t *testing.T) {
	if _, err := ParamShapes(nil); !errors.Is(err, ErrUnsupported) {
		t.Errorf("nil config: %v", err)
	}
	g := gpt2.DefaultConfig()
	g.NLayer = MaxLayers + 1
	if _, err := ParamShapes(g); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "n_layer") {
		t.Errorf("n_layer beyond the limit: %v", err)
	}
	l := llama.DefaultConfig(llama.TypeLlama)
	l.HiddenSize = 0
	if _, err := ParamShapes(l); err == nil || !strings.Contains(err.Error(), "hidden_size") {
		t.Errorf("hidden_size 0: %v", err)
	}
}

// paramShapesAllocBound bounds what ParamShapes may allocate for a fuzzed config.json: the fuzz
// target keeps configs of at most fuzzMaxLayers layers (a table is about a dozen entries of under
// 200 bytes per layer), and configs refused by EstimateFootprint allocate nothing per layer.
const (
	fuzzMaxLayers         = 64
	paramShapesAllocBound = 1 << 20
)

// FuzzParamShapes parses arbitrary config.json bytes as ParseConfig does and lists their
// parameters: no panic; a refusal is an error; an accepted config lists tensors with positive
// dimensions whose element sum is Footprint.Params, and allocates little beyond its table.
//
//	go test -run '^$' -fuzz FuzzParamShapes -fuzztime 30s ./models/
func FuzzParamShapes(f *testing.F) {
	cfgs, _ := filepath.Glob(filepath.Join("..", "testdata", "models", "*", core.ConfigFile))
	hf, _ := filepath.Glob(filepath.Join("..", "testdata", "hf-configs", "*_config.json"))
	for _, p := range append(cfgs, hf...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"model_type": "gpt2", "n_layer": 65536, "n_embd": 1, "n_head": 1, "vocab_size": 1, "n_positions": 1}`))
	f.Add([]byte(`{"model_type": "llama", "hidden_size": 1048576, "intermediate_size": 1048576, "num_hidden_layers": 65536}`))
	f.Add([]byte(`{"model_type": "bert", "num_labels": 65536}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		raw, err := core.ParseRawConfig("fuzz/config.json", data)
		if err != nil {
			return
		}
		modelType, arch, err := identify(raw)
		if err != nil {
			return
		}
		cfg, err := parseTyped("fuzz/config.json", raw, modelType, arch)
		if err != nil {
			return
		}
		fp, err := EstimateFootprint(cfg)
		if err != nil {
			if _, err2 := ParamShapes(cfg); err2 == nil {
				t.Fatalf("EstimateFootprint refused (%v) but ParamShapes did not", err)
			}
			return
		}
		if fp.Layers > fuzzMaxLayers {
			return // valid, but its table is large by design: not what this target measures
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		ps, err := ParamShapes(cfg)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatalf("EstimateFootprint accepted the config but ParamShapes refused it: %v", err)
		}
		if d := after.TotalAlloc - before.TotalAlloc; d > paramShapesAllocBound {
			t.Fatalf("ParamShapes allocated %d bytes for %d layers", d, fp.Layers)
		}
		var sum int64
		for _, p := range ps {
			n := int64(1)
			for _, d := range p.Shape {
				if d <= 0 {
					t.Fatalf("%s has shape %v", p.Name, p.Shape)
				}
				n *= int64(d)
			}
			sum += n
		}
		if sum != fp.Params {
			t.Fatalf("ParamShapes sums to %d, Footprint.Params %d", sum, fp.Params)
		}
	})
}
