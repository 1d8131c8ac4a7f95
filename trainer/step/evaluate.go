package step

import (
	"context"
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/xla"
)

// Logits holds a batch's logits on the device until read or released.
type Logits struct{ t *tensors.Tensor }

// Float32s copies the logits to host memory, returning them row-major with their dimensions, and
// releases the device buffer.
func (l *Logits) Float32s() (flat []float32, dims []int, err error) {
	defer xla.Recover(&err, "step.Logits.Float32s")
	defer l.Release()
	t := l.t
	if t.DType() != dtypes.Float32 {
		return nil, nil, fmt.Errorf("step: logits are %s, not float32", t.DType())
	}
	return tensors.MustCopyFlatData[float32](t), t.Shape().Dimensions, nil
}

// Release frees the device buffer; the logits cannot be read after.
func (l *Logits) Release() {
	if l.t != nil {
		l.t.FinalizeAll()
		l.t = nil
	}
}

// Evaluate runs the model in evaluation mode (no dropout) on one batch and returns the loss sum,
// the number of loss terms (their ratio is the model's HF loss) and the logits.
func (s *Stepper) Evaluate(ctx context.Context, b *data.Batch) (lossSum, terms float64, logits *Logits, err error) {
	defer xla.Recover(&err, "step.Evaluate")
	if err := ctx.Err(); err != nil {
		return 0, 0, nil, err
	}
	outs, err := s.run(s.eval, s.batchInputs(b))
	if err != nil {
		return 0, 0, nil, fmt.Errorf("evaluation: %w", err)
	}
	return scalar(outs[0]), scalar(outs[1]), &Logits{t: outs[2]}, nil
}
