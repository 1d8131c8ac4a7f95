package peft_test

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/llama"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/xla"
)

func tinyLlama(t *testing.T, rt *xla.Runtime, layers int) models.Model {
	t.Helper()
	c := llama.DefaultConfig(llama.TypeLlama)
	c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumHiddenLayers, c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim =
		64, 16, 32, layers, 2, 1, 8
	c.MaxPositionEmbeddings = 32
	c.LayerWindows = make([]int, layers)
	m, err := models.New(context.Background(), rt, c, models.NewOptions{Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func targetNames(t *testing.T, m models.Model, cfg peft.LoraConfig) ([]string, error) {
	t.Helper()
	ls, err := peft.Targets(m.(models.Adaptable), cfg)
	var names []string
	for _, l := range ls {
		names = append(names, l.Module)
	}
	return names, err
}

// TestTargets: PEFT's matching rules (list entries match a name or a dot-separated suffix, a
// string must match the whole name, exclude_modules first, per-architecture defaults,
// "all-linear") and the errors for entries that match nothing or a non-linear module.
func TestTargets(t *testing.T) {
	rt := openGo(t)
	m := tinyLlama(t, rt, 2)
	cfg := peft.DefaultLoraConfig()
	check := func(what string, want ...string) {
		t.Helper()
		got, err := targetNames(t, m, cfg)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: targets %v, want %v", what, got, want)
		}
	}
	check("default (q_proj, v_proj)", "model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.v_proj", "model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.v_proj")
	cfg.TargetModules = []string{"layers.1.mlp.down_proj", "o_proj"}
	check("suffixes", "model.layers.0.self_attn.o_proj", "model.layers.1.self_attn.o_proj", "model.layers.1.mlp.down_proj")
	cfg.TargetModules, cfg.TargetModulesRegex = nil, `.*\.1\..*_proj`
	all1 := []string{"model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.k_proj", "model.layers.1.self_attn.v_proj", "model.layers.1.self_attn.o_proj",
		"model.layers.1.mlp.gate_proj", "model.layers.1.mlp.up_proj", "model.layers.1.mlp.down_proj"}
	check("regex", all1...)
	cfg.TargetModulesRegex = `q_proj` // re.fullmatch: a bare suffix matches nothing
	if _, err := targetNames(t, m, cfg); err == nil || !strings.Contains(err.Error(), "selects no linear layer") {
		t.Errorf("regex matching no whole name: %v", err)
	}
	cfg.TargetModulesRegex = ""
	cfg.TargetModulesRegex, cfg.ExcludeModules = "all-linear", []string{"layers.0.self_attn.q_proj", "mlp.up_proj"}
	got, err := targetNames(t, m, cfg)
	if err != nil || len(got) != 14-1-2 || slices.Contains(got, "lm_head") {
		t.Errorf("all-linear minus 3 excluded: %v %v", got, err)
	}
	for _, c := range []struct {
		targets []string
		want    string
	}{
		{[]string{"q_proj", "qq_proj"}, `"qq_proj" matches no module of LlamaForCausalLM`},
		{[]string{"embed_tokens"}, `"embed_tokens" is not a linear layer`},
		{[]string{"input_layernorm"}, `"input_layernorm" is not a linear layer`},
		{[]string{"q_proj", "all-linear"}, `as a list entry names a module called "all-linear"`},
		{[]string{"all-linear"}, `as a list entry names a module called "all-linear"`},
	} {
		cfg := peft.DefaultLoraConfig()
		cfg.TargetModules = c.targets
		if _, err := targetNames(t, m, cfg); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "target_modules") {
			t.Errorf("%v: error %v, want one containing %q", c.targets, err, c.want)
		}
	}
}

// TestAllLinearSaved: "all-linear" is saved expanded, as PEFT saves it: the full names below 20
// modules, the shortest distinguishing suffixes from 20 on (3 Llama layers: 21 modules).
func TestAllLinearSaved(t *testing.T) {
	rt := openGo(t)
	ctx := context.Background()
	for _, c := range []struct {
		layers int
		want   []string
	}{
		{2, nil},
		{3, []string{"down_proj", "gate_proj", "k_proj", "o_proj", "q_proj", "up_proj", "v_proj"}},
	} {
		cfg := peft.DefaultLoraConfig()
		cfg.TargetModulesRegex = peft.AllLinear
		m, err := peft.New(ctx, rt, tinyLlama(t, rt, c.layers), cfg, peft.Options{})
		if err != nil {
			t.Fatal(err)
		}
		ad, _ := peft.Of(m)
		saved := ad.LoraConfig().TargetModules
		if c.want == nil {
			if len(saved) != 7*c.layers || !strings.HasPrefix(saved[0], "model.layers.") {
				t.Errorf("%d layers: saved %v, want the %d full names", c.layers, saved, 7*c.layers)
			}
			continue
		}
		got := slices.Clone(saved)
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%d layers: saved %v, want %v", c.layers, got, c.want)
		}
	}
}

