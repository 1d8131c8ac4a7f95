package gemma3

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/internal/reftest"
	"github.com/gotpu/gotpu/xla"
)

// fixtureTensors reads the fixture's tensors (names, dtypes, shapes, bytes).
func fixtureTensors(t *testing.T) ([]safetensors.Tensor, map[string]string) {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(fixtureDir(t), "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ts []safetensors.Tensor
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		b, _ := f.Bytes(n)
		ts = append(ts, safetensors.Tensor{Name: n, DType: info.DType, Shape: info.Shape, Data: bytes.Clone(b)})
	}
	return ts, f.Metadata()
}

// writeDir writes a model directory: config.json bytes and the given tensors.
func writeDir(t *testing.T, config []byte, ts []safetensors.Tensor, md map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), config, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, md); err != nil {
		t.Fatal(err)
	}
	return dir
}

func fixtureConfigBytes(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(fixtureDir(t), "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Checkpoints that do not match the config are errors naming the file and the tensor.
func TestBadCheckpoints(t *testing.T) {
	rt := openGoBackend(t, xla.GoBackendGotpu)
	ts, md := fixtureTensors(t)
	cfg := fixtureConfigBytes(t)
	zeros := make([]byte, 64)
	cases := []struct {
		name string
		edit func([]safetensors.Tensor) []safetensors.Tensor
		want []string
	}{
		{"missing q_norm", func(ts []safetensors.Tensor) []safetensors.Tensor {
			return slices.DeleteFunc(ts, func(x safetensors.Tensor) bool { return x.Name == "model.layers.1.self_attn.q_norm.weight" })
		}, []string{"missing tensor", `"model.layers.1.self_attn.q_norm.weight"`}},
		{"extra tensor", func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.Tensor{Name: "model.layers.0.self_attn.v_norm.weight", DType: safetensors.F32, Shape: []int{16}, Data: zeros})
		}, []string{"unexpected tensor", `"model.layers.0.self_attn.v_norm.weight" in model.safetensors`}},
		{"vision tower in a text model", func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.Tensor{Name: "vision_tower.vision_model.post_layernorm.weight", DType: safetensors.F32, Shape: []int{16}, Data: zeros})
		}, []string{"unexpected tensor", `"vision_tower.vision_model.post_layernorm.weight"`}},
		{"q_norm of hidden size", func(ts []safetensors.Tensor) []safetensors.Tensor {
			for i := range ts {
				if ts[i].Name == "model.layers.0.self_attn.k_norm.weight" {
					ts[i].Shape, ts[i].Data = []int{64}, make([]byte, 256)
				}
			}
			return ts
		}, []string{`tensor "model.layers.0.self_attn.k_norm.weight"`, "[64]", "[16]", "head_dim=16"}},
		{"tied head that differs", func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.Tensor{Name: "lm_head.weight", DType: safetensors.F32, Shape: []int{512, 64}, Data: make([]byte, 512*64*4)})
		}, []string{`"lm_head.weight"`, "tie_word_embeddings"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			orig, _ := fixtureTensors(t)
			dir := writeDir(t, cfg, c.edit(orig), md)
			_, err := Load(context.Background(), rt, dir, core.LoadOptions{})
			if err == nil {
				t.Fatal("loaded without error")
			}
			t.Log(err)
			for _, w := range append(c.want, filepath.Join(dir, "model.safetensors")) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	// The tied head written out (equal bytes) and non-persistent buffers are accepted.
	extra := append(slices.Clone(ts), safetensors.Tensor{Name: "lm_head.weight", DType: ts[0].DType, Shape: ts[0].Shape, Data: ts[0].Data},
		safetensors.Tensor{Name: "model.layers.0.self_attn.rotary_emb.inv_freq", DType: safetensors.F32, Shape: []int{8}, Data: make([]byte, 32)})
	if ts[0].Name != "model.embed_tokens.weight" {
		t.Fatalf("first tensor %s", ts[0].Name)
	}
	if _, err := Load(context.Background(), rt, writeDir(t, cfg, extra, md), core.LoadOptions{}); err != nil {
		t.Errorf("tied lm_head equal to the embedding, plus an inv_freq buffer: %v", err)
	}
}

