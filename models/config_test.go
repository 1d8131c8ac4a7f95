package models

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/models/bert"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/internal/reftest"
	"github.com/gotpu/gotpu/models/llama"
)

func hfConfig(t testing.TB, name string) string {
	return filepath.Join(reftest.Dir(t), "..", "hf-configs", name)
}

// shrink keeps a real config's features but makes it small enough to build and run here.
func shrink(t *testing.T, cfg Config) {
	switch c := cfg.(type) {
	case *gpt2.Config:
		c.VocabSize, c.NEmbd, c.NLayer, c.NHead, c.NPositions = 128, 32, 2, 2, 32
	case *llama.Config:
		// Keep GQA (heads a multiple of kv heads) and an explicit head_dim when the file has one.
		c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers = 128, 32, 64, 2
		c.NumAttentionHeads = 4
		if c.NumKeyValueHeads < 32 {
			c.NumKeyValueHeads = 2
		} else {
			c.NumKeyValueHeads = 4
		}
		c.HeadDim = 8
		c.LayerWindows = c.LayerWindows[:2]
	case *bert.Config:
		c.VocabSize, c.HiddenSize, c.NumHiddenLayers, c.NumAttentionHeads, c.IntermediateSize, c.MaxPositionEmbeddings = 128, 32, 2, 2, 64, 32
	default:
		t.Fatalf("unexpected config %T", cfg)
	}
}

func TestRealConfigs(t *testing.T) {
	rt := openGo(t)
	checks := map[string]func(t *testing.T, c Config){
		"gpt2_lmhead_config.json": func(t *testing.T, c Config) {
			g := c.(*gpt2.Config)
			if g.NPositions != 1024 || g.NInner != nil || g.ActivationFunction != "gelu_new" || !g.TieWordEmbeddings || g.LayerNormEpsilon != 1e-5 {
				t.Errorf("%+v", g)
			}
		},
		"llama2-7b-chat_config.json": func(t *testing.T, c Config) {
			l := c.(*llama.Config)
			if l.Rope.Theta != 10000 || l.Rope.Type != "default" || l.NumKeyValueHeads != 32 || l.HeadDim != 128 || l.TieWordEmbeddings || l.RMSNormEps != 1e-5 {
				t.Errorf("%+v", l)
			}
		},
		"llama3.1-8b-instruct_config.json": func(t *testing.T, c Config) { // gotpu plan's 8B sizing case
			l := c.(*llama.Config)
			want := llama.Rope{Theta: 500000, Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192}
			if l.Rope != want || l.HeadDim != 128 || l.NumKeyValueHeads != 8 || l.TieWordEmbeddings || l.DType != "bfloat16" ||
				l.NumHiddenLayers != 32 || l.VocabSize != 128256 || !slices.Equal(l.EOSTokenID, []int{128001, 128008, 128009}) {
				t.Errorf("%+v", l)
			}
		},
		"llama3.2-1b_config.json": func(t *testing.T, c Config) {
			l := c.(*llama.Config)
			want := llama.Rope{Theta: 500000, Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositions: 8192}
			if l.Rope != want || l.HeadDim != 64 || l.NumKeyValueHeads != 8 || !l.TieWordEmbeddings || l.DType != "bfloat16" {
				t.Errorf("%+v", l)
			}
		},
		"mistral_small_scratch_config.json": func(t *testing.T, c Config) {
			l := c.(*llama.Config)
			if l.ModelType() != "mistral" || l.Architecture() != "MistralForCausalLM" || l.LayerWindows[0] != 72 || l.LayerWindows[11] != 72 || l.QKVBias() {
				t.Errorf("%+v", l)
			}
		},
		"qwen2_v5_rope_parameters_config.json": func(t *testing.T, c Config) {
			l := c.(*llama.Config)
			if l.Rope.Theta != 1e6 || l.Rope.Type != "default" || !l.QKVBias() || l.OBias() || slices.Max(l.LayerWindows) != 0 ||
				l.DTypeKey != "dtype" || !l.TieWordEmbeddings || l.NumKeyValueHeads != 2 {
				t.Errorf("%+v", l)
			}
		},
		"bert_seqcls_4.16_default_labels_config.json": func(t *testing.T, c Config) {
			b := c.(*bert.Config)
			if b.NumLabels() != 2 || b.ProblemType != "single_label_classification" || b.LayerNormEps != 1e-12 {
				t.Errorf("%+v", b)
			}
		},
		"bert_seqcls_v5_config.json": func(t *testing.T, c Config) {
			b := c.(*bert.Config)
			if b.NumLabels() != 4 || b.ID2Label[2] != "angry" || b.Label2ID["neutral"] != 3 {
				t.Errorf("%+v", b)
			}
		},
	}
	files, _ := filepath.Glob(hfConfig(t, "*_config.json"))
	n := 0
	for _, p := range files {
		name := filepath.Base(p)
		if strings.Contains(name, "generation") {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			cfg, err := ParseConfig(p)
			if err != nil {
				t.Fatal(err)
			}
			check, ok := checks[name]
			if !ok {
				t.Fatalf("no expectations for %s", name)
			}
			check(t, cfg)

			// Writing the config back keeps every original field with its value.
			orig := map[string]any{}
			b, _ := os.ReadFile(p)
			if err := json.Unmarshal(b, &orig); err != nil {
				t.Fatal(err)
			}
			out, err := cfg.JSON()
			if err != nil {
				t.Fatal(err)
			}
			back := map[string]any{}
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			for k, v := range orig {
				if !reflect.DeepEqual(back[k], v) {
					t.Errorf("field %q: wrote %v, file has %v", k, back[k], v)
				}
			}
			var added []string
			for k := range back {
				if _, ok := orig[k]; !ok {
					added = append(added, k)
				}
			}
			slices.Sort(added)
			t.Logf("fields written in addition to the file's: %v", added)
			if _, err := ParseConfig(writeTemp(t, out)); err != nil {
				t.Fatalf("written config does not parse: %v", err)
			}

			// A small model with the same features builds and runs with the table's shapes.
			shrink(t, cfg)
			m, err := New(context.Background(), rt, cfg, NewOptions{Seed: 7})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range m.Params() {
				v, err := m.(interface {
					Variable(string) (*varT, error)
				}).Variable(p.Name)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(v.Shape().Dimensions, p.Shape) {
					t.Errorf("%s: variable %v, table %v", p.Name, v.Shape(), p.Shape)
				}
			}
			ids := tensors.FromFlatDataAndDimensions([]int32{1, 5, 9, 3, 7, 2, 8, 4}, 1, 8)
			res, err := core.Run(rt.Backend(), m.(core.Forwarder), core.Inputs{InputIDs: ids}, false)
			if err != nil {
				t.Fatal(err)
			}
			dims := res.Logits.Shape().Dimensions
			switch c := cfg.(type) {
			case *bert.Config:
				if !slices.Equal(dims, []int{1, c.NumLabels()}) {
					t.Errorf("logits %v", dims)
				}
			default:
				if !slices.Equal(dims, []int{1, 8, 128}) {
					t.Errorf("logits %v", dims)
				}
			}
			for _, v := range reftest.Float64s(t, res.Logits) {
				if math.IsNaN(v) || math.IsInf(v, 0) {
					t.Fatal("non-finite logits")
				}
			}
		})
	}
	if n != 8 {
		t.Errorf("%d model configs, want 8", n)
	}
}

