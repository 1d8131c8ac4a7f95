package models

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models/internal/core"
)

// rewriteWeights rewrites dir/model.safetensors through edit, which may drop, add or change tensors.
func rewriteWeights(t testing.TB, dir string, edit func([]safetensors.Tensor) []safetensors.Tensor) {
	t.Helper()
	p := filepath.Join(dir, "model.safetensors")
	f, err := safetensors.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		b, _ := f.Bytes(n)
		ts = append(ts, safetensors.Tensor{Name: n, DType: info.DType, Shape: info.Shape, Data: bytes.Clone(b)})
	}
	md := f.Metadata()
	f.Close()
	if err := safetensors.WriteFile(p, edit(ts), md); err != nil {
		t.Fatal(err)
	}
}

// editConfig rewrites a field of dir/config.json.
func editConfig(t testing.TB, dir, old, new string) {
	t.Helper()
	p := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("config.json has no %q", old)
	}
	if err := os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644); err != nil {
		t.Fatal(err)
	}
}

// patchHeader replaces text inside the safetensors JSON header (same length keeps offsets valid).
func patchHeader(t testing.TB, dir, old, new string) {
	t.Helper()
	p := filepath.Join(dir, "model.safetensors")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b)
	hdr := b[8 : 8+n]
	i := bytes.Index(hdr, []byte(old))
	if i < 0 || len(old) != len(new) {
		t.Fatalf("cannot patch %q", old)
	}
	copy(hdr[i:], new)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func without(name string) func([]safetensors.Tensor) []safetensors.Tensor {
	return func(ts []safetensors.Tensor) []safetensors.Tensor {
		var out []safetensors.Tensor
		for _, x := range ts {
			if x.Name != name {
				out = append(out, x)
			}
		}
		return out
	}
}

func with(extra safetensors.Tensor) func([]safetensors.Tensor) []safetensors.Tensor {
	return func(ts []safetensors.Tensor) []safetensors.Tensor { return append(ts, extra) }
}

