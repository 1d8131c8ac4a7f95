package models

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models/internal/reftest"
	"github.com/gotpu/gotpu/models/qwen3"
	"github.com/gotpu/gotpu/xla"
)

// The Qwen3 fixture through the package API: these mirror the generic fixture tests (save_test.go,
// score_test.go, generate_test.go, badinput_test.go) for qwen3-tiny, whose config.json is in
// transformers 4.57's form ("dtype", layer_types, head_dim != hidden/heads).

const qwen3Fixture = "qwen3-tiny"

func TestQwen3ThroughDispatcher(t *testing.T) {
	rt := openGo(t)
	dir := fixtureDir(t, qwen3Fixture)
	m, err := Load(context.Background(), rt, dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Architecture() != "Qwen3ForCausalLM" {
		t.Errorf("architecture %s", m.Architecture())
	}
	if _, ok := m.(CausalLM); !ok {
		t.Error("a Qwen3 model is not a CausalLM")
	}
	ref := reftest.Read(t, qwen3Fixture)
	logits, loss := logitsOf(t, rt, m, ref)
	d := reftest.MaxAbsDiff(logits, ref.FlatLogits(t))
	t.Logf("%s through models.Load: max |logits diff| %.3g, |loss diff| %.3g", qwen3Fixture, d, math.Abs(loss-ref.Loss))
	if d > 1e-4 || math.Abs(loss-ref.Loss) > 1e-5 {
		t.Errorf("logits differ by %.3g, loss %.8g want %.8g", d, loss, ref.Loss)
	}
	cfg, err := ParseConfig(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := cfg.(*qwen3.Config); !ok || c.HeadDim != 32 {
		t.Errorf("ParseConfig: %T %+v", cfg, cfg)
	}
	if !slices.Equal(Supported()["qwen3"], []string{"Qwen3ForCausalLM"}) {
		t.Errorf("Supported: %v", Supported()["qwen3"])
	}
	// model_type is inferred from architectures when absent.
	noType := copyDir(t, dir)
	editConfig(t, noType, `"model_type": "qwen3",`, ``)
	if m, err := Load(context.Background(), rt, noType, LoadOptions{}); err != nil || m.Architecture() != "Qwen3ForCausalLM" {
		t.Errorf("without model_type: %v", err)
	}
	// models.New builds one from a parsed config.
	c := cfg.(*qwen3.Config)
	fresh, err := New(context.Background(), rt, c, NewOptions{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh.Params()) != len(m.Params()) {
		t.Errorf("New: %d params, Load: %d", len(fresh.Params()), len(m.Params()))
	}
}

// Save, load, save again: byte-identical directories, config.json identical to the fixture's (HF
// 4.57's form kept: "dtype", layer_types, sliding_window null), tensors bit-identical, same logits.
func TestQwen3SaveLoadSaveByteIdentical(t *testing.T) {
	rt := openGo(t)
	src := fixtureDir(t, qwen3Fixture)
	ref := reftest.Read(t, qwen3Fixture)
	m, err := Load(context.Background(), rt, src, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := logitsOf(t, rt, m, ref)
	d1, d2 := t.TempDir(), t.TempDir()
	if err := m.Save(d1, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	m2, err := Load(context.Background(), rt, d1, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Save(d2, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	f1, f2 := dirFiles(t, d1), dirFiles(t, d2)
	if !slices.Equal(keys(f1), []string{"config.json", "model.safetensors"}) || !slices.Equal(keys(f2), keys(f1)) {
		t.Fatalf("saved files %v / %v", keys(f1), keys(f2))
	}
	for name, b := range f1 {
		if !bytes.Equal(b, f2[name]) {
			t.Errorf("%s differs between the first and second save", name)
		}
	}
	orig, saved := tensorBytes(t, src), tensorBytes(t, d1)
	for name, b := range orig {
		if saved[name] != b {
			t.Errorf("tensor %s changed in the round trip", name)
		}
	}
	if len(orig) != len(saved) {
		t.Errorf("%d tensors saved, fixture has %d", len(saved), len(orig))
	}
	origFile, _ := os.ReadFile(filepath.Join(src, "model.safetensors"))
	if !bytes.Equal(origFile, f1["model.safetensors"]) {
		t.Error("model.safetensors is not byte-identical to the fixture's (written by the reference's save_pretrained)")
	}
	origCfg, _ := os.ReadFile(filepath.Join(src, "config.json"))
	if !bytes.Equal(origCfg, f1["config.json"]) {
		t.Errorf("config.json changed:\n%s\nwant\n%s", f1["config.json"], origCfg)
	}
	after, _ := logitsOf(t, rt, m2, ref)
	if !slices.Equal(before, after) {
		t.Errorf("logits changed after the round trip (max diff %.3g)", reftest.MaxAbsDiff(before, after))
	}
}

func TestQwen3ShardedSaveAndLoad(t *testing.T) {
	rt := openGo(t)
	ref := reftest.Read(t, qwen3Fixture)
	m, err := Load(context.Background(), rt, fixtureDir(t, qwen3Fixture), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := logitsOf(t, rt, m, ref)
	dir := t.TempDir()
	if err := m.Save(dir, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	const limit = 150_000 // embed and lm_head (131 kB each) alone, the layers split between them
	if err := m.Save(dir, SaveOptions{MaxShardSize: limit}); err != nil {
		t.Fatal(err)
	}
	files := dirFiles(t, dir)
	if _, stale := files["model.safetensors"]; stale {
		t.Fatal("stale model.safetensors left next to the shards")
	}
	var idx struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(files["model.safetensors.index.json"], &idx); err != nil {
		t.Fatal(err)
	}
	shards := map[string]bool{}
	for _, s := range idx.WeightMap {
		shards[s] = true
	}
	if len(shards) < 3 || len(idx.WeightMap) != len(m.Params()) {
		t.Fatalf("%d shards holding %d tensors (model has %d)", len(shards), len(idx.WeightMap), len(m.Params()))
	}
	var total int64
	for s := range shards {
		f, err := safetensors.Open(filepath.Join(dir, s))
		if err != nil {
			t.Fatal(err)
		}
		if size := f.Header().DataSize(); size > limit && len(f.Names()) != 1 {
			t.Errorf("%s holds %d bytes in %d tensors, over the %d limit", s, size, len(f.Names()), limit)
		}
		total += f.Header().DataSize()
		f.Close()
	}
	if idx.Metadata["total_size"] != total {
		t.Errorf("total_size %d, shards hold %d", idx.Metadata["total_size"], total)
	}
	m2, err := Load(context.Background(), rt, dir, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after, _ := logitsOf(t, rt, m2, ref)
	if !slices.Equal(before, after) {
		t.Error("logits changed through the sharded round trip")
	}
	dir2 := t.TempDir()
	if err := m2.Save(dir2, SaveOptions{MaxShardSize: limit}); err != nil {
		t.Fatal(err)
	}
	for name, b := range dirFiles(t, dir2) {
		if !bytes.Equal(b, files[name]) {
			t.Errorf("%s differs between sharded saves", name)
		}
	}
}

// bf16: a bfloat16 save loads as float32 master weights or as bfloat16 ("auto"), computes close
// to float32, and saves back bit-exactly.
func TestQwen3BFloat16(t *testing.T) {
	rt := openGo(t)
	ref := reftest.Read(t, qwen3Fixture)
	m, err := Load(context.Background(), rt, fixtureDir(t, qwen3Fixture), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	full, _ := logitsOf(t, rt, m, ref)
	half := t.TempDir()
	if err := m.Save(half, SaveOptions{DType: "bfloat16"}); err != nil {
		t.Fatal(err)
	}
	native, err := Load(context.Background(), rt, half, LoadOptions{DType: "auto"})
	if err != nil {
		t.Fatal(err)
	}
	lb, loss := logitsOf(t, rt, native, ref)
	d := reftest.MaxAbsDiff(lb, full)
	t.Logf("bf16 weights and compute: max |logits - float32| %.3g, loss %.5f (float32 %.5f)", d, loss, ref.Loss)
	if d > 0.5 || d == 0 || math.IsNaN(d) || math.Abs(loss-ref.Loss) > 0.02 {
		t.Errorf("bf16 logits differ by %.3g, loss %.5f", d, loss)
	}
	again := t.TempDir()
	if err := native.Save(again, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dirFiles(t, half)["model.safetensors"], dirFiles(t, again)["model.safetensors"]) {
		t.Error("bf16 model saved in its own dtype is not bit-exact")
	}
	var cfg map[string]any
	if err := json.Unmarshal(dirFiles(t, half)["config.json"], &cfg); err != nil || cfg["dtype"] != "bfloat16" {
		t.Errorf("bf16 save: dtype %v (%v)", cfg["dtype"], err)
	}
}

// qwen3Variant builds a random Qwen3 model from the fixture's config with edits (sliding window,
// biases, tied head...), to cover what the fixture does not.
func qwen3Variant(t *testing.T, rt *xla.Runtime, edit func(c *qwen3.Config)) Model {
	t.Helper()
	cfg, err := ParseConfig(filepath.Join(fixtureDir(t, qwen3Fixture), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.(*qwen3.Config)
	c.LayerTypes = nil
	c.InitializerRange = 0.1 // attention far from uniform, as in the fixture
	edit(c)
	m, err := New(context.Background(), rt, c, NewOptions{Seed: 11})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// slidingBiasedTied: layer 0 full, layer 1 sliding with window 5 (the fixture's rows are 32 long),
// q/k/v/o biases, tied head, a pad token.
func slidingBiasedTied(c *qwen3.Config) {
	w, pad := 5, 1
	c.UseSlidingWindow, c.SlidingWindow, c.MaxWindowLayers = true, &w, 1
	c.AttentionBias, c.TieWordEmbeddings, c.PadTokenID = true, true, &pad
}

// What gotpu saves loads in the independent PyTorch reference (qwen3_ref.py) with exactly the
// fixture's logits there, and within float32 rounding of gotpu's; so does a random model with a
// sliding-window layer, biases and a tied head, which checks gotpu's sliding window, bias names
// and tied-head saving against the reference.
func TestQwen3PythonLoadsSavedModels(t *testing.T) {
	py := pythonWithTorch(t)
	rt := openGo(t)
	ref := reftest.Read(t, qwen3Fixture)
	refPath := filepath.Join(fixtureDir(t, qwen3Fixture), "reference.json")
	type job struct {
		Kind string `json:"kind"`
		Dir  string `json:"dir"`
		Ref  string `json:"ref"`
	}
	m, err := Load(context.Background(), rt, fixtureDir(t, qwen3Fixture), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saved := t.TempDir()
	if err := m.Save(saved, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	ours, _ := logitsOf(t, rt, m, ref)
	variant := qwen3Variant(t, rt, slidingBiasedTied)
	variantDir := t.TempDir()
	if err := variant.Save(variantDir, SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	oursVariant, _ := logitsOf(t, rt, variant, ref)
	jobs := []job{{"qwen3", fixtureDir(t, qwen3Fixture), refPath}, {"qwen3", saved, refPath}, {"qwen3", variantDir, refPath}}
	tmp := t.TempDir()
	jobsPath, outPath := filepath.Join(tmp, "jobs.json"), filepath.Join(tmp, "out.json")
	b, _ := json.Marshal(jobs)
	if err := os.WriteFile(jobsPath, b, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(reftest.Dir(t), "reference", "run_saved.py")
	if out, err := exec.Command(py, script, jobsPath, outPath).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	var res []struct {
		Logits []float64 `json:"logits"`
	}
	b, _ = os.ReadFile(outPath)
	if err := json.Unmarshal(b, &res); err != nil || len(res) != len(jobs) {
		t.Fatalf("%d results for %d jobs: %v", len(res), len(jobs), err)
	}
	if len(res[1].Logits) == 0 || !slices.Equal(res[0].Logits, res[1].Logits) {
		t.Errorf("Python logits differ between the fixture and gotpu's save (max %.3g)", reftest.MaxAbsDiff(res[0].Logits, res[1].Logits))
	}
	d := reftest.MaxAbsDiff(ours, res[1].Logits)
	dv := reftest.MaxAbsDiff(oursVariant, res[2].Logits)
	t.Logf("Python float32 logits from gotpu's save vs gotpu: fixture max diff %.3g; sliding/bias/tied variant max diff %.3g", d, dv)
	if d > 1e-4 || dv > 1e-4 {
		t.Errorf("max diff %.3g (fixture), %.3g (variant)", d, dv)
	}
}

func TestQwen3Score(t *testing.T) {
	rt := openGo(t)
	ref := reftest.Read(t, qwen3Fixture)
	m, err := Load(context.Background(), rt, fixtureDir(t, qwen3Fixture), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	logitsPath := filepath.Join(t.TempDir(), "logits.safetensors")
	if err := ScoreJSONLines(context.Background(), rt, m, strings.NewReader(fixtureLines(ref)), &out, logitsPath); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(ref.InputIDs) {
		t.Fatalf("%d output lines for %d examples", len(lines), len(ref.InputIDs))
	}
	sum := 0.0
	for _, l := range lines {
		var r ScoreResult
		if err := json.Unmarshal([]byte(l), &r); err != nil || r.Loss == nil {
			t.Fatalf("output line %q: %v", l, err)
		}
		sum += *r.Loss
	}
	mean := sum / float64(len(lines))
	lf, err := safetensors.Open(logitsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	info, ok := lf.Info("logits")
	if !ok || info.DType != safetensors.F32 || !slices.Equal(info.Shape, ref.Logits.Shape) {
		t.Fatalf("logits file: %+v (want F32 %v)", info, ref.Logits.Shape)
	}
	raw, _ := lf.Bytes("logits")
	vals := make([]float32, len(raw)/4)
	if err := safetensors.DecodeFloat32(safetensors.F32, raw, vals); err != nil {
		t.Fatal(err)
	}
	got := make([]float64, len(vals))
	for i, v := range vals {
		got[i] = float64(v)
	}
	d := reftest.MaxAbsDiff(got, ref.FlatLogits(t))
	t.Logf("%s: mean per-line loss diff %.3g, logits file max diff %.3g", qwen3Fixture, math.Abs(mean-ref.Loss), d)
	if math.Abs(mean-ref.Loss) > 1e-5 || d > 1e-4 {
		t.Errorf("mean loss %.9f (want %.9f), logits diff %.3g", mean, ref.Loss, d)
	}
}

// Greedy decoding with the KV cache equals the argmax of full forward passes: on the fixture, and
// on a model with a sliding-window layer (window 5) generating 40 tokens, far past the window.
func TestQwen3GenerateMatchesFullRecompute(t *testing.T) {
	rt := openGo(t)
	ref := reftest.Read(t, qwen3Fixture)
	fix, err := Load(context.Background(), rt, fixtureDir(t, qwen3Fixture), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		m    Model
		n    int
	}{
		{"fixture", fix, 30},
		{"sliding window 5", qwen3Variant(t, rt, slidingBiasedTied), 40},
	} {
		t.Run(c.name, func(t *testing.T) {
			lm := c.m.(CausalLM)
			prompt := ref.InputIDs[0][:6]
			opts := DefaultGenerateOptions()
			opts.MaxNewTokens, opts.EOSTokenIDs = c.n, []int{}
			got, err := Generate(context.Background(), rt, lm, prompt, opts)
			if err != nil {
				t.Fatal(err)
			}
			want := greedyNoCache(t, rt, c.m, prompt, c.n)
			t.Logf("greedy with the cache: %v", got)
			if !slices.Equal(got, want) {
				t.Fatalf("KV-cache greedy %v\nfull recompute  %v", got, want)
			}
			if len(slices.Compact(slices.Clone(got))) < 3 {
				t.Errorf("degenerate continuation %v: the test compares nothing", got)
			}
		})
	}
}

// Bad Qwen3 directories are errors naming the file and the tensor or field.
func TestQwen3BadInputs(t *testing.T) {
	rt := openGo(t)
	src := fixtureDir(t, qwen3Fixture)
	zeros := func(n int) []byte { return make([]byte, n) }
	cases := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		want    []string
		is      error
	}{
		{"missing q_norm", func(t *testing.T, d string) {
			rewriteWeights(t, d, without("model.layers.1.self_attn.q_norm.weight"))
		}, []string{"$DIR/model.safetensors", "missing tensor", `"model.layers.1.self_attn.q_norm.weight"`, "Qwen3ForCausalLM"}, nil},
		{"extra tensor", func(t *testing.T, d string) {
			rewriteWeights(t, d, with(safetensors.Tensor{Name: "model.layers.0.self_attn.q_norm.bias", DType: safetensors.F32, Shape: []int{32}, Data: zeros(128)}))
		}, []string{"$DIR/model.safetensors", "unexpected tensor", `"model.layers.0.self_attn.q_norm.bias" in model.safetensors`}, nil},
		{"head_dim absent means 128", func(t *testing.T, d string) { editConfig(t, d, `"head_dim": 32,`, ``) },
			[]string{"$DIR/model.safetensors", `tensor "model.layers.0.self_attn.q_proj.weight"`, "[128 64]", "[512 64]",
				"head_dim=128", "no head_dim", "default 128"}, nil},
		{"head_dim hidden/heads", func(t *testing.T, d string) { editConfig(t, d, `"head_dim": 32,`, `"head_dim": 16,`) },
			[]string{"$DIR/model.safetensors", `tensor "model.layers.0.self_attn.q_proj.weight"`, "[128 64]", "[64 64]", "head_dim=16"}, nil},
		{"q_norm of the wrong size", func(t *testing.T, d string) {
			rewriteWeights(t, d, func(ts []safetensors.Tensor) []safetensors.Tensor {
				for i := range ts {
					if ts[i].Name == "model.layers.0.self_attn.k_norm.weight" {
						ts[i].Shape, ts[i].Data = []int{64}, zeros(256)
					}
				}
				return ts
			})
		}, []string{"$DIR/model.safetensors", `tensor "model.layers.0.self_attn.k_norm.weight"`, "[64]", "[32]", "[head_dim]"}, nil},
		{"unknown layer type", func(t *testing.T, d string) { editConfig(t, d, `"full_attention"`, `"linear_attention"`) },
			[]string{"$DIR/config.json", `field "layer_types"`, `"linear_attention"`}, nil},
		{"sliding layer without a window", func(t *testing.T, d string) { editConfig(t, d, `"full_attention"`, `"sliding_attention"`) },
			[]string{"$DIR/config.json", `field "layer_types"`, "sliding_attention", "use_sliding_window"}, nil},
		{"another Qwen3 class", func(t *testing.T, d string) {
			editConfig(t, d, `"Qwen3ForCausalLM"`, `"Qwen3ForSequenceClassification"`)
		},
			[]string{"$DIR/config.json", `"architectures"`, "Qwen3ForSequenceClassification"}, ErrUnsupported},
		{"Qwen3 MoE", func(t *testing.T, d string) { editConfig(t, d, `"model_type": "qwen3"`, `"model_type": "qwen3_moe"`) },
			[]string{"$DIR/config.json", `"model_type"`, `"qwen3_moe"`}, ErrUnsupported},
		{"tied head that differs", func(t *testing.T, d string) {
			editConfig(t, d, `"tie_word_embeddings": false`, `"tie_word_embeddings": true`)
		}, []string{"$DIR/model.safetensors", `"lm_head.weight"`, "tie_word_embeddings"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, src)
			c.prepare(t, dir)
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panic: %v", r)
					}
				}()
				_, err = Load(context.Background(), rt, dir, LoadOptions{})
			}()
			if err == nil {
				t.Fatal("loaded without error")
			}
			msg := err.Error()
			t.Log(msg)
			for _, w := range c.want {
				if w = strings.ReplaceAll(w, "$DIR", dir); !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %q does not wrap %v", msg, c.is)
			}
		})
	}
	// A bare Qwen3Model file (no "model." prefix) and rotary inv_freq buffers load.
	bare := copyDir(t, src)
	rewriteWeights(t, bare, func(ts []safetensors.Tensor) []safetensors.Tensor {
		for i := range ts {
			ts[i].Name = strings.TrimPrefix(ts[i].Name, "model.")
		}
		return append(ts, safetensors.Tensor{Name: "layers.0.self_attn.rotary_emb.inv_freq", DType: safetensors.F32, Shape: []int{16}, Data: zeros(64)})
	})
	if _, err := Load(context.Background(), rt, bare, LoadOptions{}); err != nil {
		t.Errorf("bare Qwen3Model file: %v", err)
	}
}

// EstimateFootprint counts exactly the parameters the table holds, with and without biases, tied
// head and sliding window.
func TestQwen3Footprint(t *testing.T) {
	rt := openGo(t)
	fix, err := Load(context.Background(), rt, fixtureDir(t, qwen3Fixture), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []Model{fix, qwen3Variant(t, rt, slidingBiasedTied)} {
		fp, err := EstimateFootprint(m.Config())
		if err != nil {
			t.Fatal(err)
		}
		var n, largest int64
		for _, p := range m.Params() {
			n += int64(p.NumElements())
			largest = max(largest, int64(p.NumElements()))
		}
		if fp.Params != n || fp.LargestParam != largest || fp.MLPMatrices != 3 || fp.Vocab != 512 {
			t.Errorf("footprint %+v, table has %d parameters (largest %d)", fp, n, largest)
		}
	}
}
