package trainer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/trainer/step"
	"github.com/gotpu/gotpu/xla"
)

// PlanCompiled is CompilePlan's answer: the XLA compiler's memory figures of the training step
// next to the planner's for the same run and device count.
type PlanCompiled struct {
	// Plan is PlanFSDP's plan for the request over the runtime's devices (Plan.PlanBytes are the
	// figures to compare).
	Plan Plan
	// Stats are the compiler's figures for the train program, per device.
	Stats xla.MemoryStats
	// Devices is the runtime's device count, the replicas (FSDP's shards) of the step.
	Devices int
	// Seconds is the time of the step that was run: tracing, compiling and one execution.
	Seconds float64
}

// CompilePlan checks the planner against the compiler: it builds req.Model with random weights
// on rt, the training step as trainer.New configures it for req.Args (optimizer, bf16) over all of
// rt's devices (FSDP full_shard over them with req.FSDP, data parallel without), runs one optimizer
// step — gradient_accumulation_steps micro-batches of per_device_train_batch_size random sequences
// of the plan's block size per device — and returns the compiler's memory figures of the train
// program with the plan for the same device count. One step is run rather than the program only
// compiled: GoMLX's context.Exec compiles on first execution (its PreCompile does not return the
// compiled graph), and a step costs little next to the compilation.
//
// The figures come from a PJRT plugin's compiler: on the pure-Go backend the error wraps
// xla.ErrMemoryStatsUnavailable before anything is built. Causal language models only.
func CompilePlan(ctx context.Context, rt *xla.Runtime, req PlanRequest) (PlanCompiled, error) {
	if rt == nil {
		return PlanCompiled{}, errors.New("trainer.CompilePlan: nil runtime")
	}
	if rt.Kind() == xla.DeviceGo {
		return PlanCompiled{}, fmt.Errorf("trainer.CompilePlan: %w: the pure-Go backend has no compiler figures; they come from a PJRT plugin (--device cpu, tpu or cuda)",
			xla.ErrMemoryStatsUnavailable)
	}
	n := rt.NumDevices()
	req.Devices = n
	req.Targets = []PlanTarget{{Name: rt.Kind(), Devices: n, HBM: 1 << 62}}
	p, err := PlanFSDP(req)
	if err != nil {
		return PlanCompiled{}, err
	}
	if len(p.Rows) == 1 && p.Rows[0].Err != nil {
		return PlanCompiled{}, p.Rows[0].Err
	}
	m, err := models.New(ctx, rt, req.Model, models.NewOptions{})
	if err != nil {
		return PlanCompiled{}, err
	}
	lm, ok := m.(models.CausalLM)
	if !ok {
		return PlanCompiled{}, fmt.Errorf("trainer.CompilePlan: %w: %s is not a causal language model (compiling the step supports those only)",
			models.ErrUnsupported, req.Model.Architecture())
	}
	t := &Trainer{args: req.Args}
	opt, err := t.optimizer()
	if err != nil {
		return PlanCompiled{}, err
	}
	// The same program the run compiles: label smoothing and NEFTune's noise are part of it.
	cfg := step.Config{Optimizer: opt, NumReplicas: n, BF16: req.Args.BF16, LabelSmoothing: req.Args.LabelSmoothingFactor}
	if req.Args.NeftuneNoiseAlpha != nil {
		cfg.NEFTuneAlpha = *req.Args.NeftuneNoiseAlpha
	}
	if req.FSDP {
		cfg.FSDP = &step.FSDP{Data: 1, Shard: n, MinNumParams: req.MinNumParams}
	}
	if err := m.Context().SetRNGStateFromSeed(int64(req.Args.Seed)); err != nil {
		return PlanCompiled{}, err
	}
	s, err := step.New(rt, m, cfg)
	if err != nil {
		return PlanCompiled{}, err
	}
	rng := rand.New(rand.NewPCG(uint64(req.Args.Seed), 37))
	micro := make([][]*data.Batch, p.GradientAccumulationSteps)
	for a := range micro {
		for range n {
			b := &data.Batch{Size: p.Batch, SeqLen: p.BlockSize}
			for range p.Batch * p.BlockSize {
				id := int32(rng.IntN(lm.VocabSize()))
				b.InputIDs, b.AttentionMask, b.Labels = append(b.InputIDs, id), append(b.AttentionMask, 1), append(b.Labels, id)
			}
			micro[a] = append(micro[a], b)
		}
	}
	start := time.Now()
	if _, err := s.Step(ctx, micro, 1e-4); err != nil {
		return PlanCompiled{}, err
	}
	secs := time.Since(start).Seconds()
	stats, err := s.MemoryStats()
	if err != nil {
		return PlanCompiled{}, err
	}
	return PlanCompiled{Plan: p, Stats: stats, Devices: n, Seconds: secs}, nil
}
