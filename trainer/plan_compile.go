package trainer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/models/peft"
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
	// Seconds is the time of the step that was run: tracing, compiling and one execution (or,
	// ShapesOnly, of the trace and the compile).
	Seconds float64
	// ShapesOnly is set by CompilePlanShapes: nothing was allocated or run.
	ShapesOnly bool
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
	p, n, err := planOnRuntime(rt, &req, "CompilePlan")
	if err != nil {
		return PlanCompiled{}, err
	}
	s, lm, err := planStepper(ctx, rt, req, n, false)
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

// CompilePlanShapes is CompilePlan without building or running anything: the model's variables
// have shapes but no values (models.NewShapeOnly; a LoRA adapter's small tensors are made), the
// train program — the step's last micro-batch with the update, as the run compiles it on a
// plugin: the AutoSharding program of FSDP or of data parallelism over rt's devices
// (step.Stepper.FSDPStableHLO) — is traced from those shapes and compiled by rt's plugin without
// being run, and its memory figures are returned with the plan. It measures models whose state
// would not fit in the host's memory (the 8B configs the planner is fitted for, cut to a few
// layers). Seconds is the time of the trace and the compile. Needs more than one device or FSDP.
func CompilePlanShapes(ctx context.Context, rt *xla.Runtime, req PlanRequest) (PlanCompiled, error) {
	if rt != nil && rt.NumDevices() == 1 && !req.FSDP {
		// One device without FSDP is a plain program, not the AutoSharding one traced here.
		req.FSDP = true
	}
	p, n, err := planOnRuntime(rt, &req, "CompilePlanShapes")
	if err != nil {
		return PlanCompiled{}, err
	}
	start := time.Now()
	s, _, err := planStepper(ctx, rt, req, n, true)
	if err != nil {
		return PlanCompiled{}, err
	}
	text, err := s.FSDPStableHLO(ctx, step.BatchShape{Size: p.Batch, SeqLen: p.BlockSize})
	if err != nil {
		return PlanCompiled{}, err
	}
	stats, err := xla.CompileStableHLOStats(ctx, rt, text, n)
	if err != nil {
		return PlanCompiled{}, err
	}
	return PlanCompiled{Plan: p, Stats: stats, Devices: n, Seconds: time.Since(start).Seconds(), ShapesOnly: true}, nil
}

// planStepper builds req's model on rt (random weights, or shapes only), its LoRA adapter when
// req.Lora is set, and the training step trainer.New would configure for req.Args over n
// devices (FSDP full_shard over them with req.FSDP, data parallel without).
func planStepper(ctx context.Context, rt *xla.Runtime, req PlanRequest, n int, shapesOnly bool) (*step.Stepper, models.CausalLM, error) {
	opts := models.NewOptions{DType: req.ParamDType, Seed: uint64(req.Args.Seed)}
	var m models.Model
	var err error
	if shapesOnly {
		m, err = models.NewShapeOnly(rt, req.Model, opts)
	} else {
		m, err = models.New(ctx, rt, req.Model, opts)
	}
	if err != nil {
		return nil, nil, err
	}
	if req.Lora != nil {
		if m, err = peft.New(ctx, rt, m, *req.Lora, peft.Options{Seed: uint64(req.Args.Seed)}); err != nil {
			return nil, nil, err
		}
	}
	lm, ok := m.(models.CausalLM)
	if !ok {
		return nil, nil, fmt.Errorf("trainer.CompilePlan: %w: %s is not a causal language model (compiling the step supports those only)",
			models.ErrUnsupported, req.Model.Architecture())
	}
	t := &Trainer{args: req.Args}
	opt, err := t.optimizer()
	if err != nil {
		return nil, nil, err
	}
	// The same program the run compiles: label smoothing and NEFTune's noise are part of it.
	cfg := step.Config{Optimizer: opt, NumReplicas: n, BF16: req.Args.BF16, LabelSmoothing: req.Args.LabelSmoothingFactor,
		GradientCheckpointing: req.Args.GradientCheckpointing}
	if req.Args.NeftuneNoiseAlpha != nil {
		cfg.NEFTuneAlpha = *req.Args.NeftuneNoiseAlpha
	}
	if req.FSDP {
		cfg.FSDP = &step.FSDP{Data: 1, Shard: n, MinNumParams: req.MinNumParams}
	}
	if shapesOnly {
		shapeOnlyAdamState(m, opt)
	} else if err := m.Context().SetRNGStateFromSeed(int64(req.Args.Seed)); err != nil {
		return nil, nil, err
	}
	s, err := step.New(rt, m, cfg)
	if err != nil {
		return nil, nil, err
	}
	return s, lm, nil
}

// shapeOnlyAdamState creates AdamW's moments of m's trainable parameters as shape-only variables
// where step.New would allocate zeros (step's createOptimizerState keeps a variable that exists):
// the moments of a full 8B model are tens of GB. The scopes and dtypes are step's
// (optimizerScope, stateShapes: the parameter's dtype when it is bf16 or f16, float32 otherwise);
// were they to drift, step.New would create its own variables and the figures would not change,
// only the host memory used. Adafactor's factored state is small and left to step.New.
func shapeOnlyAdamState(m models.Model, opt step.Optimizer) {
	if opt.Name != "adamw" {
		return
	}
	c := m.Context()
	for _, p := range m.Params() {
		v := c.GetVariableByScopeAndName(p.Scope(), p.Var())
		if v == nil {
			continue
		}
		dt := dtypes.Float32
		if d := v.Shape().DType; d == dtypes.BFloat16 || d == dtypes.Float16 {
			dt = d
		}
		for _, kind := range []string{"adamw_m", "adamw_v"} {
			st := c.InAbsPath("/optimizer/"+kind+p.Scope()).Checked(false).VariableWithShape(p.Var(), shapes.Make(dt, p.Shape...))
			st.SetTrainable(false)
		}
	}
}

// planOnRuntime plans req for rt's devices (one target, rt's kind, with unbounded memory) after
// checking that rt is a PJRT plugin, whose compiler the figures come from; what names the caller.
func planOnRuntime(rt *xla.Runtime, req *PlanRequest, what string) (Plan, int, error) {
	if rt == nil {
		return Plan{}, 0, fmt.Errorf("trainer.%s: nil runtime", what)
	}
	if rt.Kind() == xla.DeviceGo {
		return Plan{}, 0, fmt.Errorf("trainer.%s: %w: the pure-Go backend has no compiler figures; they come from a PJRT plugin (--device cpu, tpu or cuda)",
			what, xla.ErrMemoryStatsUnavailable)
	}
	n := rt.NumDevices()
	req.Devices = n
	req.Targets = []PlanTarget{{Name: rt.Kind(), Devices: n, HBM: 1 << 62}}
	p, err := PlanFSDP(*req)
	if err != nil {
		return Plan{}, 0, err
	}
	if len(p.Rows) == 1 && p.Rows[0].Err != nil {
		return Plan{}, 0, p.Rows[0].Err
	}
	return p, n, nil
}
