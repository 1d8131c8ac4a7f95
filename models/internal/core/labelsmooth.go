package core

import (
	"fmt"

	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
)

// SmoothedTokenLoss is, per position, transformers' LabelSmoother (trainer_pt_utils.py) before its
// reduction: (1-eps)·nll + eps·smooth/V, where nll = -log_softmax(logits)[label] and smooth =
// -Σ_v log_softmax(logits)_v = V·lse - Σ_v logits, so smooth/V = lse - mean_v(logits). Positions
// whose label is IgnoreIndex are 0 and have valid 0. HF reduces nll by the active count N and
// smooth by N·V; summing these per-position terms and dividing by N is the same number. Float32
// math, as HF (smoothed_loss is summed with dtype=torch.float32).
func SmoothedTokenLoss(logits, labels *Node, eps float64) (loss, valid *Node) {
	lf, lse, picked, valid := tokenLogSoftmaxTerms(logits, labels)
	nll := Sub(lse, picked)
	smooth := Sub(lse, ReduceMean(lf, -1))
	loss = Add(MulScalar(nll, 1-eps), MulScalar(smooth, eps))
	return Mul(loss, valid), valid
}

// CausalLMBatchLoss is the loss a causal LM's Forward returns for b: HF's ForCausalLMLoss
// (CausalLMLoss, the same graph as before label smoothing existed) when b.LabelSmoothing is 0,
// else HF Trainer's label-smoothed loss, LabelSmoother(outputs, labels, shift_labels=True):
// logits[..., :-1, :] against labels[..., 1:], -100 ignored, mean over the active positions of
// this batch (NaN when there are none, as in PyTorch).
//
// Callers that sum the losses of several micro-batches or replicas (trainer/step) multiply this
// mean by the batch's active count and divide the total by the global count, so the step's loss
// is Σ per-token terms / all active tokens of the step — transformers' LabelSmoother since
// huggingface/transformers#47261, which divides by the Trainer's num_items_in_batch. (Before it,
// the Trainer skipped the 1/gradient_accumulation_steps scaling for models that accept loss
// kwargs while the smoother still took each micro-batch's own mean: a known bug, #46731, that
// inflated gradients by about gradient_accumulation_steps; gotpu does not reproduce it. With one
// micro-batch on one device both give the same number.)
func CausalLMBatchLoss(logits *Node, b Batch) *Node {
	if b.LabelSmoothing == 0 {
		return CausalLMLoss(logits, b.Labels)
	}
	checkSmoothing(b.LabelSmoothing)
	loss, valid := SmoothedTokenLoss(logits, ShiftLabels(b.Labels), b.LabelSmoothing)
	return Div(AccurateSum(loss), ReduceAllSum(valid))
}

// ClassificationBatchLoss is a sequence classifier's loss for b: ClassificationLoss when
// b.LabelSmoothing is 0, else LabelSmoother(outputs, labels) without the shift, for single-label
// classification. HF's smoother gathers log-probabilities at integer class labels, so regression
// and multi-label problems (float targets) cannot be smoothed: HF fails there, gotpu refuses by
// name.
func ClassificationBatchLoss(problem string, logits *Node, b Batch) *Node {
	if b.LabelSmoothing == 0 {
		return ClassificationLoss(problem, logits, b.Labels)
	}
	checkSmoothing(b.LabelSmoothing)
	if problem != SingleLabel {
		panic(fmt.Errorf("label_smoothing_factor %g: label smoothing applies to %s only (HF's LabelSmoother gathers "+
			"integer class labels), and this model's problem_type is %s: set label_smoothing_factor to 0",
			b.LabelSmoothing, SingleLabel, problem))
	}
	loss, valid := SmoothedTokenLoss(logits, b.Labels, b.LabelSmoothing)
	return Div(ReduceAllSum(loss), ReduceAllSum(valid))
}

// checkSmoothing refuses a factor outside [0, 1): TrainingArguments validates it, this guards
// other callers of the models package.
func checkSmoothing(eps float64) {
	if !(eps >= 0 && eps < 1) {
		panic(fmt.Errorf("Batch.LabelSmoothing (label_smoothing_factor) %g is not in [0, 1)", eps))
	}
}
