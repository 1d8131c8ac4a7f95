package core

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
)

// IgnoreIndex is the label value HF's losses skip.
const IgnoreIndex = -100

// TokenNLL returns, for logits [..., V] and integer labels [...], the per-position negative
// log-likelihood (float32) and a float32 mask of positions whose label is not IgnoreIndex. The
// loss is computed in float32, as HF does (logits.float()).
func TokenNLL(logits, labels *Node) (nll, valid *Node) {
	_, lse, picked, valid := tokenLogSoftmaxTerms(logits, labels)
	nll = Mul(Sub(lse, picked), valid)
	return nll, valid
}

// tokenLogSoftmaxTerms is what TokenNLL and SmoothedTokenLoss share: the float32 logits lf, their
// log-sum-exp over the vocabulary, the logit at each label (the label clamped to 0 where it is
// IgnoreIndex) and the float32 mask of positions whose label is not IgnoreIndex.
func tokenLogSoftmaxTerms(logits, labels *Node) (lf, lse, picked, valid *Node) {
	g := logits.Graph()
	lf = toF32(logits)
	V := lf.Shape().Dim(-1)
	lbl := ConvertDType(labels, dtypes.Int32)
	keep := NotEqual(lbl, Scalar(g, dtypes.Int32, IgnoreIndex))
	safe := Where(keep, lbl, ZerosLike(lbl))
	maxv := StopGradient(ReduceAndKeep(lf, ReduceMax, -1))
	lse = Add(Log(ReduceSum(Exp(Sub(lf, maxv)), -1)), Squeeze(maxv, -1))
	picked = ReduceSum(Mul(lf, OneHot(safe, V, dtypes.Float32)), -1)
	valid = ConvertDType(keep, dtypes.Float32)
	return lf, lse, picked, valid
}

// ShiftLabels is ForCausalLMLoss's shift: labels padded on the right with IgnoreIndex, then moved
// one to the left, so position t predicts labels[t+1] and the last position predicts nothing.
func ShiftLabels(labels *Node) *Node {
	g := labels.Graph()
	lbl := ConvertDType(labels, dtypes.Int32)
	dims := lbl.Shape().Dimensions
	T := dims[len(dims)-1]
	padDims := append([]int(nil), dims...)
	padDims[len(padDims)-1] = 1
	pad := BroadcastToDims(Scalar(g, dtypes.Int32, IgnoreIndex), padDims...)
	if T == 1 {
		return pad
	}
	return Concatenate([]*Node{SliceAxis(lbl, -1, AxisRange(1)), pad}, -1)
}

// CausalLMLoss is HF's causal LM loss: shifted labels, mean cross-entropy over the positions whose
// label is not -100 (NaN when there are none, as in PyTorch).
func CausalLMLoss(logits, labels *Node) *Node {
	nll, valid := TokenNLL(logits, ShiftLabels(labels))
	return Div(AccurateSum(nll), ReduceAllSum(valid))
}

// Problem types of sequence classification (config problem_type).
const (
	Regression  = "regression"
	SingleLabel = "single_label_classification"
	MultiLabel  = "multi_label_classification"
)

// ProblemType resolves HF's problem_type: the config's value, else regression for one label,
// single-label for integer labels, multi-label for float labels.
func ProblemType(configured string, numLabels int, labels *Node) (string, error) {
	switch configured {
	case Regression, SingleLabel, MultiLabel:
		return configured, nil
	case "":
	default:
		return "", fmt.Errorf("problem_type %q is not one of %s, %s, %s", configured, Regression, SingleLabel, MultiLabel)
	}
	switch {
	case numLabels == 1:
		return Regression, nil
	case labels.DType().IsInt():
		return SingleLabel, nil
	}
	return MultiLabel, nil
}

// ClassificationLoss is BertForSequenceClassification's loss for logits [B, L] (float32 math):
// MSE for regression (squeezed when L == 1), cross-entropy for single-label (labels [B], -100
// ignored), BCE-with-logits for multi-label (labels [B, L]).
func ClassificationLoss(problem string, logits, labels *Node) *Node {
	lf := toF32(logits)
	switch problem {
	case Regression:
		y := ConvertDType(labels, dtypes.Float32)
		if lf.Shape().Dim(-1) == 1 {
			lf = Reshape(lf, lf.Shape().Dim(0))
			y = Reshape(y, y.Shape().Size())
		}
		return ReduceAllMean(Square(Sub(lf, y)))
	case MultiLabel:
		y := ConvertDType(labels, dtypes.Float32)
		// max(x,0) - x*y + log(1 + exp(-|x|)), the stable form PyTorch uses.
		loss := Add(Sub(Max(lf, ZerosLike(lf)), Mul(lf, y)), Log1P(Exp(Neg(Abs(lf)))))
		return ReduceAllMean(loss)
	}
	nll, valid := TokenNLL(lf, labels)
	return Div(ReduceAllSum(nll), ReduceAllSum(valid))
}