// Every bad model directory gives an error naming the file and the tensor or field; none panics.
func TestBadInputs(t *testing.T) {
	rt := openGo(t)
	gpt2 := fixtureDir(t, "gpt2-tiny")
	llama := fixtureDir(t, "llama-tiny")
	zeros := func(n int) []byte { return make([]byte, n) }
	cases := []struct {
		name    string
		src     string
		prepare func(t *testing.T, dir string)
		// want lists substrings the error must contain; "$DIR" is replaced by the directory.
		want []string
		is   error
	}{
		{"missing tensor", gpt2, func(t *testing.T, d string) { rewriteWeights(t, d, without("h.1.mlp.c_fc.bias")) },
			[]string{"$DIR/model.safetensors", "missing tensor", `"transformer.h.1.mlp.c_fc.bias"`}, nil},
		{"unexpected tensor", gpt2, func(t *testing.T, d string) {
			rewriteWeights(t, d, with(safetensors.Tensor{Name: "h.0.attn.extra.weight", DType: safetensors.F32, Shape: []int{2}, Data: zeros(8)}))
		}, []string{"unexpected tensor", `"h.0.attn.extra.weight" in model.safetensors`}, nil},
		{"classification head in an LM file", gpt2, func(t *testing.T, d string) {
			rewriteWeights(t, d, with(safetensors.Tensor{Name: "score.weight", DType: safetensors.F32, Shape: []int{2, 64}, Data: zeros(512)}))
		}, []string{"unexpected tensor", `"score.weight"`}, nil},
		{"prefixed and unprefixed copies", gpt2, func(t *testing.T, d string) {
			rewriteWeights(t, d, with(safetensors.Tensor{Name: "transformer.ln_f.bias", DType: safetensors.F32, Shape: []int{64}, Data: zeros(256)}))
		}, []string{"$DIR/model.safetensors", `"ln_f.bias"`, `"transformer.ln_f.bias"`, "both map"}, nil},
		{"shape mismatch with config", gpt2, func(t *testing.T, d string) { editConfig(t, d, `"vocab_size": 1000`, `"vocab_size": 1001`) },
			[]string{"$DIR/model.safetensors", `tensor "wte.weight"`, "[1000 64]", "[1001 64]", "vocab_size"}, nil},
		{"head count not dividing width", gpt2, func(t *testing.T, d string) { editConfig(t, d, `"n_head": 4`, `"n_head": 5`) },
			[]string{"$DIR/config.json", `field "n_head"`}, nil},
		{"unknown dtype", gpt2, func(t *testing.T, d string) { patchHeader(t, d, `"dtype":"F32"`, `"dtype":"Q32"`) },
			[]string{"$DIR/model.safetensors", `unknown safetensors dtype "Q32"`}, safetensors.ErrUnknownDType},
		{"integer weights", gpt2, func(t *testing.T, d string) {
			rewriteWeights(t, d, func(ts []safetensors.Tensor) []safetensors.Tensor {
				for i := range ts {
					if ts[i].Name == "ln_f.bias" {
						ts[i].DType = safetensors.I32
					}
				}
				return ts
			})
		}, []string{"$DIR/model.safetensors", `tensor "ln_f.bias"`, "I32", "not a floating-point"}, nil},
		{"model_type not supported", gpt2, func(t *testing.T, d string) { editConfig(t, d, `"model_type": "gpt2"`, `"model_type": "t5"`) },
			[]string{"$DIR/config.json", `"model_type"`, `"t5"`}, ErrUnsupported},
		{"architecture not supported", gpt2, func(t *testing.T, d string) {
			editConfig(t, d, `"GPT2LMHeadModel"`, `"GPT2ForSequenceClassification"`)
		}, []string{"$DIR/config.json", `"architectures"`, "GPT2ForSequenceClassification"}, ErrUnsupported},
		{"unsupported rope scaling", llama, func(t *testing.T, d string) {
			editConfig(t, d, `"rope_scaling": null`, `"rope_scaling": {"rope_type": "yarn", "factor": 4.0}`)
		}, []string{"$DIR/config.json", `"rope_scaling"`, `"yarn"`}, nil},
		{"truncated safetensors", gpt2, func(t *testing.T, d string) {
			p := filepath.Join(d, "model.safetensors")
			st, _ := os.Stat(p)
			if err := os.Truncate(p, st.Size()-100); err != nil {
				t.Fatal(err)
			}
		}, []string{"$DIR/model.safetensors", "past the end", `tensor "`}, safetensors.ErrTruncated},
		{"index pointing to a missing shard", gpt2, func(t *testing.T, d string) {
			m, err := Load(context.Background(), rt, d, LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Save(d, SaveOptions{MaxShardSize: 150_000}); err != nil {
				t.Fatal(err)
			}
			second, _ := filepath.Glob(filepath.Join(d, "model-00002-of-*.safetensors"))
			if len(second) != 1 {
				t.Fatalf("shards: %v", second)
			}
			if err := os.Remove(second[0]); err != nil {
				t.Fatal(err)
			}
		}, []string{"$DIR/model.safetensors.index.json", "$DIR/model-00002-of-", "does not exist"}, nil},
		{"index escaping the directory", gpt2, func(t *testing.T, d string) {
			os.Remove(filepath.Join(d, "model.safetensors"))
			idx := `{"metadata": {}, "weight_map": {"wte.weight": "../model.safetensors"}}`
			if err := os.WriteFile(filepath.Join(d, "model.safetensors.index.json"), []byte(idx), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"$DIR/model.safetensors.index.json", `"../model.safetensors"`, "not a file name"}, nil},
		{"pytorch_model.bin only", gpt2, func(t *testing.T, d string) {
			os.Remove(filepath.Join(d, "model.safetensors"))
			if err := os.WriteFile(filepath.Join(d, "pytorch_model.bin"), []byte("PK"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"$DIR", "pytorch_model.bin", "safetensors", "pickle"}, core.ErrPickle},
		{"no weights at all", gpt2, func(t *testing.T, d string) { os.Remove(filepath.Join(d, "model.safetensors")) },
			[]string{"$DIR", "no model.safetensors"}, nil},
		{"no config.json", gpt2, func(t *testing.T, d string) { os.Remove(filepath.Join(d, "config.json")) },
			[]string{"$DIR/config.json"}, os.ErrNotExist},
		{"config.json not an object", gpt2, func(t *testing.T, d string) {
			os.WriteFile(filepath.Join(d, "config.json"), []byte("[1, 2]"), 0o644)
		}, []string{"$DIR/config.json", "not a JSON object"}, nil},
		{"config field of the wrong type", gpt2, func(t *testing.T, d string) { editConfig(t, d, `"n_layer": 2`, `"n_layer": "two"`) },
			[]string{"$DIR/config.json", `field "n_layer"`}, nil},
		{"tied head that differs", llama, func(t *testing.T, d string) {
			editConfig(t, d, `"tie_word_embeddings": false`, `"tie_word_embeddings": true`)
		}, []string{"$DIR/model.safetensors", `"lm_head.weight"`, "tie_word_embeddings"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyDir(t, c.src)
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
				w = strings.ReplaceAll(w, "$DIR", dir)
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("error %q does not wrap %v", msg, c.is)
			}
			if strings.Contains(msg, "goroutine ") {
				t.Errorf("error carries a stack trace: %q", msg)
			}
		})
	}
}
