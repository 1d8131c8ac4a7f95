package peft_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/internal/safetensors"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/xla"
)

// The LoRA fixtures (testdata/models/lora, made by testdata/models/reference/lora from PEFT's
// semantics in plain PyTorch, float64): tolerances are the fixtures' README's.
const (
	logitsTol = 1e-5
	lossTol   = 1e-5
	gradRel   = 1e-4
)

type loraFixture struct {
	name, base string
	// fileName maps an in-model base weight name to the base fixture file's (GPT-2's hub names).
	fileName func(string) string
}

var loraFixtures = []loraFixture{
	{"gpt2-lora-tiny", "gpt2-tiny", func(s string) string { return trimPrefix(s, "transformer.") }},
	{"llama-lora-tiny", "llama-tiny", func(s string) string { return s }},
}

func trimPrefix(s, p string) string {
	if len(s) >= len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

func modelsDir(t testing.TB) string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "testdata", "models")
}

func openGo(t testing.TB) *xla.Runtime {
	t.Helper()
	rt, err := xla.Open(context.Background(), xla.Config{Device: "go"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// loraRef is the part of a LoRA fixture's reference.json these tests use.
type loraRef struct {
	InputIDs [][]int `json:"input_ids"`
	Logits   struct {
		Values [][][]float64 `json:"values"`
	} `json:"logits"`
	Loss          float64            `json:"loss"`
	BaseLoss      float64            `json:"base_loss"`
	GradNorm      map[string]float64 `json:"grad_norm"`
	MergedInitial merged             `json:"merged_initial"`
	AdamW         adamw              `json:"adamw"`
	AdamWClip1    adamw              `json:"adamw_clip1"`
}

type merged struct {
	Tensors map[string]checksums `json:"tensors"`
}

type checksums struct {
	Sum, AbsSum, SqSum, WeightedSum float64
}

func (c *checksums) UnmarshalJSON(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	f := func(k string) float64 { v, _ := m[k].(float64); return v }
	*c = checksums{f("sum"), f("abs_sum"), f("sq_sum"), f("weighted_sum")}
	return nil
}

type adamw struct {
	Losses       []float64 `json:"losses"`
	LossAfter    float64   `json:"loss_after"`
	AdapterAfter struct {
		Values map[string]json.RawMessage `json:"values"`
	} `json:"adapter_after"`
	MergedAfter merged `json:"merged_after"`
}

func readRef(t testing.TB, name string) *loraRef {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(modelsDir(t), "lora", name, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r loraRef
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

func ids(r *loraRef) *tensors.Tensor {
	B, T := len(r.InputIDs), len(r.InputIDs[0])
	flat := make([]int32, 0, B*T)
	for _, row := range r.InputIDs {
		for _, v := range row {
			flat = append(flat, int32(v))
		}
	}
	return tensors.FromFlatDataAndDimensions(flat, B, T)
}

func loadAdapted(t testing.TB, rt *xla.Runtime, f loraFixture) models.Model {
	t.Helper()
	ctx := context.Background()
	base, err := models.Load(ctx, rt, filepath.Join(modelsDir(t), f.base), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := peft.Load(ctx, rt, base, filepath.Join(modelsDir(t), "lora", f.name), peft.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestFixtureForward(t *testing.T) {
	rt := openGo(t)
	for _, f := range loraFixtures {
		t.Run(f.name, func(t *testing.T) {
			ref := readRef(t, f.name)
			m := loadAdapted(t, rt, f)
			in := ids(ref)
			res, err := core.Run(rt.Backend(), m, core.Inputs{InputIDs: in, Labels: in}, true)
			if err != nil {
				t.Fatal(err)
			}
			loss := float64(tensors.ToScalar[float32](res.Loss))
			if d := math.Abs(loss - ref.Loss); d > lossTol {
				t.Errorf("loss %.9f, reference %.9f (|d| %.2g); base alone %.9f", loss, ref.Loss, d, ref.BaseLoss)
			}
			got := res.Logits.Value().([][][]float32)
			worst := 0.0
			for b := range ref.Logits.Values {
				for i := range ref.Logits.Values[b] {
					for j, want := range ref.Logits.Values[b][i] {
						worst = max(worst, math.Abs(float64(got[b][i][j])-want))
					}
				}
			}
			if worst > logitsTol {
				t.Errorf("logits max |d| %.3g > %g", worst, logitsTol)
			}
			if len(res.Grads) != len(ref.GradNorm) {
				t.Fatalf("%d adapter gradients, reference has %d", len(res.Grads), len(ref.GradNorm))
			}
			for name, want := range ref.GradNorm {
				g, ok := res.Grads[name]
				if !ok {
					t.Fatalf("no gradient for %s (params: %v)", name, m.Params())
				}
				var s float64
				for _, v := range tensors.MustCopyFlatData[float32](g) {
					s += float64(v) * float64(v)
				}
				if d := math.Abs(math.Sqrt(s)-want) / want; d > gradRel {
					t.Errorf("grad norm %s %.9g, reference %.9g (rel %.2g)", name, math.Sqrt(s), want, d)
				}
			}
			t.Logf("loss %.9f (ref %.9f), logits max |d| %.2g", loss, ref.Loss, worst)
		})
	}
}

// TestFixtureMerge folds the starting adapter into the base weights and checks every tensor's
// checksums against merged_initial, after a save and a plain load (the merged model is an
// ordinary HF model).
func TestFixtureMerge(t *testing.T) {
	rt := openGo(t)
	ctx := context.Background()
	for _, f := range loraFixtures {
		t.Run(f.name, func(t *testing.T) {
			ref := readRef(t, f.name)
			m := loadAdapted(t, rt, f)
			base, err := peft.Merge(ctx, m)
			if err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			if err := base.Save(out, models.SaveOptions{}); err != nil {
				t.Fatal(err)
			}
			checkMerged(t, filepath.Join(out, "model.safetensors"), ref.MergedInitial, f)
			reloaded, err := models.Load(ctx, rt, out, models.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			in := ids(ref)
			res, err := core.Run(rt.Backend(), reloaded, core.Inputs{InputIDs: in, Labels: in}, false)
			if err != nil {
				t.Fatal(err)
			}
			if loss := float64(tensors.ToScalar[float32](res.Loss)); math.Abs(loss-ref.Loss) > lossTol {
				t.Errorf("merged model's loss %.9f, reference %.9f", loss, ref.Loss)
			}
		})
	}
}

// checkMerged compares a saved model's tensors with a fixture's merged checksums: abs_sum and
// sq_sum 1e-5 relative, sum and weighted_sum 1e-4 absolute (they can be near 0).
func checkMerged(t *testing.T, path string, want merged, f loraFixture) {
	t.Helper()
	sf, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer sf.Close()
	seen := 0
	for _, name := range sf.Names() {
		w, ok := want.Tensors[f.fileName(name)]
		if !ok {
			t.Errorf("%s: tensor %s is not in the reference's merged model", path, name)
			continue
		}
		seen++
		info, _ := sf.Info(name)
		raw, _ := sf.Bytes(name)
		v := make([]float32, info.NumElements())
		if err := safetensors.DecodeFloat32(info.DType, raw, v); err != nil {
			t.Fatal(err)
		}
		var got checksums
		for i, x := range v {
			x := float64(x)
			got.Sum += x
			got.AbsSum += math.Abs(x)
			got.SqSum += x * x
			got.WeightedSum += x * (float64(i%13) - 6) / 6
		}
		rel := func(a, b float64) float64 { return math.Abs(a-b) / max(math.Abs(b), 1e-30) }
		if rel(got.AbsSum, w.AbsSum) > 1e-5 || rel(got.SqSum, w.SqSum) > 1e-5 || math.Abs(got.Sum-w.Sum) > 1e-4 || math.Abs(got.WeightedSum-w.WeightedSum) > 1e-4 {
			t.Errorf("%s: checksums %+v, reference %+v", name, got, w)
		}
	}
	if seen != len(want.Tensors) {
		t.Errorf("%s: %d tensors, the reference's merged model has %d", path, seen, len(want.Tensors))
	}
}

// readAdapterFile reads every tensor of an adapter_model.safetensors as float32.
func readAdapterFile(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	v, _, err := safetensors.ReadFloat32File(path)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
