package step

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/peft"
	"github.com/gotpu/gotpu/xla"
)

// ckptRun trains a fresh copy of fixture (with the LoRA adapter loraDir when not empty) for steps
// steps from seed with cfg and returns the losses, gradient norms and the trained state.
func ckptRun(t *testing.T, rt *xla.Runtime, fixture, loraDir string, dropout float64, cfg Config, micro [][]*data.Batch, steps int) ([]float64, []float64, State) {
	t.Helper()
	ctx := context.Background()
	m, err := models.Load(ctx, rt, fixtureDir(fixture), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dropout > 0 {
		c := m.(*gpt2.Model).Cfg
		c.AttnPdrop, c.ResidPdrop, c.EmbdPdrop = dropout, dropout, dropout
	}
	switch loraDir {
	case "":
	case "new": // a fresh all-linear adapter with PEFT's dropout on its input
		lc := peft.DefaultLoraConfig()
		lc.R, lc.LoraDropout = 4, 0.1
		lc.TargetModules, lc.TargetModulesRegex = peft.CommandLineTargets([]string{"all-linear"})
		if m, err = peft.New(ctx, rt, m, lc, peft.Options{Seed: 5}); err != nil {
			t.Fatal(err)
		}
	default:
		if m, err = peft.Load(ctx, rt, m, fixtureDir(loraDir), peft.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Context().SetRNGStateFromSeed(7); err != nil {
		t.Fatal(err)
	}
	s, err := New(rt, m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var losses, norms []float64
	for range steps {
		res, err := s.Step(ctx, micro, 1e-2)
		if err != nil {
			t.Fatal(err)
		}
		losses, norms = append(losses, res.Loss), append(norms, res.GradNorm)
	}
	st, err := s.ExportState(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return losses, norms, st
}

// statesEqual reports the first tensor (parameter, optimizer state or RNG) whose bytes differ.
func statesEqual(a, b State) string {
	for _, set := range [][2][]HostTensor{{a.Params, b.Params}, {a.Optimizer, b.Optimizer}, {a.Other, b.Other}} {
		if len(set[0]) != len(set[1]) {
			return "tensor counts differ"
		}
		for i := range set[0] {
			if set[0][i].Name != set[1][i].Name || !bytes.Equal(set[0][i].Bytes, set[1][i].Bytes) {
				return set[0][i].Name
			}
		}
	}
	return ""
}

// gradient_checkpointing recomputes every decoder layer in the backward pass and changes nothing
// else: on every architecture (GPT-2 also with dropout 0.1 everywhere, so the recomputed layers must draw the
// forward pass's bits; Llama, Qwen3, Gemma3, BERT), with a LoRA adapter (and one with PEFT's
// lora_dropout), under bf16 mixed
// precision, with gradient accumulation and on 2 replicas, three AdamW steps give bitwise the
// losses, gradient norms, parameters, optimizer state and RNG state of the run without it.
func TestGradientCheckpointingBitwise(t *testing.T) {
	rt := openGoDevices(t, xla.GoBackendGotpu, 2)
	type tc struct {
		name, fixture, lora string
		dropout             float64
		cfg                 Config
		replicas, accum     int
	}
	base := Config{Optimizer: fixtureOptimizer(true), NumReplicas: 1}
	bf16 := base
	bf16.BF16 = true
	two := base
	two.NumReplicas = 2
	cases := []tc{
		{name: "gpt2", fixture: "gpt2-tiny", cfg: base},
		{name: "gpt2-dropout", fixture: "gpt2-tiny", dropout: 0.1, cfg: base},
		{name: "llama", fixture: "llama-tiny", cfg: base},
		{name: "qwen3", fixture: "qwen3-tiny", cfg: base},
		{name: "gemma3", fixture: "gemma3-tiny", cfg: base},
		{name: "bert", fixture: "bert-tiny", cfg: base},
		{name: "gpt2-lora", fixture: "gpt2-tiny", lora: "lora/gpt2-lora-tiny", cfg: base},
		{name: "llama-lora-dropout", fixture: "llama-tiny", lora: "new", cfg: base},
		{name: "llama-bf16", fixture: "llama-tiny", cfg: bf16},
		{name: "gpt2-accum2-replicas2", fixture: "gpt2-tiny", cfg: two, replicas: 2, accum: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ref, _ := readReference(t, c.fixture)
			b := ref.hostBatch(t, c.fixture != "bert-tiny")
			micro := fixtureMicro(b, 1)
			if c.replicas > 1 {
				micro = nil
				for range c.accum {
					micro = append(micro, fixtureMicro(b, c.replicas)[0])
				}
			}
			on := c.cfg
			on.GradientCheckpointing = true
			l0, n0, s0 := ckptRun(t, rt, c.fixture, c.lora, c.dropout, c.cfg, micro, 3)
			l1, n1, s1 := ckptRun(t, rt, c.fixture, c.lora, c.dropout, on, micro, 3)
			for i := range l0 {
				if l0[i] != l1[i] || n0[i] != n1[i] {
					t.Errorf("step %d: loss %.9g grad_norm %.9g without, %.9g %.9g with checkpointing", i+1, l0[i], n0[i], l1[i], n1[i])
				}
			}
			if name := statesEqual(s0, s1); name != "" {
				t.Errorf("%s differs with checkpointing", name)
			}
			t.Logf("losses %.6f (equal with and without), %d parameters bitwise equal", l0, len(s0.Params))
		})
	}
}

// The checkpointed gradient program really recomputes: traced for the Llama fixture, it has
// exactly one more forward pass of every decoder layer than the program without checkpointing —
// as many more matrix products as the evaluation program has in its layers (all of its products
// but the head's) — and the head is not recomputed.
func TestGradientCheckpointingRecomputesLayers(t *testing.T) {
	rt := openGo(t)
	ctx := context.Background()
	count := func(p Program, ckpt bool) int {
		s := newFixtureStepper(t, rt, "llama-tiny", Config{Optimizer: fixtureOptimizer(true), NumReplicas: 1, GradientCheckpointing: ckpt})
		text, err := s.StableHLO(ctx, p, BatchShape{Size: 2, SeqLen: 8})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Count(text, "stablehlo.dot_general")
	}
	off, on := count(ProgramGradient, false), count(ProgramGradient, true)
	forward := count(ProgramEval, false) - 1 // the head's product is the one outside the layers
	if evalOn := count(ProgramEval, true); evalOn != forward+1 {
		t.Errorf("evaluation changed with checkpointing: %d products, %d without", evalOn, forward+1)
	}
	if on != off+forward {
		t.Errorf("dot_general: %d with checkpointing, %d without; want %d (the layers' %d forward products once more)", on, off, off+forward, forward)
	}
	t.Logf("dot_general in the gradient program: %d without checkpointing, %d with (+%d: the layers' forward products)", off, on, on-off)
}
