package trainer

import (
	"github.com/gotpu/gotpu/internal/membudget"
	"github.com/gotpu/gotpu/models"
)

// The step's transients as XLA compiles them (the compiled program's temp buffers), per device:
// a model fitted to XLA's compiled memory figures of gotpu's train step on 8 XLA CPU devices, for
// Llama-3.1-8B's widths and vocabulary cut to 1, 2 and 4 layers (BenchmarkPlanFitLlama8BCuts
// measures them (`make plan-fit`); testdata/plan/fit/llama3.1-8b-cuts.json records them;
// TestPlanMatchesRecordedCompilerFigures checks this model against the record; docs/memory-plan.md
// has the table). What the compiled programs show:
//
//   - no input is aliased to an output (GoMLX v0.26 writes no aliasing): the updated parameters
//     and optimizer state are new buffers beside the old ones (PlanBytes.Updated, counted
//     exactly, not fitted);
//   - gradients are reduce-scattered as they are produced: no FSDP step holds the whole model's
//     gradient (the temp figures grow by about one layer's weights per layer, not by two);
//   - without checkpointing each decoder layer adds about its gathered weights as one float32
//     copy (the CPU plugin computes bf16 products in float32: a float32 and a bf16 base cost the
//     same) and its activations (layerTok 5.1 full, 10.2 LoRA);
//   - with checkpointing and full training a layer adds no activations, but about half of a
//     float32 copy of its weights (0.46; 0.64 with a bf16 base) stays per layer;
//   - with checkpointing and LoRA on a bf16 base a layer keeps about a ninth of its activations
//     (layerTok 1.1 against 10.2 without; TRL's lora_dropout 0.05 is on: its random bits are
//     drawn per layer as the layer runs, models.Checkpoints) and almost none of its weights;
//   - the float32 logits and their softmax are about six copies of B×T×vocab (four with
//     checkpointing);
//   - data parallel full training: XLA places the transients in the output buffers (the second
//     copy of the state), temp stays under 20 MiB for every cut; the model takes the transients
//     of the FSDP program less the outputs, at least zero.
//
// The coefficients are per class (FSDP, LoRA, checkpointing, low-precision base), each fitted on
// its variants: the per-layer terms from the 1/2/4-layer slopes, the token terms from two token
// counts where the fit has them (otherwise the sibling class's, named in xlaFit). A 32-layer
// figure is this model's extrapolation; a TPU's compiler (bf16 products in bf16, another
// scheduler) is not what was measured.
type xlaClass struct {
	fsdp, lora, ckpt, lowBase bool
}

// xlaCoef are one class's coefficients, each a multiple of a feature in bytes:
//   - head: the vocab × hidden matrix in float32 (a constant of the program: the head's and the
//     embedding's gathered copies, their gradients' shards, less what the fit gives back);
//   - logits: B×T×vocab float32 values;
//   - layerW: one decoder layer's weights in float32, per layer beyond the first;
//   - layerTok: B×T × (hidden + intermediate + heads × T) float32 values per layer beyond the
//     first: the layer's activations and attention scores.
type xlaCoef struct {
	head, logits, layerW, layerTok float64
}

// xlaFit are the fitted coefficients, as testdata/plan/fit/fit.py prints them from
// testdata/plan/fit/llama3.1-8b-cuts.json (`GOTPU_PLAN_FIT_OUT=… make plan-fit` records it).
var xlaFit = map[xlaClass]xlaCoef{
	{fsdp: true}:                            {head: -0.0988, logits: 6.2485, layerW: 0.9455, layerTok: 5.1285},
	{fsdp: true, ckpt: true}:                {head: -0.1222, logits: 3.7912, layerW: 0.4617, layerTok: 0.0000},
	{fsdp: true, lora: true}:                {head: 0.3628, logits: 6.4417, layerW: 0.7957, layerTok: 10.2400},
	{fsdp: true, lora: true, ckpt: true}:    {head: 0.2814, logits: 4.2268, layerW: 0.0045, layerTok: 1.1139},
	{fsdp: true, lowBase: true}:             {head: 0.3790, logits: 6.2485, layerW: 0.9009, layerTok: 5.1285},
	{fsdp: true, ckpt: true, lowBase: true}: {head: 0.4227, logits: 3.7912, layerW: 0.6381, layerTok: 0.0000},
	{lora: true}:                            {head: 1.3268, logits: 6.4417, layerW: 1.2112, layerTok: 10.2400},
	{lora: true, ckpt: true}:                {head: 1.3444, logits: 4.2268, layerW: 0.9700, layerTok: 1.1139},
}

// xlaTransients are the compiled program's temp bytes, split by what they hold.
type xlaTransients struct {
	Gathered, Activations int64
}

// planXLATransients models the compiled step's temp buffers for one device running batch
// sequences of block tokens: fp the model's footprint, layerElems one decoder layer's parameter
// elements, lowBase a bf16/f16 base, lora a frozen base with an adapter, ckpt gradient
// checkpointing, fsdp whether the weights are sharded (and gathered), updated the step's output
// bytes (data parallel full training keeps its transients in them). Gathered is the layer-weights
// term, Activations the rest.
func planXLATransients(fp models.Footprint, layerElems int64, batch, block int, lowBase, lora, ckpt, fsdp bool, updated int64) (xlaTransients, bool) {
	var a membudget.Acc
	cls := xlaClass{fsdp: fsdp, lora: lora, ckpt: ckpt, lowBase: lowBase && !lora}
	dpFull := !fsdp && !lora
	if dpFull {
		cls.fsdp = true // the FSDP program's transients, less the outputs (below)
	}
	c, ok := xlaFit[cls]
	if !ok {
		c = xlaFit[xlaClass{fsdp: cls.fsdp, lora: cls.lora, ckpt: cls.ckpt}]
	}
	tok := a.Mul(int64(batch), int64(block))
	f := func(x float64, n int64) float64 { return x * float64(n) }
	layers := max(fp.Layers-1, 0)
	perTok := a.Add(fp.Hidden, fp.Intermediate, a.Mul(fp.Heads, int64(block)))
	gathered := f(c.layerW, a.Mul(layers, layerElems, 4))
	act := f(c.head, a.Mul(fp.Vocab, fp.Hidden, 4)) + f(c.logits, a.Mul(tok, fp.Vocab, 4)) +
		f(c.layerTok, a.Mul(layers, tok, perTok, 4))
	if dpFull {
		gathered = 0
		act -= float64(updated)
	}
	t := xlaTransients{Gathered: int64(max(gathered, 0)), Activations: int64(max(act, 0))}
	return t, !a.Overflowed() && gathered < 1<<62 && act < 1<<62
}