// TestDefaultInitIsNoop: init_lora_weights=true (PEFT's default) leaves the logits bitwise the
// base model's (B = 0), its A rows within ±1/sqrt(in); lora_dropout changes training-mode logits
// only through the branch, and evaluation ignores it.
func TestDefaultInitIsNoop(t *testing.T) {
	rt := openGo(t)
	ctx := context.Background()
	ref := readRef(t, "llama-lora-tiny")
	in := ids(ref)
	base, err := models.Load(ctx, rt, filepath.Join(modelsDir(t), "llama-tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before, err := core.Run(rt.Backend(), base, core.Inputs{InputIDs: in}, false)
	if err != nil {
		t.Fatal(err)
	}
	cfg := peft.DefaultLoraConfig()
	cfg.LoraDropout = 0.5
	m, err := peft.New(ctx, rt, base, cfg, peft.Options{Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	after, err := core.Run(rt.Backend(), m, core.Inputs{InputIDs: in}, false)
	if err != nil {
		t.Fatal(err)
	}
	x, y := tensors.MustCopyFlatData[float32](before.Logits), tensors.MustCopyFlatData[float32](after.Logits)
	if !slices.Equal(x, y) {
		t.Error("a default-initialised adapter changes the logits")
	}
	dir := t.TempDir()
	if err := m.Save(dir, models.SaveOptions{}); err != nil {
		t.Fatal(err)
	}
	got := readAdapterFile(t, filepath.Join(dir, peft.WeightsFile))
	for name, v := range got {
		switch {
		case strings.HasSuffix(name, "lora_B.weight"):
			for _, e := range v {
				if e != 0 {
					t.Fatalf("%s is not zero", name)
				}
			}
		case strings.HasSuffix(name, "lora_A.weight"):
			bound := float32(1 / math.Sqrt(64))
			for _, e := range v {
				if e < -bound || e > bound {
					t.Fatalf("%s: %v outside ±%v", name, e, bound)
				}
			}
		}
	}
	if len(got) != 8 {
		t.Errorf("%d adapter tensors, want 8 (q_proj and v_proj of 2 layers, A and B)", len(got))
	}
	saved, err := peft.ReadConfig(filepath.Join(dir, peft.ConfigFile))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(saved.TargetModules, []string{"q_proj", "v_proj"}) {
		t.Errorf("saved target_modules %v, want the default PEFT used, [q_proj v_proj]", saved.TargetModules)
	}
}

// TestDropoutOnBranchOnly: with a non-zero adapter, lora_dropout makes training-mode logits
// differ from the undropped ones, while evaluation (no dropout) equals a dropout-0 adapter.
func TestDropoutOnBranchOnly(t *testing.T) {
	rt := openGo(t)
	ctx := context.Background()
	ref := readRef(t, "llama-lora-tiny")
	in := ids(ref)
	run := func(dropout float64, training bool) []float32 {
		base, err := models.Load(ctx, rt, filepath.Join(modelsDir(t), "llama-tiny"), models.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cfg := peft.DefaultLoraConfig()
		cfg.R, cfg.LoraDropout, cfg.InitLoraWeights = 4, dropout, false
		m, err := peft.New(ctx, rt, base, cfg, peft.Options{Seed: 9})
		if err != nil {
			t.Fatal(err)
		}
		res, err := core.Run(rt.Backend(), m, core.Inputs{InputIDs: in, Training: training}, false)
		if err != nil {
			t.Fatal(err)
		}
		return tensors.MustCopyFlatData[float32](res.Logits)
	}
	if !slices.Equal(run(0.5, false), run(0, false)) {
		t.Error("lora_dropout changes evaluation-mode logits")
	}
	if slices.Equal(run(0.5, true), run(0, true)) {
		t.Error("lora_dropout 0.5 leaves training-mode logits unchanged (the llama-tiny config has no other dropout)")
	}
}

// TestBF16Base: the base stored in bfloat16 (--torch_dtype bfloat16) with a float32 adapter: the
// adapter's variables stay float32, gradients reach them, and the loss is the float32 model's
// within bf16 rounding.
func TestBF16Base(t *testing.T) {
	rt := openGo(t)
	ctx := context.Background()
	ref := readRef(t, "llama-lora-tiny")
	in := ids(ref)
	base, err := models.Load(ctx, rt, filepath.Join(modelsDir(t), "llama-tiny"), models.LoadOptions{DType: "bfloat16"})
	if err != nil {
		t.Fatal(err)
	}
	m, err := peft.Load(ctx, rt, base, filepath.Join(modelsDir(t), "lora", "llama-lora-tiny"), peft.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range m.Params() {
		v := m.Context().GetVariableByScopeAndName(p.Scope(), p.Var())
		if v.Shape().DType.String() != "Float32" {
			t.Errorf("%s is %s, want float32", p.Name, v.Shape().DType)
		}
	}
	res, err := core.Run(rt.Backend(), m, core.Inputs{InputIDs: in, Labels: in}, true)
	if err != nil {
		t.Fatal(err)
	}
	loss := float64(tensors.ToScalar[float32](res.Loss))
	t.Logf("bf16 base + f32 adapter: loss %.6f, float64 reference %.6f", loss, ref.Loss)
	if math.Abs(loss-ref.Loss) > 0.05 {
		t.Errorf("loss %v, reference %v: beyond bf16 rounding", loss, ref.Loss)
	}
	for name, g := range res.Grads {
		var s float64
		for _, v := range tensors.MustCopyFlatData[float32](g) {
			s += float64(v) * float64(v)
		}
		if want := ref.GradNorm[name]; math.Abs(math.Sqrt(s)-want) > 0.05*want {
			t.Errorf("%s: grad norm %v, reference %v (5%%)", name, math.Sqrt(s), want)
		}
	}
}
