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
	if l != nil && l.t != nil {
		l.t.FinalizeAll()
		l.t = nil
	}
}

// EvalPending is an evaluation batch dispatched to device 0; its outputs stay there until read.
type EvalPending struct {
	exec *xla.Execution
	// out is the loss sum, the loss-term count and the logits, set by the execution.
	out []*tensors.Tensor
}

// EvalResult is a read evaluation batch.
type EvalResult struct {
	LossSum, Terms float64
	// Logits are the batch's logits on the device, when ReadEval was asked for them (else nil).
	Logits *Logits
}

// DispatchEval transfers b to device 0 and queues the evaluation forward pass (no dropout) on it,
// after every step dispatched before; it returns at once. ReadEval reads the results.
func (s *Stepper) DispatchEval(ctx context.Context, b *data.Batch) (p *EvalPending, err error) {
	defer xla.Recover(&err, "step.DispatchEval")
	in, err := s.batchInputs(b)
	if err != nil {
		return nil, fmt.Errorf("evaluation: %w", err)
	}
	perDevice := len(in)
	devices := []int{0}
	if s.auto {
		// An AutoSharding stepper evaluates over all its devices, the weights left sharded.
		if err := s.ready(); err != nil {
			return nil, err
		}
		if in, err = s.autoEvalInputs(in); err != nil {
			return nil, err
		}
		devices = devices[:0]
		for r := range s.cfg.NumReplicas {
			devices = append(devices, r)
		}
	} else if err := s.rt.Transfer(0, in...); err != nil {
		return nil, fmt.Errorf("evaluation: %w", err)
	}
	p = &EvalPending{}
	p.exec, err = s.stream.Dispatch(ctx, "evaluation", devices, func() error {
		defer func() {
			for _, t := range in {
				t.FinalizeAll()
			}
		}()
		if s.auto {
			s.autoEvalSpecs(perDevice)
		}
		outs, _, err := s.run(s.eval, in)
		if err != nil {
			return fmt.Errorf("evaluation: %w", err)
		}
		// The one-device program merged a sharded frozen base on device 0 (fsdp_frozen.go).
		if err := s.dropMergedFrozen(); err != nil {
			for _, t := range outs {
				t.FinalizeAll()
			}
			return fmt.Errorf("evaluation: %w", err)
		}
		// Every device returns the same (replicated) results: device 0's are kept.
		per := len(outs) / len(devices)
		for _, t := range outs[per:] {
			t.FinalizeAll()
		}
		p.out = outs[:per]
		return nil
	})
	if err != nil {
		for _, t := range in {
			t.FinalizeAll()
		}
		return nil, err
	}
	return p, nil
}

// ReadEval reads the loss sums and term counts of dispatched evaluation batches in one blocking
// read; with logits, each result keeps its batch's logits (on the device) for the caller to read
// or release, else they are freed.
func (s *Stepper) ReadEval(ctx context.Context, ps []*EvalPending, logits bool) (res []EvalResult, err error) {
	defer xla.Recover(&err, "step.ReadEval")
	res = make([]EvalResult, len(ps))
	err = s.stream.Read(ctx, "evaluation results", func() error {
		for i, p := range ps {
			if p.out == nil {
				continue // its execution failed: Read reports it
			}
			res[i].LossSum, res[i].Terms = scalar(p.out[0]), scalar(p.out[1])
			if logits {
				res[i].Logits = &Logits{t: p.out[2]}
			} else {
				p.out[2].FinalizeAll()
			}
			p.out = nil
		}
		return nil
	})
	if err != nil {
		for _, r := range res {
			r.Logits.Release()
		}
		return nil, err
	}
	return res, nil
}

// Evaluate runs the model in evaluation mode (no dropout) on one batch and returns the loss sum,
// the number of loss terms (their ratio is the model's HF loss) and the logits: DispatchEval and
// ReadEval of one batch (one blocking read).
func (s *Stepper) Evaluate(ctx context.Context, b *data.Batch) (lossSum, terms float64, logits *Logits, err error) {
	if err := ctx.Err(); err != nil {
		return 0, 0, nil, err
	}
	p, err := s.DispatchEval(ctx, b)
	if err != nil {
		return 0, 0, nil, err
	}
	res, err := s.ReadEval(ctx, []*EvalPending{p}, true)
	if err != nil {
		return 0, 0, nil, err
	}
	return res[0].LossSum, res[0].Terms, res[0].Logits, nil
}