type varT = mlctx.Variable

func writeTemp(t *testing.T, b []byte) string {
	p := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Llama-3 rope scaling keeps high frequencies, divides low ones by factor, and interpolates between.
func TestLlama3RopeFrequencies(t *testing.T) {
	cfg, err := ParseConfig(hfConfig(t, "llama3.2-1b_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	l := cfg.(*llama.Config)
	scaled := llama.InvFreq(l)
	plain := *l
	plain.Rope.Type = "default"
	base := llama.InvFreq(&plain)
	var kept, divided, between int
	for i := range base {
		wavelen := 2 * math.Pi / base[i]
		switch {
		case wavelen < 8192/4.0:
			kept++
			if scaled[i] != base[i] {
				t.Errorf("high frequency %d changed", i)
			}
		case wavelen > 8192/1.0:
			divided++
			if math.Abs(scaled[i]-base[i]/32) > 1e-12*base[i] {
				t.Errorf("low frequency %d: %g, want %g", i, scaled[i], base[i]/32)
			}
		default:
			between++
			if !(scaled[i] < base[i] && scaled[i] > base[i]/32) {
				t.Errorf("medium frequency %d: %g not between %g and %g", i, scaled[i], base[i]/32, base[i])
			}
		}
	}
	if kept == 0 || divided == 0 || between == 0 {
		t.Fatalf("bands %d/%d/%d: the test does not cover all three", kept, divided, between)
	}
}

// Sliding-window attention (Mistral): a token further back than the window cannot influence a
// position; within the window it does.
func TestSlidingWindowMask(t *testing.T) {
	rt := openGo(t)
	cfg, err := ParseConfig(hfConfig(t, "mistral_small_scratch_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	shrink(t, cfg)
	l := cfg.(*llama.Config)
	l.NumHiddenLayers = 1
	l.LayerWindows = []int{3}
	m, err := New(context.Background(), rt, cfg, NewOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	run := func(first int32) []float64 {
		ids := tensors.FromFlatDataAndDimensions([]int32{first, 5, 9, 3, 7, 2}, 1, 6)
		res, err := core.Run(rt.Backend(), m.(core.Forwarder), core.Inputs{InputIDs: ids}, false)
		if err != nil {
			t.Fatal(err)
		}
		return reftest.Float64s(t, res.Logits)
	}
	a, b := run(1), run(100)
	for pos := range 6 {
		d := reftest.MaxAbsDiff(a[pos*128:(pos+1)*128], b[pos*128:(pos+1)*128])
		if inWindow := pos < 3; inWindow != (d > 0) {
			t.Errorf("position %d: changing token 0 moves logits by %.3g (window 3)", pos, d)
		}
	}
}
