package models

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"

	"github.com/gotpu/gotpu/models/bert"
	"github.com/gotpu/gotpu/models/gemma3"
	"github.com/gotpu/gotpu/models/gpt2"
	"github.com/gotpu/gotpu/models/internal/core"
	"github.com/gotpu/gotpu/models/llama"
	"github.com/gotpu/gotpu/models/qwen3"
	"github.com/gotpu/gotpu/xla"
)

// NewShapeOnly builds cfg's model with variables that have shapes and a dtype (opts.DType: ""
// or "float32", "bfloat16", "float16") but no values: its programs can be traced
// (xla.StableHLOContext, step.Stepper.FSDPStableHLO) and compiled without running, so the
// compiler's memory figures of a model far larger than the host's memory can be read. Nothing
// is allocated; running a program of it is an error. The model records no runtime (pass rt to
// whatever takes one); rt's backend is what it is traced for. rt may be nil for a model whose
// layers only are read (Params, LinearLayers: what a LoRA adapter's size needs), never traced.
func NewShapeOnly(rt *xla.Runtime, cfg Config, opts NewOptions) (Model, error) {
	var be backends.Backend
	if rt != nil {
		be = rt.Backend()
	}
	switch c := cfg.(type) {
	case *gpt2.Config:
		b, err := core.NewShapeOnlyBase(c, gpt2.Table(c), be, opts.DType)
		if err != nil {
			return nil, err
		}
		return &gpt2.Model{Base: b, Cfg: c}, nil
	case *llama.Config:
		b, err := core.NewShapeOnlyBase(c, llama.Table(c), be, opts.DType)
		if err != nil {
			return nil, err
		}
		return &llama.Model{Base: b, Cfg: c}, nil
	case *bert.Config:
		b, err := core.NewShapeOnlyBase(c, bert.Table(c), be, opts.DType)
		if err != nil {
			return nil, err
		}
		return &bert.Model{Base: b, Cfg: c}, nil
	case *qwen3.Config:
		b, err := core.NewShapeOnlyBase(c, qwen3.Table(c), be, opts.DType)
		if err != nil {
			return nil, err
		}
		return &qwen3.Model{Base: b, Cfg: c}, nil
	case *gemma3.Config:
		b, err := core.NewShapeOnlyBase(c, gemma3.Table(c), be, opts.DType)
		if err != nil {
			return nil, err
		}
		return &gemma3.Model{Base: b, Cfg: c}, nil
	}
	return nil, fmt.Errorf("models.NewShapeOnly: %w: config type %T", ErrUnsupported, cfg)
}
