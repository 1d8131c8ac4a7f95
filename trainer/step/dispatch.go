package step

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/xla"
)

// Result is what one optimizer step reports.
type Result struct {
	// GlobalStep is the step's number (trainer_state's global_step after it).
	GlobalStep int
	// Loss is the mean loss over every non-ignored loss term of the step (all micro-batches and
	// replicas): what Hugging Face Trainer accumulates as tr_loss for the step.
	Loss float64
	// LossSum and Count are its numerator and denominator.
	LossSum, Count float64
	// GradNorm is the global L2 norm of the averaged gradients before clipping (HF's grad_norm).
	GradNorm float64
	// Skipped is true when the update was not applied: the gradients were not finite, or the
	// consecutive-skip limit had been reached (Config.MaxConsecutiveNonfinite).
	Skipped bool
	// Start and End are when the step's programs started and finished on the device, observed by
	// the runtime's executor; CompileSeconds is the part of that spent tracing and compiling.
	Start, End     time.Time
	CompileSeconds float64
}

// DeviceBatch is one global batch's shards on their replicas' devices: replica r's inputs on
// device r. TransferBatch makes it, on any goroutine (the loader's), while steps execute.
type DeviceBatch struct {
	inputs [][]*tensors.Tensor // per replica
	// Samples and Tokens count the examples and non-padding tokens of every shard.
	Samples, Tokens int
}

// Release frees the device buffers. A dispatched batch is released by its step.
func (b *DeviceBatch) Release() {
	if b == nil {
		return
	}
	for _, in := range b.inputs {
		for _, t := range in {
			t.FinalizeAll()
		}
	}
	b.inputs = nil
}

// TransferBatch puts shards[r] on replica r's device. It is safe to call concurrently with
// Dispatch and with running steps (it touches only its own tensors).
func (s *Stepper) TransferBatch(shards []*data.Batch) (db *DeviceBatch, err error) {
	defer xla.Recover(&err, "step.TransferBatch")
	if len(shards) != s.cfg.NumReplicas {
		return nil, fmt.Errorf("step.TransferBatch: %d shards for %d replicas", len(shards), s.cfg.NumReplicas)
	}
	db = &DeviceBatch{}
	for r, b := range shards {
		in, err := s.batchInputs(b)
		if err != nil {
			db.Release()
			return nil, fmt.Errorf("step.TransferBatch: replica %d: %w", r, err)
		}
		db.inputs = append(db.inputs, in)
		db.Samples += b.Size
		db.Tokens += b.Tokens()
		if err := s.rt.Transfer(r, in...); err != nil {
			db.Release()
			return nil, fmt.Errorf("step.TransferBatch: replica %d: %w", r, err)
		}
	}
	return db, nil
}

// Pending is a dispatched step: its results stay on the device until a read (Collect).
type Pending struct {
	GlobalStep int
	exec       *xla.Execution
	// out is replica 0's loss sum, count, norm and applied flag, set by the execution.
	out     []*tensors.Tensor
	compile float64
}

// Done is closed when the step has finished on the device: a completion event that costs no
// host read (the progress bar uses it).
func (p *Pending) Done() <-chan struct{} { return p.exec.Done() }

// Dispatch queues one optimizer step over the micro-batches of micro (gradient accumulation:
// one DeviceBatch per micro-batch) and returns at once, before the device has run it. It
// transfers nothing: the batches are on their devices already (TransferBatch) and the scalars
// and counters of the window are (Begin). Steps run in dispatch order; their results are read
// by Collect. The batches belong to the step from here on: it releases them.
//
// The N replicas run as one SPMD program on N devices. Each micro-batch but the last runs the
// gradient program, which adds every replica's gradients, loss sum and loss-term count to that
// replica's accumulators on its device; the last runs the train program, which adds its own,
// sums gradients, loss sum and loss-term count over the replicas with one in-graph all-reduce,
// and applies the same update on every replica (torch_xla's xm.optimizer_step).
func (s *Stepper) Dispatch(ctx context.Context, micro []*DeviceBatch) (p *Pending, err error) {
	defer xla.Recover(&err, "step.Dispatch")
	if s.win.lr == nil {
		return nil, fmt.Errorf("step.Dispatch: no window open (Begin first)")
	}
	if len(micro) == 0 {
		return nil, fmt.Errorf("step.Dispatch: no micro-batches")
	}
	for a, db := range micro {
		if db == nil || len(db.inputs) != s.cfg.NumReplicas {
			return nil, fmt.Errorf("step.Dispatch: micro-batch %d is not a batch for %d replicas", a, s.cfg.NumReplicas)
		}
		for r, in := range db.inputs {
			for _, t := range in {
				if !t.IsOnDevice(backends.DeviceNum(r)) {
					return nil, fmt.Errorf("step.Dispatch: micro-batch %d replica %d is not on device %d (TransferBatch first)", a, r, r)
				}
			}
		}
	}
	if s.win.j == s.cfg.window() {
		// The window's table is used up: read (one blocking read) and open the next.
		if err := s.read(ctx, "window full", nil); err != nil {
			return nil, err
		}
	}
	p = &Pending{GlobalStep: s.win.g0 + s.win.j + 1}
	poison := s.poison
	s.poison = false
	e, err := s.stream.Dispatch(ctx, fmt.Sprintf("train step %d", p.GlobalStep), nil, func() error {
		return s.execute(p, micro, poison)
	})
	if err != nil {
		for _, db := range micro {
			db.Release()
		}
		return nil, err
	}
	p.exec = e
	s.pending = append(s.pending, p)
	s.win.j++
	return p, nil
}

