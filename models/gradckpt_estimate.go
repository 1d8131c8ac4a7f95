package models

import "github.com/gotpu/gotpu/internal/membudget"

// CheckpointedActivationBytes is ActivationBytes for a training pass with gradient checkpointing
// (HF's gradient_checkpointing): the backward pass rebuilds one decoder layer at a time from its
// input, so what stays live is every layer's input ([batch, seq, hidden] in the compute dtype),
// the rebuilt layer's values and their gradients — counted as two layers of ActivationBytes'
// per-layer figure, as training without checkpointing counts one more layer than the model has —
// the embeddings and the float32 logits and loss. ok is false on overflow.
//
// Measured on gotpu's pure-Go backend (trainer/step BenchmarkGradientCheckpointing, GPT-2 124M,
// batch 4 × 512, float32): the step's transients over the parameters and optimizer state fell from
// 4283 to 2238 MiB with checkpointing; this estimate (2.9 GiB with the gradients) stays above.
func (f Footprint) CheckpointedActivationBytes(batch, seq, computeBytes int64) (int64, bool) {
	var a membudget.Acc
	tokens := a.Mul(batch, seq)
	perToken := a.Add(a.Mul(actHidden, f.Hidden), a.Mul(actPerMLPMatrix, f.MLPMatrices, f.Intermediate),
		a.Mul(actAttention, f.Heads, seq))
	inputs := a.Mul(tokens, f.Hidden, f.Layers, computeBytes)
	layer := a.Mul(tokens, perToken, 2, computeBytes)
	embed := a.Mul(tokens, f.Hidden, computeBytes)
	logits := a.Mul(tokens, f.Vocab, actLogits, 4)
	total := a.Add(inputs, layer, embed, logits, a.Mul(batch, f.Labels, actLogits, 4))
	return total, !a.Overflowed()
}
