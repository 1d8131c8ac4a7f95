//go:build !noxla

package step

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla/pjrttest"
)

// On XLA's CPU plugin gradient checkpointing survives compilation: a Llama-shaped model (hidden
// 256, 4 layers, vocabulary 512) trained on batch 4 × 256 compiles to a train program whose
// scratch memory (XLA's temp figure) is less than half that of the same program without
// checkpointing — XLA's CSE did not merge the recomputed layers into the forward pass — and the
// two runs take the same losses (to 1e-6 relative: XLA fuses the two programs differently).
func TestGradientCheckpointingOnXLACPU(t *testing.T) {
	rt := pjrttest.OpenCPUPlugin(t, 1)
	ctx := context.Background()
	cfgJSON := map[string]any{
		"architectures": []string{"LlamaForCausalLM"}, "model_type": "llama", "hidden_act": "silu",
		"hidden_size": 256, "intermediate_size": 688, "num_hidden_layers": 4, "num_attention_heads": 4,
		"num_key_value_heads": 4, "head_dim": 64, "vocab_size": 512, "max_position_embeddings": 256,
		"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false, "torch_dtype": "float32",
	}
	raw, err := json.Marshal(cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := models.ParseConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	b := &data.Batch{Size: 4, SeqLen: 256}
	for i := range b.Size * b.SeqLen {
		id := int32(i * 7919 % 512)
		b.InputIDs, b.AttentionMask, b.Labels = append(b.InputIDs, id), append(b.AttentionMask, 1), append(b.Labels, id)
	}
	run := func(ckpt bool) (losses []float64, temp int64) {
		m, err := models.New(ctx, rt, cfg, models.NewOptions{Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		s, err := New(rt, m, Config{Optimizer: fixtureOptimizer(true), NumReplicas: 1, GradientCheckpointing: ckpt})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			res, err := s.Step(ctx, [][]*data.Batch{{b}}, 1e-3)
			if err != nil {
				t.Fatal(err)
			}
			losses = append(losses, res.Loss)
		}
		st, err := s.MemoryStats()
		if err != nil {
			t.Fatal(err)
		}
		return losses, st.Temp
	}
	l0, t0 := run(false)
	l1, t1 := run(true)
	t.Logf("XLA temp: %d bytes without checkpointing, %d with (%.2fx); losses %.7f / %.7f", t0, t1, float64(t1)/float64(t0), l0, l1)
	for i := range l0 {
		if d := (l1[i] - l0[i]) / l0[i]; d > 1e-6 || d < -1e-6 {
			t.Errorf("step %d: loss %.9f with checkpointing, %.9f without", i+1, l1[i], l0[i])
		}
	}
	if 2*t1 > t0 {
		t.Errorf("XLA temp %d with checkpointing is not under half of %d without: the recomputation was merged or not scheduled late", t1, t0)
	}
}
