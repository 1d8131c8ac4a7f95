package peft

import (
	"fmt"
	"strings"

	"github.com/gotpu/gotpu/internal/membudget"
	"github.com/gotpu/gotpu/models"
)

// Allowances of MaxWeightsBytes beside the tensors' elements.
const (
	// maxElementBytes is the widest dtype counted: F64. gotpu reads F32, BF16 and F16 adapters
	// and refuses others with an error naming the tensor's dtype, which says more than a size
	// limit would; the bound lets such a file through to get that error.
	maxElementBytes = 8
	// weightsHeaderSlack and weightsHeaderPerTensor bound the safetensors header: its JSON
	// (a name, dtype, shape and offsets of about 150 bytes per tensor, PEFT's {"format": "pt"}
	// metadata) and its alignment padding. The per-tensor share keeps a config of thousands of
	// layers within its bound; the rest is room for metadata.
	weightsHeaderSlack     = 1 << 20
	weightsHeaderPerTensor = 512
)

// MaxElements is the most elements a LoRA adapter of lc may have on a model of base, from the two
// configs alone: r·(in+out) (lora_A [r, in] plus lora_B [out, r]) for every weight matrix of
// base that lc's target_modules (and exclude_modules) select. It is what an adapter's download is
// bounded by (MaxWeightsBytes) and what a memory budget counts for its gradients and optimizer
// state, before the base is built.
//
// The matrices are chosen as Targets chooses linear layers, among every two-dimensional
// "<module>.weight" of models.ParamShapes(base): a superset of the linear layers (the embeddings
// are among them), so that the bound is never below the adapter Targets and Load would build,
// and an entry matching no module at all is the same error Targets gives. rank_pattern,
// alpha_pattern and modules_to_save, which would add per-module ranks or whole copies of modules,
// are refused by Validate, so r is every module's rank. An invalid config (Validate), a selection
// Targets refuses, or a base config models.ParamShapes does not support is an error.
func MaxElements(base models.Config, lc LoraConfig) (int64, error) {
	n, _, err := selectedSize(base, lc)
	return n, err
}

// MaxWeightsBytes is the largest adapter_model.safetensors an adapter of lc may have on a model
// of base: MaxElements at 8 bytes each (F64, the widest dtype), plus room for the safetensors
// header (1 MiB, and 512 bytes a tensor). ResolveAdapter refuses to download a larger one: an
// adapter_config.json is published by anyone, and without a bound a config implying kilobytes
// of tensors could come with gigabytes of weights, written to disk before loading finds they do
// not fit. The bound is generous (real adapters are F32 or BF16, at half or a quarter of it), so
// that no adapter Load accepts is refused by it.
func MaxWeightsBytes(base models.Config, lc LoraConfig) (int64, error) {
	n, matrices, err := selectedSize(base, lc)
	if err != nil {
		return 0, err
	}
	var a membudget.Acc
	limit := a.Add(a.Mul(n, maxElementBytes), weightsHeaderSlack, a.Mul(2, matrices, weightsHeaderPerTensor)) // lora_A and lora_B
	if a.Overflowed() {
		return 0, fmt.Errorf("peft.MaxWeightsBytes: %d elements at %d bytes each overflow int64: %w", n, maxElementBytes, models.ErrTooLarge)
	}
	return limit, nil
}

// selectedSize is MaxElements and the number of matrices it counts.
func selectedSize(base models.Config, lc LoraConfig) (elements, matrices int64, err error) {
	if base == nil {
		return 0, 0, fmt.Errorf("peft.MaxElements: no base model config: an adapter is bounded by the base it attaches to")
	}
	if err := lc.Validate(); err != nil {
		return 0, 0, err
	}
	params, err := models.ParamShapes(base)
	if err != nil {
		return 0, 0, err
	}
	var matricesOf []models.LinearLayer
	for _, p := range params {
		if module, ok := strings.CutSuffix(p.Name, ".weight"); ok && len(p.Shape) == 2 {
			matricesOf = append(matricesOf, models.LinearLayer{Module: module, Out: p.Shape[0], In: p.Shape[1]})
		}
	}
	space := layerSpace{arch: base.Architecture(), modelType: base.ModelType(), layers: matricesOf,
		params: func() []models.Param { return params }, one: "weight matrix", many: "weight matrices"}
	chosen, err := selectTargets(space, lc)
	if err != nil {
		return 0, 0, err
	}
	var a membudget.Acc
	for _, l := range chosen {
		elements = a.Add(elements, a.Mul(int64(lc.R), int64(l.In)+int64(l.Out)))
	}
	if a.Overflowed() {
		return 0, 0, fmt.Errorf("peft.MaxElements: LoraConfig.r: %d on %s: the adapter's elements overflow int64: %w", lc.R, base.Architecture(), models.ErrTooLarge)
	}
	return elements, int64(len(chosen)), nil
}
