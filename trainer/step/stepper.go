package step

import (
	"fmt"
	"sync"
	"time"

	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/models"
	"github.com/gotpu/gotpu/xla"
)

// Config configures a Stepper.
type Config struct {
	Optimizer   Optimizer
	NumReplicas int // replicas (devices) per step; each gets its own shard of the global batch
	// BF16 computes forward and backward in bfloat16 with float32 master weights, optimizer state
	// and loss (HF's bf16=True).
	BF16 bool
	// Window is the most steps Dispatch queues between two host reads (Collect, ExportState):
	// the size of the table of per-step optimizer scalars uploaded at each read (window.go).
	// When a window is full, Dispatch reads first (one extra blocking read). 0 means 1; at most
	// MaxWindow.
	Window int
	// MaxConsecutiveNonfinite stops the device from applying any update once this many
	// consecutive updates were skipped for non-finite gradients, so the state stays that of the
	// step where the limit was reached until the host reads it (0: no limit).
	MaxConsecutiveNonfinite int
	// FSDP shards parameters, gradients and optimizer state over a device mesh (fsdp.go); nil
	// replicates them on every replica (data parallelism).
	FSDP *FSDP
	// LabelSmoothing is HF's label_smoothing_factor, in [0, 1): 0 keeps the plain loss (the same
	// programs as without it); otherwise training and evaluation use HF Trainer's label-smoothed
	// loss (models.Batch.LabelSmoothing; the step's sum-over-tokens semantics are explained at
	// core.CausalLMBatchLoss). Causal LMs and single-label classifiers only.
	LabelSmoothing float64
	// NEFTuneAlpha is HF's neftune_noise_alpha (0: off): noise on the token embeddings in the
	// training programs only, drawn from the model context's RNG as dropout is.
	NEFTuneAlpha float64
	// GradientCheckpointing is HF's gradient_checkpointing: the training programs keep each
	// decoder layer's input only and recompute the layer's activations in the backward pass
	// (models.Checkpoints). Losses, gradients and parameters are bitwise those without it.
	GradientCheckpointing bool
}

// MaxWindow bounds Config.Window: the scalar table has Window² rows.
const MaxWindow = 128

func (c Config) window() int { return max(c.Window, 1) }

// Stepper runs training and evaluation steps of one model on one runtime.
type Stepper struct {
	rt     *xla.Runtime
	model  models.Model
	cfg    Config
	params []models.Param
	causal bool
	// frozen are the variables of a models.Frozen model's frozen parameters (a LoRA adapter's
	// base weights): read by the programs, never updated, exported or checkpointed.
	frozen map[*mlctx.Variable]bool

	// stream orders this stepper's executions and reads on the runtime's executor and keeps its
	// failures its own (another stepper on the same runtime never sees them).
	stream *xla.Stream
	// grad runs the accumulation micro-batches of a step (all but the last), train the last one
	// with the all-reduce and the update (ProgramReplicatedStep, or its variant carrying the
	// accumulators), eval the evaluation forward pass. grad and train are SPMD programs over
	// NumReplicas devices when there are several; eval runs on device 0.
	grad, train, eval *mlctx.Exec
	// spmdReady records that grad and train were configured for the runtime's devices (ready).
	spmdReady bool
	// t is the optimizer's step count (torch's state["step"]) as of the last host read, advanced
	// only by applied updates; consec the consecutive skipped updates then.
	t, consec int
	// poison makes the next update's gradients non-finite (PoisonNextStep, a test hook).
	poison bool

	// win is the open window of dispatched steps (window.go); pending the steps dispatched and
	// not yet read, collected those read by a forced read and not yet returned by Collect.
	win       window
	pending   []*Pending
	collected []Result
	// fsdp is the sharded layout when Config.FSDP is set (fsdp.go); auto says the runtime is a
	// PJRT plugin, where the step is the AutoSharding program (fsdp_auto.go), not the SPMD one.
	fsdp *fsdpPlan
	auto bool
	// omitAllReduce builds ProgramReplicatedStep without its all-reduce. Only tests set it, to
	// show that the golden checks reject a step whose replicas would diverge.
	omitAllReduce bool

	// compiled records each traced graph; compileSeconds the time of their first runs. Programs
	// run on the runtime's executor goroutine while the host asks: mu guards both.
	mu             sync.Mutex
	compiled       map[graph.GraphId]bool
	compileSeconds float64
	// trainStats are the compiler's memory figures of the train program last compiled (or why
	// there are none), read when it is first run (memstats.go); mu guards them.
	trainStats    xla.MemoryStats
	trainStatsErr error
}