// execute runs a dispatched step's programs; it runs on the runtime's executor goroutine, after
// every step dispatched before it, so the window's counters it reads are those the previous
// step wrote.
func (s *Stepper) execute(p *Pending, micro []*DeviceBatch, poison bool) error {
	n := s.cfg.NumReplicas
	var acc [][]*tensors.Tensor // per replica: loss sum (hi, lo), term count and gradient sums so far
	defer func() {
		for _, db := range micro {
			db.Release()
		}
		for _, ts := range acc {
			for _, t := range ts {
				t.FinalizeAll()
			}
		}
	}()
	last := len(micro) - 1
	for a, db := range micro[:last] {
		var args []*tensors.Tensor
		if s.auto {
			specs, err := s.autoInputSpecs(ranks(db.inputs[0]), 0, acc != nil)
			if err != nil {
				return err
			}
			s.grad.WithInputShardingSpecs(specs...)
		}
		for r := range n {
			args = append(args, db.inputs[r]...)
			if s.fsdp != nil && !s.auto {
				args = append(args, s.fsdp.idx[r])
			}
			if acc != nil {
				args = append(args, acc[r]...)
			}
		}
		outs, secs, err := s.run(s.grad, args)
		if err != nil {
			return fmt.Errorf("gradients of micro-batch %d: %w", a, err)
		}
		p.compile += secs
		if acc == nil {
			acc = make([][]*tensors.Tensor, n)
		}
		per := len(outs) / n
		for r := range n {
			for _, t := range acc[r] {
				t.FinalizeAll()
			}
			acc[r] = outs[r*per : (r+1)*per]
		}
	}
	if poison {
		acc = s.poisoned(acc)
	}
	if s.auto {
		specs, err := s.autoInputSpecs(ranks(micro[last].inputs[0]), 2, acc != nil)
		if err != nil {
			return err
		}
		s.train.WithInputShardingSpecs(specs...)
	}
	var args []*tensors.Tensor
	for r := range n {
		args = append(args, micro[last].inputs[r]...)
		args = append(args, s.win.table[r], s.win.ctr[r])
		if s.fsdp != nil && !s.auto {
			args = append(args, s.fsdp.idx[r])
		}
		if acc != nil {
			args = append(args, acc[r]...)
		}
	}
	outs, secs, err := s.run(s.train, args)
	if err != nil {
		return fmt.Errorf("train step: %w", err)
	}
	p.compile += secs
	// Every replica returns the same all-reduced values: replica 0's are kept for the host, the
	// rest freed; each replica's new counter replaces its old one on its device.
	per := len(outs) / n
	for r := range n {
		o := outs[r*per : (r+1)*per]
		s.win.ctr[r].FinalizeAll()
		s.win.ctr[r] = o[4]
		if r == 0 {
			p.out = o[:4]
			continue
		}
		for _, t := range o[:4] {
			t.FinalizeAll()
		}
	}
	return nil
}

// poisoned makes replica 0's first gradient accumulator NaN (zero accumulators are made for a step
// without accumulation), so that the all-reduced gradients are not finite while the loss is not
// touched (PoisonNextStep). A test hook: its tensors are made on the host.
func (s *Stepper) poisoned(acc [][]*tensors.Tensor) [][]*tensors.Tensor {
	if acc == nil {
		acc = make([][]*tensors.Tensor, s.cfg.NumReplicas)
		for r := range acc {
			acc[r] = append(acc[r], tensors.FromScalar(float32(0)), tensors.FromScalar(float32(0)), tensors.FromScalar(float32(0)))
			for i := range s.params {
				acc[r] = append(acc[r], tensors.FromShape(shapes.Make(dtypes.Float32, s.accShape(i)...)))
			}
		}
	}
	dims := s.accShape(0)
	nan := make([]float32, shapes.Make(dtypes.Float32, dims...).Size())
	for i := range nan {
		nan[i] = float32(math.NaN())
	}
	acc[0][carryScalars].FinalizeAll()
	acc[0][carryScalars] = tensors.FromFlatDataAndDimensions(nan, dims...)
	return acc
}

