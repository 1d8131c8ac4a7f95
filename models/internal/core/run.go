package core

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"
)

// Forwarder is the part of a model Run needs.
type Forwarder interface {
	Context() *mlctx.Context
	Params() []Param
	Forward(c *mlctx.Context, b Batch) (loss, logits *Node)
}

// Inputs are host tensors for one batch; nil fields are absent.
type Inputs struct {
	InputIDs, AttentionMask, TokenTypeIDs, Labels *tensors.Tensor
	// PositionIDs are a packed batch's positions (Batch.PositionIDs), nil for 0..seq-1.
	PositionIDs *tensors.Tensor
	// Training runs the forward pass with dropout (Batch.Training).
	Training bool
}

// Result of Run.
type Result struct {
	Loss   *tensors.Tensor // scalar, nil without labels
	Logits *tensors.Tensor
	// Grads maps HF parameter names to d loss / d parameter (only when asked).
	Grads map[string]*tensors.Tensor
}

// Run builds and executes one graph: Forward (in evaluation mode unless in.Training) and, with grads, the gradient of
// the loss with respect to every parameter. It is for scoring and tests; training graphs belong to
// the trainer.
func Run(backend backends.Backend, m Forwarder, in Inputs, grads bool) (res *Result, err error) {
	if in.InputIDs == nil {
		return nil, fmt.Errorf("Run: InputIDs is nil")
	}
	if grads && in.Labels == nil {
		return nil, fmt.Errorf("Run: gradients need Labels")
	}
	var args []any
	var slots []*tensors.Tensor
	for _, t := range []*tensors.Tensor{in.InputIDs, in.AttentionMask, in.TokenTypeIDs, in.Labels, in.PositionIDs} {
		slots = append(slots, t)
		if t != nil {
			args = append(args, t)
		}
	}
	params := m.Params()
	fn := func(c *mlctx.Context, nodes []*Node) []*Node {
		b := Batch{Training: in.Training}
		dst := []**Node{&b.InputIDs, &b.AttentionMask, &b.TokenTypeIDs, &b.Labels, &b.PositionIDs}
		k := 0
		for i, t := range slots {
			if t != nil {
				*dst[i] = nodes[k]
				k++
			}
		}
		loss, logits := m.Forward(c, b)
		out := []*Node{logits}
		if loss != nil {
			out = append(out, loss)
		}
		if grads {
			g := logits.Graph()
			wrt := make([]*Node, len(params))
			for i, p := range params {
				wrt[i] = Weight(c, g, p.Name)
			}
			out = append(out, Gradient(loss, wrt...)...)
		}
		return out
	}
	exec, err := mlctx.NewExec(backend, m.Context(), fn)
	if err != nil {
		return nil, err
	}
	defer exec.Finalize()
	outs, err := exec.Exec(args...)
	if err != nil {
		return nil, err
	}
	res = &Result{Logits: outs[0]}
	rest := outs[1:]
	if in.Labels != nil {
		res.Loss, rest = rest[0], rest[1:]
	}
	if grads {
		res.Grads = make(map[string]*tensors.Tensor, len(params))
		for i, p := range params {
			res.Grads[p.Name] = rest[i]
		}
	}
	return res, nil
}