// New prepares the programs (they are traced on first use) and creates the optimizer state.
func New(rt *xla.Runtime, m models.Model, cfg Config) (s *Stepper, err error) {
	defer xla.Recover(&err, "step.New")
	if err := cfg.Optimizer.Validate(); err != nil {
		return nil, err
	}
	if cfg.NumReplicas <= 0 {
		return nil, fmt.Errorf("step.Config.NumReplicas: %d is not positive", cfg.NumReplicas)
	}
	if cfg.Window < 0 || cfg.Window > MaxWindow {
		return nil, fmt.Errorf("step.Config.Window: %d is not in [0, %d]", cfg.Window, MaxWindow)
	}
	if cfg.MaxConsecutiveNonfinite < 0 {
		return nil, fmt.Errorf("step.Config.MaxConsecutiveNonfinite: %d is negative", cfg.MaxConsecutiveNonfinite)
	}
	if err := cfg.checkLossOptions(m); err != nil {
		return nil, err
	}
	_, causal := m.(models.CausalLM)
	s = &Stepper{rt: rt, stream: rt.NewStream(), model: m, cfg: cfg, params: m.Params(), causal: causal, compiled: map[graph.GraphId]bool{},
		trainStatsErr: fmt.Errorf("%w: the train step has not been compiled yet", xla.ErrMemoryStatsUnavailable)}
	for _, p := range s.params {
		if s.variable(m.Context(), p) == nil {
			return nil, fmt.Errorf("step.New: parameter %s has no variable in the model's context", p.Name)
		}
	}
	if f, ok := m.(models.Frozen); ok {
		s.frozen = map[*mlctx.Variable]bool{}
		for _, p := range f.FrozenParams() {
			v := s.variable(m.Context(), p)
			if v == nil {
				return nil, fmt.Errorf("step.New: frozen parameter %s has no variable in the model's context", p.Name)
			}
			s.frozen[v] = true
		}
	}
	if cfg.GradientCheckpointing && m.Context().GetVariableByScopeAndName(mlctx.RootScope, mlctx.RNGStateVariableName) == nil {
		// A recomputed layer must draw its dropout bits again from the state its forward pass
		// started from, which must exist before the program is built (models.Checkpoints). The
		// model's first draw would create it the same way (a random seed).
		if err := m.Context().ResetRNGState(); err != nil {
			return nil, err
		}
	}
	if err := s.createOptimizerState(); err != nil {
		return nil, err
	}
	gradFn, trainFn := s.gradGraph, s.trainGraph
	pjrt := rt.Kind() != xla.DeviceGo
	plan := cfg.FSDP
	if plan == nil && pjrt && cfg.NumReplicas > 1 {
		// Data parallelism on a plugin: GoMLX v0.26.0's XLA backend cannot build the SPMD form
		// (context.Exec.SPMD gives every variable a sharding spec its builder resolves against
		// AutoSharding meshes only: "mesh not found"), so the step is the AutoSharding program
		// with every variable replicated over a data mesh — the FSDP machinery with an fsdp
		// axis of 1 (fsdp_auto.go).
		plan = &FSDP{Data: cfg.NumReplicas, Shard: 1}
	}
	if plan != nil {
		if s.fsdp, err = s.newFSDPPlan(*plan); err != nil {
			return nil, err
		}
		gradFn, trainFn = s.fsdpGradGraph, s.fsdpTrainGraph
		if s.auto = pjrt; s.auto {
			gradFn = s.autoOutputs(&s.grad, s.gradGraph, s.gradOutputSpecs)
			trainFn = s.autoOutputs(&s.train, s.trainGraph, s.trainOutputSpecs)
		}
	}
	if s.grad, err = mlctx.NewExec(rt.Backend(), m.Context(), gradFn); err != nil {
		return nil, err
	}
	if s.train, err = mlctx.NewExec(rt.Backend(), m.Context(), trainFn); err != nil {
		return nil, err
	}
	evalFn := s.evalGraph
	if s.auto {
		evalFn = s.autoOutputs(&s.eval, s.evalGraph, s.trainOutputSpecs)
	}
	if s.eval, err = mlctx.NewExec(rt.Backend(), m.Context(), evalFn); err != nil {
		return nil, err
	}
	// The programs' names (their StableHLO module's, the executable's) would otherwise be the Go
	// functions' — closures named by position in this file. These say what each program is, in
	// XLA's dumps and in `gotpu cache`'s listing of the compilation cache.
	s.grad.WithName("gotpu_grad_step")
	s.train.WithName("gotpu_train_step")
	s.eval.WithName("gotpu_eval_step")
	return s, nil
}