// Collect reads the results of every step dispatched so far, in order — one blocking read however
// many steps that is — and opens the next window. It also returns results read earlier by a read
// that Dispatch or ExportState made.
func (s *Stepper) Collect(ctx context.Context) (res []Result, err error) {
	defer xla.Recover(&err, "step.Collect")
	if err := s.read(ctx, "collect", nil); err != nil {
		return nil, err
	}
	res, s.collected = s.collected, nil
	return res, nil
}

// read is the one blocking read of a sync point: it waits for every dispatched step, copies their
// results (and runs extra, on the executor, in the same read), advances the host's copy of the
// optimizer step count and consecutive skips, and opens the next window.
func (s *Stepper) read(ctx context.Context, why string, extra func() error) error {
	pend := s.pending
	vals := make([][4]float64, len(pend))
	err := s.stream.Read(ctx, why, func() error {
		for i, p := range pend {
			if p.out == nil {
				continue // its execution failed: Read reports that failure
			}
			for k, t := range p.out {
				vals[i][k] = scalar(t)
			}
			p.out = nil
		}
		if extra != nil {
			return extra()
		}
		return nil
	})
	s.pending = nil
	if err != nil {
		for _, p := range pend {
			for _, t := range p.out {
				t.FinalizeAll()
			}
		}
		return err
	}
	for i, p := range pend {
		v := vals[i]
		start, end := p.exec.Times()
		res := Result{GlobalStep: p.GlobalStep, LossSum: v[0], Count: v[1], GradNorm: v[2], Skipped: v[3] == 0,
			Start: start, End: end, CompileSeconds: p.compile}
		if res.Count > 0 {
			res.Loss = res.LossSum / res.Count
		}
		if res.Skipped {
			s.consec++
		} else {
			s.t++
			s.consec = 0
		}
		s.collected = append(s.collected, res)
	}
	if s.win.lr == nil {
		return nil
	}
	s.win.g0 += s.win.j
	return s.openWindow()
}

// TakeCollected returns the results read by a read that Dispatch (a full window) or ExportState
// made, not yet returned by Collect, without reading.
func (s *Stepper) TakeCollected() []Result {
	res := s.collected
	s.collected = nil
	return res
}

// Pending returns how many dispatched steps have not been read yet.
func (s *Stepper) Pending() int { return len(s.pending) }

// Step runs one optimizer step synchronously at learning rate lr: micro[a][r] is micro-batch a
// of replica r (A accumulation steps × N replicas). It transfers the batches, dispatches the
// step and reads its result: the same programs as the asynchronous path, for callers that want
// one result per call (tests, benchmarks). Nothing may be pending.
func (s *Stepper) Step(ctx context.Context, micro [][]*data.Batch, lr float64) (res Result, err error) {
	defer xla.Recover(&err, "step.Step")
	if len(s.pending) > 0 || len(s.collected) > 0 {
		return Result{}, fmt.Errorf("step.Step: %d dispatched steps not collected", len(s.pending)+len(s.collected))
	}
	if len(micro) == 0 {
		return Result{}, fmt.Errorf("step.Step: no micro-batches")
	}
	for a, replicas := range micro {
		if len(replicas) != s.cfg.NumReplicas {
			return Result{}, fmt.Errorf("step.Step: micro-batch %d has %d shards for %d replicas", a, len(replicas), s.cfg.NumReplicas)
		}
	}
	if err := s.Begin(0, func(int) float64 { return lr }); err != nil {
		return Result{}, err
	}
	dbs := make([]*DeviceBatch, 0, len(micro))
	for _, shards := range micro {
		db, err := s.TransferBatch(shards)
		if err != nil {
			for _, d := range dbs {
				d.Release()
			}
			return Result{}, err
		}
		dbs = append(dbs, db)
	}
	if _, err := s.Dispatch(ctx, dbs); err != nil {
		return Result{}, err
	}
	out, err := s.Collect(ctx)
	if err != nil {
		return Result{}, err
	}
	return out[0], nil
}

// accShape is the shape of parameter i's gradient accumulator on a replica: the parameter's, or
// its shard's in an FSDP step.
func (s *Stepper) accShape(i int) []int {
	if s.fsdp != nil {
		return s.fsdp.layouts[i].ShardShape
	}
	return s.params[i].Shape
}

// ranks are the ranks of a replica's batch tensors.
func ranks(ts []*tensors.Tensor) []int {
	out := make([]int, len(ts))
	for i, t := range ts {
		out[i] = t.Shape().Rank()
	}
	return out
}
