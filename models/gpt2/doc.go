// Package gpt2 implements Hugging Face's GPT2LMHeadModel on GoMLX: config (GPT2Config with its
// defaults, unknown fields kept), the explicit HF tensor table (Table), loading and saving, and the
// graph (learned positions, fused c_attn with Conv1D [in, out] weights, gelu_new, pre-LN blocks,
// tied or untied lm_head, HF's shifted causal-LM loss, optional dropout).
//
// New builds a randomly initialised model from a Config (HF's _init_weights: N(0, 0.02), c_proj
// weights N(0, 0.02/sqrt(2*n_layer)), zero biases, unit LayerNorms), e.g. the benchmark shape:
//
//	cfg := gpt2.DefaultConfig()
//	cfg.VocabSize, cfg.NEmbd, cfg.NLayer, cfg.NHead, cfg.NPositions = 8192, 256, 4, 4, 128
//	m, err := gpt2.New(ctx, rt, cfg, gpt2.NewOptions{Seed: 1})
//
// Weights are saved with the "transformer." prefix (save_pretrained's naming); the hub's
// unprefixed naming and old attn.bias mask buffers are accepted on load. Errors name the file and
// tensor or field; graph building panics, and the exported functions recover. No package state.
package gpt2