// ready makes the training programs SPMD programs over the runtime's first NumReplicas devices,
// the first time a step runs. It is not done by New, so that a Stepper for more replicas than the
// runtime has can still trace its programs (StableHLO).
func (s *Stepper) ready() error {
	n := s.cfg.NumReplicas
	if s.spmdReady || (n == 1 && s.fsdp == nil) {
		return nil
	}
	if s.fsdp != nil {
		return s.readyFSDP()
	}
	if have := s.rt.NumDevices(); n > have {
		return fmt.Errorf("step.Config.NumReplicas: %d replicas, but the runtime has %d devices (xla.Config.NumDevices)", n, have)
	}
	mesh, err := distributed.NewDeviceMesh([]int{n}, []string{xla.ReplicaAxis})
	if err != nil {
		return err
	}
	s.grad.SPMD(mesh)
	s.train.SPMD(mesh)
	s.spmdReady = true
	return nil
}

// Compilations returns how many distinct programs (graph × input shapes) were traced and compiled
// so far, and the seconds their first runs took (tracing and compiling included).
func (s *Stepper) Compilations() (int, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.compiled), s.compileSeconds
}

// run executes a program (on the executor goroutine), recording a compilation the first time a
// graph runs; it returns the seconds of that first run (0 for later runs).
func (s *Stepper) run(e *mlctx.Exec, args []*tensors.Tensor) ([]*tensors.Tensor, float64, error) {
	start := time.Now()
	outs, g, err := e.ExecWithGraph(tensorArgs(args)...)
	if err != nil {
		return nil, 0, err
	}
	s.rt.ReportPrograms(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.compiled[g.GraphId()] {
		s.compiled[g.GraphId()] = true
		secs := time.Since(start).Seconds()
		if e == s.train {
			s.trainStats, s.trainStatsErr = xla.GraphMemoryStats(g)
		}
		s.compileSeconds += secs
		return outs, secs, nil
	}
	return outs, 0, nil
}

// PoisonNextStep makes the gradients of the next Step non-finite (they are divided by NaN in the
// update program), so tests exercise the in-graph skip with real device programs: the update is
// skipped and Result.Skipped set. It is a fault-injection hook, not for production use.
func (s *Stepper) PoisonNextStep() { s.poison = true }

// OptimizerStep is the number of updates applied as of the last host read (Collect).
func (s *Stepper) OptimizerStep() int { return s.t }

func (s *Stepper) variable(c *mlctx.Context, p models.Param) *mlctx.Variable {
	return c.GetVariableByScopeAndName(p.Scope(), p.Var())
}

// optimizerScope is where the state of parameter p's optimizer lives.
func optimizerScope(kind string, p models.Param) string { return "/optimizer/" + kind + p.Scope() }

// createOptimizerState makes the moment variables (zeros, not trainable) if they do not exist yet.
func (s *Stepper) createOptimizerState() error {
	c := s.model.Context()
	for _, p := range s.params {
		for _, st := range s.stateShapes(p) {
			scope := optimizerScope(st.kind, p)
			if c.GetVariableByScopeAndName(scope, p.Var()) != nil {
				continue
			}
			v := c.InAbsPath(scope).Checked(false).VariableWithValue(p.Var(), tensors.FromShape(st.shape))
			v.SetTrainable(false)
		}
	}
	return nil
}

type stateShape struct {
	kind  string
	shape shapes.Shape
}

// stateShapes lists the optimizer variables of a parameter: AdamW's m and v; Adafactor's factored
// row and column second moments for matrices, or a full one for vectors. AdamW's moments have
// the parameter's dtype when that is bfloat16 or float16 (torch.optim.AdamW's zeros_like(p);
// lowprec.go), float32 otherwise; Adafactor's are float32 always (transformers' Adafactor
// upcasts a bf16 parameter's gradient and keeps its state in float32).
func (s *Stepper) stateShapes(p models.Param) []stateShape {
	f32 := func(dims ...int) shapes.Shape { return shapes.Make(dtypes.Float32, dims...) }
	if s.cfg.Optimizer.Name == "adamw" {
		dt := dtypes.Float32
		if v := s.variable(s.model.Context(), p); v != nil && lowPrecision(v.Shape().DType) {
			dt = v.Shape().DType
		}
		return []stateShape{{"adamw_m", shapes.Make(dt, p.Shape...)}, {"adamw_v", shapes.Make(dt, p.Shape...)}}
	}
	if len(p.Shape) >= 2 {
		d := p.Shape
		row := append([]int(nil), d[:len(d)-1]...)
		col := append(append([]int(nil), d[:len(d)-2]...), d[len(d)-1])
		return []stateShape{{"adafactor_row", f32(row...)}, {"adafactor_col", f32(col...)}}
	}
	return []stateShape{{"adafactor_v", f32(p.Shape...)}}
}

// OptimizerStateBytes is the size of the optimizer state of one replica: every state tensor of
// every trained parameter (a frozen parameter has none).
func (s *Stepper) OptimizerStateBytes() int64 {
	var n int64
	for _, p := range s.params {
		for _, ss := range s.stateShapes(p) {
			n += int64(ss.shape.Memory())
		}
	}
	return n
}

// batchInputs converts a host batch to the gradient/eval programs' leading inputs: input_ids,
// attention_mask, the optional one, labels ([size, seq] for a causal LM, [size] for a
// classifier). The optional input is a causal LM's position_ids (a packed batch) or a
// classifier's token_type_ids: a causal LM's programs never take token types (no causal model
// reads them), and a classifier refuses position ids, so a program's input count alone says
// what it was given (splitBatch) and a packed batch is one more program shape, as token types
// are.
func (s *Stepper) batchInputs(b *data.Batch) ([]*tensors.Tensor, error) {
	ids := func(v []int32) *tensors.Tensor { return tensors.FromFlatDataAndDimensions(v, b.Size, b.SeqLen) }
	in := []*tensors.Tensor{ids(b.InputIDs), ids(b.AttentionMask)}
	if s.causal {
		if b.PositionIDs != nil {
			in = append(in, ids(b.PositionIDs))
		}
		return append(in, ids(b.Labels)), nil
	}
	if b.PositionIDs != nil {
		return nil, fmt.Errorf("step: the batch has position_ids (packed sequences), but the model is a sequence " +
			"classifier, not a causal LM: packing is for causal language models")
	}
	if b.TokenTypeIDs != nil {
		in = append(in, ids(b.TokenTypeIDs))
	}
	return append(in, tensors.FromFlatDataAndDimensions(b.Labels, b.Size)), nil
}

// splitBatch maps a program's leading inputs (3 or 4 nodes, batchInputs) to a models.Batch: a
// fourth is position_ids for a causal LM, token_type_ids for a classifier.
func (s *Stepper) splitBatch(nodes []*graph.Node) models.Batch {
	b := models.Batch{InputIDs: nodes[0], AttentionMask: nodes[1], Labels: nodes[len(nodes)-1]}
	if len(nodes) == 4 {
		if s.causal {
			b.PositionIDs = nodes[2]
		} else {
			b.TokenTypeIDs = nodes[2]
		}
	}
	return b
}

// lossTerms is the number of terms HF's loss averages over: non-ignored shifted labels for a causal
// LM, examples for a classifier.
func (s *Stepper) lossTerms(labels *graph.Node) *graph.Node {
	if s.causal {
		shifted := graph.Slice(labels, graph.AxisRange(), graph.AxisRange(1))
		valid := graph.NotEqual(shifted, graph.Scalar(labels.Graph(), labels.DType(), data.IgnoreIndex))
		return graph.ReduceAllSum(graph.ConvertDType(valid, dtypes.Float32))
	}
	return graph.Scalar(labels.Graph(), dtypes.Float32, float64(labels.Shape().Dimensions[0]))
}

func tensorArgs(ts []*tensors.Tensor) []any {
	out := make([]any, len(ts))
	for i, t := range ts {
		out[i] = t
	}
	return out
}

func scalar(t *tensors.Tensor) float64 {
	defer t.FinalizeAll()
	switch v := t.Value().(type) {
	case float32:
		return float64(v)
	case float64:
		return v
	}
	panic(fmt.Sprintf("step: expected a float scalar, got %s", t.Shape()))
}
