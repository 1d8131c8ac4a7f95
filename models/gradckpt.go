package models

import (
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/models/internal/core"
)

// Checkpoints is gradient checkpointing for one training graph (HF's gradient_checkpointing):
// every decoder layer of the models in this package keeps only its input through the forward
// pass and is built again in the backward pass (models/internal/core/gradckpt.go says how, and
// why the result is bitwise the same). A nil *Checkpoints differentiates the usual way.
type Checkpoints = core.Checkpoints

// EnableCheckpointing turns gradient checkpointing on for graph g, before the model's forward
// pass is built in it; differentiate the loss with the returned Checkpoints' Gradients.
func EnableCheckpointing(c *context.Context, g *graph.Graph) *Checkpoints {
	return core.EnableCheckpointing(c, g)
}
