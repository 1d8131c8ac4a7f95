package step

import (
	"context"
	"fmt"
	"math"
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
}

// Result is what one optimizer step reports.
type Result struct {
	// Loss is the mean loss over every non-ignored loss term of the step (all micro-batches and
	// replicas): what Hugging Face Trainer accumulates as tr_loss for the step.
	Loss float64
	// LossSum and Count are its numerator and denominator.
	LossSum, Count float64
	// GradNorm is the global L2 norm of the averaged gradients before clipping (HF's grad_norm).
	GradNorm float64
	// Skipped is true when the gradients were not finite: nothing was updated.
	Skipped bool
}

// Stepper runs training and evaluation steps of one model on one runtime.
type Stepper struct {
	rt     *xla.Runtime
	model  models.Model
	cfg    Config
	params []models.Param
	causal bool

	// grad runs the accumulation micro-batches of a step (all but the last), train the last one
	// with the all-reduce and the update (ProgramReplicatedStep, or its variant carrying the
	// accumulators), eval the evaluation forward pass. grad and train are SPMD programs over
	// NumReplicas devices when there are several; eval runs on device 0.
	grad, train, eval *mlctx.Exec
	// spmdReady records that grad and train were configured for the runtime's devices (ready).
	spmdReady bool
	// t is the optimizer's step count (torch's state["step"]), advanced only by applied updates.
	t int
	// poison makes the next update's gradients non-finite (PoisonNextStep, a test hook).
	poison bool
	// omitAllReduce builds ProgramReplicatedStep without its all-reduce. Only tests set it, to
	// show that the golden checks reject a step whose replicas would diverge.
	omitAllReduce bool

	// compiled records each traced graph; compileSeconds the time of their first runs.
	compiled       map[graph.GraphId]bool
	compileSeconds float64
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
	_, causal := m.(models.CausalLM)
	s = &Stepper{rt: rt, model: m, cfg: cfg, params: m.Params(), causal: causal, compiled: map[graph.GraphId]bool{}}
	for _, p := range s.params {
		if s.variable(m.Context(), p) == nil {
			return nil, fmt.Errorf("step.New: parameter %s has no variable in the model's context", p.Name)
		}
	}
	if err := s.createOptimizerState(); err != nil {
		return nil, err
	}
	if s.grad, err = mlctx.NewExec(rt.Backend(), m.Context(), s.gradGraph); err != nil {
		return nil, err
	}
	if s.train, err = mlctx.NewExec(rt.Backend(), m.Context(), s.trainGraph); err != nil {
		return nil, err
	}
	if s.eval, err = mlctx.NewExec(rt.Backend(), m.Context(), s.evalGraph); err != nil {
		return nil, err
	}
	return s, nil
}

