package step

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/distributed"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/internal/shard"
	"github.com/gotpu/gotpu/models"
)

// LoRA on a sharded base: a models.Frozen model's frozen parameters (the base weights an adapter
// is trained on) are laid out over the fsdp axis by the rule the trained parameters follow
// (internal/shard, min_num_params included), so between steps each device holds 1/N of the base,
// bfloat16 or float32. They are read by the programs and never written: no gradient is taken
// with respect to them (replicaGradients differentiates the trained parameters only), they have
// no optimizer state, and no program returns them. On a PJRT plugin their variables carry their
// sharding in the AutoSharding program, and XLA's partitioner gathers them where they are used;
// on gotpu's backend the written-out SPMD step gathers them with the trained parameters
// (gatherParams) and restores their shards, so neither form reduce-scatters anything for them.

// frozenParam is one frozen parameter of an FSDP plan: its variable, layout and sharding spec.
type frozenParam struct {
	p      models.Param
	v      *mlctx.Variable
	layout shard.Layout
	spec   *distributed.ShardingSpec
}

// planFrozen lays out the model's frozen parameters, if it has any, into f.
func (s *Stepper) planFrozen(f *fsdpPlan) error {
	fm, ok := s.model.(models.Frozen)
	if !ok {
		return nil
	}
	c := s.model.Context()
	for _, p := range fm.FrozenParams() {
		v := s.variable(c, p)
		if v == nil {
			return fmt.Errorf("step.New: frozen parameter %s has no variable in the model's context", p.Name)
		}
		l, spec, err := f.layout(p.Name, v.Shape().Dimensions)
		if err != nil {
			return err
		}
		f.frozen = append(f.frozen, frozenParam{p: p, v: v, layout: l, spec: spec})
	}
	return nil
}

// shardFrozen gives every frozen variable its sharding spec (the programs' parameters then take
// their layout). A variable that has one already is left as it is: one split with its spec
// (splitFrozen), or a replicated one an earlier distributed program gave GoMLX's default spec,
// replicated over the mesh, which is its layout (GoMLX refuses to set the spec of a distributed
// value again).
func (s *Stepper) shardFrozen() error {
	for _, fp := range s.fsdp.frozen {
		if fp.v.ShardingSpec() == fp.spec || (!fp.layout.Sharded() && fp.v.ShardingSpec() != nil) {
			continue
		}
		if err := fp.v.SetShardingSpec(fp.spec); err != nil {
			return fmt.Errorf("step: sharding frozen parameter %s: %w", fp.p.Name, err)
		}
	}
	return nil
}

// splitFrozen replaces each sharded frozen variable's value by its shards (host tensors each
// device's first program puts on it) and frees the whole value. A trained parameter's whole value
// goes when the first step donates it, but no program updates a frozen one: without this the
// device it was loaded or last evaluated on would keep the whole base next to the shards.
func (s *Stepper) splitFrozen() error {
	for _, fp := range s.fsdp.frozen {
		if !fp.layout.Sharded() {
			continue
		}
		whole, err := fp.v.Value() // its value, or its shards merged
		if err != nil {
			return fmt.Errorf("step: frozen parameter %s: %w", fp.p.Name, err)
		}
		dv, err := distributed.ShardTensor(fp.spec, whole)
		if err == nil {
			err = fp.v.SetDistributedValue(dv) // frees the whole value and any earlier shards
		}
		if err != nil {
			return fmt.Errorf("step: splitting frozen parameter %s over the mesh: %w", fp.p.Name, err)
		}
	}
	return nil
}

// dropMergedFrozen frees the whole copies of the sharded frozen variables that the one-device
// evaluation program of gotpu's backend made them merge (GoMLX's Variable.Value keeps the merged
// tensor beside the shards), keeping the shards: trained parameters lose theirs at the next step,
// which donates them, but frozen ones would keep the whole base on device 0 for the rest of the
// run. It runs on the executor, right after the evaluation program. On a PJRT plugin evaluation
// is an AutoSharding program that reads the shards, and nothing is merged.
//
// GoMLX v0.26.0 has no call that drops only a variable's merged value: the value is detached
// (SetValuePreservingOld(nil), which also marks the context as needing initialization — the next
// execution then finds every variable set and initializes nothing), freed, and the shards set
// back.
func (s *Stepper) dropMergedFrozen() error {
	if s.fsdp == nil || s.auto {
		return nil
	}
	for _, fp := range s.fsdp.frozen {
		if !fp.layout.Sharded() || fp.v.ShardingSpec() != fp.spec {
			continue
		}
		dv, err := fp.v.DistributedValue()
		if err != nil {
			return fmt.Errorf("step: frozen parameter %s: %w", fp.p.Name, err)
		}
		merged, err := fp.v.Value()
		if err != nil {
			return fmt.Errorf("step: frozen parameter %s: %w", fp.p.Name, err)
		}
		if err := fp.v.SetValuePreservingOld(nil); err != nil {
			return fmt.Errorf("step: frozen parameter %s: %w", fp.p.Name, err)
		}
		if err := merged.FinalizeAll(); err != nil {
			return fmt.Errorf("step: freeing the merged copy of frozen parameter %s: %w", fp.p.Name, err)
		}
		if err := fp.v.SetDistributedValue(dv); err != nil {
			return fmt.Errorf("step: frozen parameter %s: %w", fp.p.Name, err)
		}
	}
	return nil
}

// FrozenShardBytes is what each device holds of the frozen parameters between steps under the
// stepper's FSDP plan (their shards, the replicated ones whole), and what one device holds
// without FSDP (the whole base). Both are 0 for a model without frozen parameters; without FSDP
// the first equals the second.
func (s *Stepper) FrozenShardBytes() (perDevice, whole int64) {
	if s.fsdp == nil {
		for v := range s.frozen {
			whole += int64(v.Shape().Memory())
		}
		return whole, whole
	}
	for _, fp := range s.fsdp.frozen {
		size := int64(fp.v.DType().Size())
		perDevice += fp.layout.ShardElements() * size
		whole += fp.layout.Elements() * size
	}
	return perDevice, whole
}