func dirBytes(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

// Sharded save -> load -> save is byte-identical, and the logits do not move.
func TestShardedRoundTrip(t *testing.T) {
	rt := openGoBackend(t, xla.GoBackendGotpu)
	m := loadFixture(t, rt)
	ref := reftest.Read(t, fixture)
	before := runLogits(t, rt, m, ref.InputIDs[1])
	d1, d2 := t.TempDir(), t.TempDir()
	const limit = 100_000
	if err := m.Save(d1, core.SaveOptions{MaxShardSize: limit}); err != nil {
		t.Fatal(err)
	}
	m2, err := Load(context.Background(), rt, d1, core.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m2.Save(d2, core.SaveOptions{MaxShardSize: limit}); err != nil {
		t.Fatal(err)
	}
	f1, f2 := dirBytes(t, d1), dirBytes(t, d2)
	shards := 0
	for name, b := range f1 {
		if strings.HasPrefix(name, "model-") {
			shards++
		}
		if !bytes.Equal(b, f2[name]) {
			t.Errorf("%s differs between the sharded saves", name)
		}
	}
	if shards < 3 || len(f1) != len(f2) || f1["model.safetensors.index.json"] == nil {
		t.Fatalf("saved %v", keys(f1))
	}
	if !bytes.Equal(f1["config.json"], fixtureConfigBytes(t)) {
		t.Errorf("config.json changed:\n%s", f1["config.json"])
	}
	if d := reftest.MaxAbsDiff(before, runLogits(t, rt, m2, ref.InputIDs[1])); d != 0 {
		t.Errorf("logits moved by %.3g through the sharded round trip", d)
	}
}

func keys(m map[string][]byte) []string {
	var k []string
	for n := range m {
		k = append(k, n)
	}
	slices.Sort(k)
	return k
}

// A Gemma3ForConditionalGeneration directory (either naming transformers has written, vision tower
// and projector included) loads as the fixture's Gemma3ForCausalLM with identical logits, and
// saves as a text-only Gemma3ForCausalLM directory that round-trips byte for byte.
func TestMultimodalCheckpoint(t *testing.T) {
	rt := openGoBackend(t, xla.GoBackendGotpu)
	ref := reftest.Read(t, fixture)
	want := runLogits(t, rt, loadFixture(t, rt), ref.InputIDs[0])
	text := strings.TrimSpace(string(fixtureConfigBytes(t)))
	config := []byte(`{"architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3", "eos_token_id": [1, 106],
	  "image_token_index": 262144, "mm_tokens_per_image": 256, "dtype": "float32",
	  "text_config": ` + text + `, "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 16}}`)
	for _, prefix := range []string{"language_model.model.", "model.language_model."} {
		t.Run(prefix, func(t *testing.T) {
			ts, md := fixtureTensors(t)
			for i := range ts {
				ts[i].Name = prefix + strings.TrimPrefix(ts[i].Name, "model.")
			}
			vis := "vision_tower.vision_model.post_layernorm.weight"
			proj := "multi_modal_projector.mm_input_projection_weight"
			if prefix == "model.language_model." {
				vis, proj = "model."+vis, "model."+proj
			}
			ts = append(ts, safetensors.Tensor{Name: vis, DType: safetensors.F32, Shape: []int{16}, Data: make([]byte, 64)},
				safetensors.Tensor{Name: proj, DType: safetensors.F32, Shape: []int{16, 64}, Data: make([]byte, 16*64*4)})
			dir := writeDir(t, config, ts, md)
			m, err := Load(context.Background(), rt, dir, core.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if m.Architecture() != Architecture {
				t.Errorf("architecture %s", m.Architecture())
			}
			if d := reftest.MaxAbsDiff(want, runLogits(t, rt, m, ref.InputIDs[0])); d != 0 {
				t.Errorf("logits differ from the text fixture by %.3g", d)
			}
			d1, d2 := t.TempDir(), t.TempDir()
			if err := m.Save(d1, core.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			m2, err := Load(context.Background(), rt, d1, core.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := m2.Save(d2, core.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			f1, f2 := dirBytes(t, d1), dirBytes(t, d2)
			for name, b := range f1 {
				if !bytes.Equal(b, f2[name]) {
					t.Errorf("%s differs between saves", name)
				}
			}
			orig, _ := os.ReadFile(filepath.Join(fixtureDir(t), "model.safetensors"))
			if !bytes.Equal(f1["model.safetensors"], orig) {
				t.Error("the saved text model's weights differ from the text fixture's file")
			}
			raw, _ := core.ParseRawConfig("config.json", f1["config.json"])
			c, err := ParseConfig(raw)
			if err != nil || !strings.Contains(string(f1["config.json"]), `"model_type": "gemma3_text"`) ||
				!strings.Contains(string(f1["config.json"]), `"Gemma3ForCausalLM"`) || c.HeadDim != 16 {
				t.Errorf("saved config (%v):\n%s", err, f1["config.json"])
			}
		})
	}
}
