package models

import (
	"fmt"

	"github.com/gotpu/gotpu/models/bert"
	"github.com/gotpu/gotpu/models/gemma3"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/llama"
	"github.com/gotpu/gotpu/models/qwen3"
)

// ParamShapes lists the parameters a model built from cfg has, from the config alone: nothing is
// built or allocated but the list itself. Names, shapes, order and weight-decay groups are
// exactly the built model's Params() (the same per-family table: HF's state-dict order, HF's
// tensor names), so a tied head (GPT-2's lm_head, a tied Llama or Gemma head) is absent and
// counted once, through the embedding it shares. The element counts sum to
// EstimateFootprint(cfg).Params.
//
// The dimensions are checked first (EstimateFootprint: positive, within MaxWidth, MaxLayers…,
// products within int64), so an absurd config is an error naming its config.json field before
// anything per layer is allocated; the list then holds about a dozen entries per layer (at most
// MaxLayers layers). It supports what EstimateFootprint supports (GPT-2, Llama/Mistral/Qwen2,
// BERT, Qwen3, Gemma 3 text); other configs are errors wrapping ErrUnsupported.
//
// Memory planners use it to lay out each tensor (internal/shard.Choose) without building the
// model: `gotpu plan`, trainer.PlanFSDP.
func ParamShapes(cfg Config) ([]Param, error) {
	if _, err := EstimateFootprint(cfg); err != nil {
		return nil, fmt.Errorf("models.ParamShapes: %w", err)
	}
	switch c := cfg.(type) {
	case *gpt2.Config:
		return gpt2.Table(c), nil
	case *llama.Config:
		return llama.Table(c), nil
	case *bert.Config:
		return bert.Table(c), nil
	case *gemma3.Config:
		return gemma3.Table(c), nil
	case *qwen3.Config:
		return qwen3.Table(c), nil
	}
	// EstimateFootprint refuses every other type; this keeps the two lists honest.
	return nil, fmt.Errorf("models.ParamShapes: %w: config type %T", ErrUnsupported, cfg)
}