// ready makes the training programs SPMD programs over the runtime's first NumReplicas devices,
// the first time a step runs. It is not done by New, so that a Stepper for more replicas than the
// runtime has can still trace its programs (StableHLO).
func (s *Stepper) ready() error {
	n := s.cfg.NumReplicas
	if s.spmdReady || n == 1 {
		return nil
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
func (s *Stepper) Compilations() (int, float64) { return len(s.compiled), s.compileSeconds }

// run executes a program, recording a compilation the first time a graph runs.
func (s *Stepper) run(e *mlctx.Exec, args []*tensors.Tensor) ([]*tensors.Tensor, error) {
	start := time.Now()
	outs, g, err := e.ExecWithGraph(tensorArgs(args)...)
	if err != nil {
		return nil, err
	}
	if !s.compiled[g.GraphId()] {
		s.compiled[g.GraphId()] = true
		s.compileSeconds += time.Since(start).Seconds()
	}
	return outs, nil
}

// PoisonNextStep makes the gradients of the next Step non-finite (they are divided by NaN in the
// update program), so tests exercise the in-graph skip with real device programs: the update is
// skipped and Result.Skipped set. It is a fault-injection hook, not for production use.
func (s *Stepper) PoisonNextStep() { s.poison = true }

// OptimizerStep is the number of updates applied so far.
func (s *Stepper) OptimizerStep() int { return s.t }

// SetOptimizerStep restores the update count (for resuming).
func (s *Stepper) SetOptimizerStep(t int) { s.t = t }

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
// row and column second moments for matrices, or a full one for vectors.
func (s *Stepper) stateShapes(p models.Param) []stateShape {
	f32 := func(dims ...int) shapes.Shape { return shapes.Make(dtypes.Float32, dims...) }
	if s.cfg.Optimizer.Name == "adamw" {
		return []stateShape{{"adamw_m", f32(p.Shape...)}, {"adamw_v", f32(p.Shape...)}}
	}
	if len(p.Shape) >= 2 {
		d := p.Shape
		row := append([]int(nil), d[:len(d)-1]...)
		col := append(append([]int(nil), d[:len(d)-2]...), d[len(d)-1])
		return []stateShape{{"adafactor_row", f32(row...)}, {"adafactor_col", f32(col...)}}
	}
	return []stateShape{{"adafactor_v", f32(p.Shape...)}}
}

// batchInputs converts a host batch to the gradient/eval programs' leading inputs:
// input_ids, attention_mask, [token_type_ids], labels ([size, seq] for a causal LM, [size] for a
// classifier).
func (s *Stepper) batchInputs(b *data.Batch) []*tensors.Tensor {
	in := []*tensors.Tensor{
		tensors.FromFlatDataAndDimensions(b.InputIDs, b.Size, b.SeqLen),
		tensors.FromFlatDataAndDimensions(b.AttentionMask, b.Size, b.SeqLen),
	}
	if b.TokenTypeIDs != nil {
		in = append(in, tensors.FromFlatDataAndDimensions(b.TokenTypeIDs, b.Size, b.SeqLen))
	}
	if s.causal {
		in = append(in, tensors.FromFlatDataAndDimensions(b.Labels, b.Size, b.SeqLen))
	} else {
		in = append(in, tensors.FromFlatDataAndDimensions(b.Labels, b.Size))
	}
	return in
}

// splitBatch maps a program's leading inputs to a models.Batch.
func splitBatch(nodes []*graph.Node, hasTokenTypes bool) (models.Batch, []*graph.Node) {
	b := models.Batch{InputIDs: nodes[0], AttentionMask: nodes[1]}
	k := 2
	if hasTokenTypes {
		b.TokenTypeIDs = nodes[k]
		k++
	}
	b.Labels = nodes[k]
	return b, nodes[k+1:]
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

// Step runs one optimizer step: micro[a][r] is micro-batch a of replica r (A accumulation steps
// × N replicas). lr is the learning rate of this update.
//
// The N replicas run as one SPMD program on N devices. Each micro-batch but the last runs the
// gradient program, which adds every replica's gradients into that replica's accumulator on its
// device; the last runs the train program, which adds its gradients (and the accumulators), sums
// gradients, loss sum and loss-term count over the replicas with one in-graph all-reduce, and
// applies the same update on every replica (torch_xla's xm.optimizer_step). Only scalars (loss
// sums, counts, the norm) come back to the host.
func (s *Stepper) Step(ctx context.Context, micro [][]*data.Batch, lr float64) (res Result, err error) {
	defer xla.Recover(&err, "step.Step")
	n := s.cfg.NumReplicas
	if len(micro) == 0 {
		return Result{}, fmt.Errorf("step.Step: no micro-batches")
	}
	for a, replicas := range micro {
		if len(replicas) != n {
			return Result{}, fmt.Errorf("step.Step: micro-batch %d has %d shards for %d replicas", a, len(replicas), n)
		}
	}
	if err := s.ready(); err != nil {
		return Result{}, err
	}
	var acc [][]*tensors.Tensor // per replica: its gradient sums so far, on its device
	carrySum, carryTerms := make([]float64, n), make([]float64, n)
	defer func() {
		for _, ts := range acc {
			for _, t := range ts {
				t.FinalizeAll()
			}
		}
	}()
	last := len(micro) - 1
	for a, replicas := range micro[:last] {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		var args []*tensors.Tensor
		for r, b := range replicas {
			args = append(args, s.batchInputs(b)...)
			if acc != nil {
				args = append(args, acc[r]...)
			}
		}
		outs, err := s.run(s.grad, args)
		if err != nil {
			return Result{}, fmt.Errorf("gradients of micro-batch %d: %w", a, err)
		}
		if acc == nil {
			acc = make([][]*tensors.Tensor, n)
		}
		per := len(outs) / n
		for r := range n {
			o := outs[r*per : (r+1)*per]
			carrySum[r] += scalar(o[0])
			carryTerms[r] += scalar(o[1])
			for _, t := range acc[r] {
				t.FinalizeAll()
			}
			acc[r] = o[2:]
		}
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	if s.poison {
		s.poison = false
		acc = s.poisoned(acc)
	}
	var args []*tensors.Tensor
	for r, b := range micro[last] {
		args = append(args, s.batchInputs(b)...)
		args = append(args, s.hostScalars(lr)...)
		if acc != nil {
			args = append(args, tensors.FromScalar(float32(carrySum[r])), tensors.FromScalar(float32(carryTerms[r])))
			args = append(args, acc[r]...)
		}
	}
	outs, err := s.run(s.train, args)
	if err != nil {
		return Result{}, fmt.Errorf("train step: %w", err)
	}
	// Every replica returns the same all-reduced values; replica 0's are read, the rest freed.
	per := len(outs) / n
	for _, t := range outs[per:] {
		t.FinalizeAll()
	}
	res = Result{LossSum: scalar(outs[0]), Count: scalar(outs[1]), GradNorm: scalar(outs[2]), Skipped: scalar(outs[3]) == 0}
	if res.Count > 0 {
		res.Loss = res.LossSum / res.Count
	}
	if !res.Skipped {
		s.t++
	}
	return res, nil
}

// poisoned makes replica 0's first gradient accumulator NaN (zero accumulators are made for a step
// without accumulation), so that the all-reduced gradients are not finite while the loss is not
// touched (PoisonNextStep).
func (s *Stepper) poisoned(acc [][]*tensors.Tensor) [][]*tensors.Tensor {
	if acc == nil {
		acc = make([][]*tensors.Tensor, s.cfg.NumReplicas)
		for r := range acc {
			for _, p := range s.params {
				acc[r] = append(acc[r], tensors.FromShape(shapes.Make(dtypes.Float32, p.Shape...)))
			}
		}
	}
	p := s.params[0]
	nan := make([]float32, shapes.Make(dtypes.Float32, p.Shape...).Size())
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	acc[0][0].FinalizeAll()
	acc[0][0] = tensors.FromFlatDataAndDimensions(nan, p.Shape...)
	return acc
}

// hostScalars computes, in float64 as torch does on the host, the per-step scalars of the update
// for step t+1, and passes them to the graph as float32: [lr, decay, a, b, c].
func (s *Stepper) hostScalars(lr float64) []*tensors.Tensor {
	o := s.cfg.Optimizer
	t := float64(s.t + 1)
	var a, b, c float64
	switch o.Name {
	case "adamw":
		a = lr / (1 - math.Pow(o.Beta1, t))     // step_size
		b = math.Sqrt(1 - math.Pow(o.Beta2, t)) // bias_correction2_sqrt
		c = o.Epsilon
	case "adafactor":
		a = lr
		b = 1 - math.Pow(t, -0.8) // beta2t with decay_rate -0.8
	}
	vals := []float64{lr, 1 - lr*o.WeightDecay, a, b, c}
	out := make([]*tensors.Tensor, len(vals))
	for i, v := range vals {
		out[i] = tensors.FromScalar(float32(v))
	}
	return out
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
