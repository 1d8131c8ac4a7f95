package models

import (
	"fmt"

	"github.com/gotpu/gotpu/internal/membudget"
	"github.com/gotpu/gotpu/models/gpt2"
)

// weightsSlack is what a model's weight files may hold besides its tensors' bytes: the
// safetensors headers (JSON: kilobytes a file), and a tiny model's extra tensors.
const weightsSlack = 16 << 20

// MaxWeightsBytes is the most a model's weight files (model.safetensors, or all the shards an
// index lists) may add up to, from its config alone; ResolvePretrained refuses to download more.
// A repo's config.json and its weights come from whoever published them: without a bound, a
// config implying kilobytes of parameters can come with gigabytes of weights, written to disk
// before loading finds that they do not fit the config.
//
// The bound is generous, so that no published checkpoint Load reads is refused:
//   - every parameter at 8 bytes (F64, the widest dtype Load reads). Real checkpoints are F32 or
//     BF16, so a repo may carry 2 to 4 times its parameters' bytes again in tensors loading
//     skips: a multimodal Gemma 3's vision tower, a duplicated tied head, BERT's pre-training
//     heads;
//   - GPT-2's causal-mask buffers (h.N.attn.bias, n_positions² per layer), which its original
//     checkpoints store and Load ignores (openai-community/gpt2's 548 MB file holds 50 MB of
//     them), also at 8 bytes an element but no more than the parameters' allowance: the buffers
//     grow with n_positions squared, which the parameter count (and so the memory checks made
//     from it) hardly sees, and a config of n_positions 32768 would otherwise allow 8 GiB of
//     weights a layer;
//   - weightsSlack.
//
// The bound is therefore at most 16 bytes a parameter plus weightsSlack. An error never means
// "no bound": a config of an architecture Load does not build is ErrUnsupported
// (EstimateFootprint's error), since Load would refuse it after the download anyway.
func MaxWeightsBytes(cfg Config) (int64, error) {
	fp, err := EstimateFootprint(cfg)
	if err != nil {
		return 0, err
	}
	var a membudget.Acc
	params := a.Mul(fp.Params, 8)
	if c, ok := cfg.(*gpt2.Config); ok {
		var m membudget.Acc
		masks := m.Mul(int64(c.NLayer), int64(c.NPositions), int64(c.NPositions), 8)
		if m.Overflowed() || masks > params {
			masks = params
		}
		params = a.Add(params, masks)
	}
	limit := a.Add(params, weightsSlack)
	if a.Overflowed() { // EstimateFootprint keeps 16 bytes a parameter within int64
		return 0, fmt.Errorf("models.MaxWeightsBytes: %w: %d parameters at 16 bytes each overflow int64", ErrTooLarge, fp.Params)
	}
	return limit, nil
}
