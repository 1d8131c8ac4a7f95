package step

import (
	"context"
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/gotpu/gotpu/xla"
)

// FSDPStableHLO returns the StableHLO of the FSDP train step in the form gotpu hands a PJRT plugin
// (TPU, GPU): one global-view program over the Config.FSDP mesh (Shardy's sdy.mesh, num_partitions
// = the mesh's devices) that takes the global batch (b is one replica's: the program's batch is
// b.Size × NumReplicas rows, split over every device on its first dimension) and every parameter
// and optimizer state whole in shape, each annotated with its sharding over the fsdp axis
// (internal/shard's layout; small tensors replicated). It has no collectives: XLA's partitioner
// inserts the all-gathers and reduce-scatters. Its body is the data-parallel train program on one
// device, over the global batch (trainGraph), so it computes the same update.
//
// gotpu's CPU backend has no partitioner; it runs the partitioned form of the same step, written
// out (fsdpTrainGraph: SPMD, explicit all-gather and reduce-scatter). The variables' sharding
// specs are set on the model's context (as the SPMD form sets them).
func (s *Stepper) FSDPStableHLO(ctx context.Context, b BatchShape) (string, error) {
	spec, err := s.fsdpHLOSpec(b, true)
	if err != nil {
		return "", err
	}
	if err := s.shardVariables(); err != nil {
		return "", err
	}
	return xla.StableHLOContext(ctx, spec, s.model.Context(), s.trainGraph)
}

// fsdpHLOSpec is the trace specification of FSDPStableHLO; annotate false leaves the batch
// without shardings (tests show the checker rejects such a program).
func (s *Stepper) fsdpHLOSpec(b BatchShape, annotate bool) (xla.HLOSpec, error) {
	if s.fsdp == nil {
		return xla.HLOSpec{}, fmt.Errorf("step.FSDPStableHLO: Config.FSDP is not set")
	}
	if b.Size <= 0 || b.SeqLen <= 0 {
		return xla.HLOSpec{}, fmt.Errorf("step.BatchShape: size %d × seq %d is not positive", b.Size, b.SeqLen)
	}
	global := b
	global.Size = b.Size * s.cfg.NumReplicas
	w := s.cfg.window()
	spec := xla.HLOSpec{
		Name:   fmt.Sprintf("gotpu_fsdp_step_%dx%d_%dx%d", global.Size, global.SeqLen, s.fsdp.cfg.Data, s.fsdp.cfg.Shard),
		Inputs: append(s.batchShapes(global), shapes.Make(dtypes.Float32, w*w, replicatedScalars), shapes.Make(dtypes.Int32, 3)),
		Mesh:   s.fsdp.mesh,
	}
	if annotate {
		for _, in := range spec.Inputs[:len(spec.Inputs)-2] {
			axes := make([]distributed.AxisSpec, in.Rank())
			axes[0] = distributed.AxisSpec{DataAxis, FSDPAxis}
			bs, err := distributed.NewShardingSpec(s.fsdp.mesh, axes...)
			if err != nil {
				return xla.HLOSpec{}, err
			}
			spec.InputShardings = append(spec.InputShardings, bs)
		}
		spec.InputShardings = append(spec.InputShardings, nil, nil)
	}
	return spec, nil
}
