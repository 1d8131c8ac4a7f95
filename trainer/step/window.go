package step

import (
	"fmt"
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads better unqualified.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/gotpu/gotpu/xla"
)

// Per-step optimizer scalars without a per-step host read.
//
// torch computes AdamW's step_size = lr / (1 - β1^t) and bias_correction2_sqrt = sqrt(1 - β2^t)
// in float64 on the host, where t is the optimizer's step count: applied updates, which lags the
// global step by the updates skipped for non-finite gradients — something only the device knows
// until the host reads it. Instead of reading t before every update, the host uploads, whenever
// it reads (Collect, ExportState), a window table: for each of the next W steps j (global step
// g0+j, learning rate lr(g0+j)) and each number k ≤ j of updates skipped since the window opened
// (so t = t0+j-k+1), the five float32 scalars [lr, 1-lr·wd, a, b, c] computed exactly as before,
// in float64 and rounded once. The device keeps j, k and its consecutive-skip count in an int32[3]
// counter it updates itself, and selects row j·W+k with a one-hot mask (a select and a sum of one
// value with zeros: bitwise the table's value). So the scalars are bitwise those the host computed
// per step before, TestWindowScalarsExact checks it, and a window of W steps costs W² rows of 5
// float32 uploaded once per read (MaxWindow 128: 320 KiB). A window that fills before the host
// reads makes Dispatch read first.

// window is the open window of dispatched steps.
type window struct {
	lr func(globalStep int) float64 // the schedule: learning rate of the update at 0-based global step
	g0 int                          // 0-based global step of the window's first step
	t0 int                          // optimizer step count when the window opened
	j  int                          // steps dispatched in this window
	// table and ctr are per replica, on that replica's device: the [W·W, 5] float32 scalars and
	// the int32[3] counter {j, k, consecutive skips}, replaced by every train execution.
	table, ctr []*tensors.Tensor
}

// updateScalarsF64 are the per-step scalars of the update for optimizer step t at learning rate
// lr, in float64 as torch computes them: [lr, decay, a, b, c].
func (s *Stepper) updateScalarsF64(lr float64, t int) [replicatedScalars]float64 {
	o := s.cfg.Optimizer
	tf := float64(t)
	var a, b, c float64
	switch o.Name {
	case "adamw":
		a = lr / (1 - math.Pow(o.Beta1, tf))     // step_size
		b = math.Sqrt(1 - math.Pow(o.Beta2, tf)) // bias_correction2_sqrt
		c = o.Epsilon
	case "adafactor":
		a = lr
		b = 1 - math.Pow(tf, -0.8) // beta2t with decay_rate -0.8
	}
	return [replicatedScalars]float64{lr, 1 - lr*o.WeightDecay, a, b, c}
}

// windowTable is the table of a window opening at 0-based global step g0 with optimizer step
// count t0: row j·W+k holds the float32 scalars of step g0+j after k skipped updates in the
// window; rows with k > j cannot be reached and stay zero.
func (s *Stepper) windowTable(g0, t0 int, lr func(int) float64) []float32 {
	w := s.cfg.window()
	out := make([]float32, w*w*replicatedScalars)
	for j := range w {
		l := lr(g0 + j)
		for k := 0; k <= j; k++ {
			v := s.updateScalarsF64(l, t0+j-k+1)
			row := out[(j*w+k)*replicatedScalars:]
			for i, x := range v {
				row[i] = float32(x)
			}
		}
	}
	return out
}

// Begin opens the window of steps Dispatch queues: the next dispatched step is 0-based global
// step globalStep, and lr gives the learning rate of each step. Nothing may be pending.
func (s *Stepper) Begin(globalStep int, lr func(globalStep int) float64) (err error) {
	defer xla.Recover(&err, "step.Begin")
	if len(s.pending) > 0 {
		return fmt.Errorf("step.Begin: %d dispatched steps not read yet (Collect first)", len(s.pending))
	}
	if lr == nil {
		return fmt.Errorf("step.Begin: no learning-rate schedule")
	}
	if globalStep < 0 {
		return fmt.Errorf("step.Begin: global step %d is negative", globalStep)
	}
	if err := s.ready(); err != nil {
		return err
	}
	s.win.lr, s.win.g0 = lr, globalStep
	return s.openWindow()
}

// openWindow uploads a new table and counters at the current state: the optimizer step count
// and consecutive skips as of the last read, 0-based global step win.g0.
func (s *Stepper) openWindow() error {
	w := s.cfg.window()
	s.win.t0, s.win.j = s.t, 0
	table := s.windowTable(s.win.g0, s.win.t0, s.win.lr)
	s.releaseWindow()
	for r := range s.cfg.NumReplicas {
		tt := tensors.FromFlatDataAndDimensions(table, w*w, replicatedScalars)
		ct := tensors.FromFlatDataAndDimensions([]int32{0, 0, int32(min(s.consec, math.MaxInt32))}, 3)
		if err := s.rt.Transfer(r, tt, ct); err != nil {
			return fmt.Errorf("step: window table: %w", err)
		}
		s.win.table = append(s.win.table, tt)
		s.win.ctr = append(s.win.ctr, ct)
	}
	return nil
}

// releaseWindow frees the window's device tensors (nothing pending uses them).
func (s *Stepper) releaseWindow() {
	for _, ts := range [][]*tensors.Tensor{s.win.table, s.win.ctr} {
		for _, t := range ts {
			if t != nil {
				t.FinalizeAll()
			}
		}
	}
	s.win.table, s.win.ctr = nil, nil
}

// windowScalars selects, in the graph, the row of table (the [W·W, 5] window table) for the
// counter ctr = {j, k, consecutive skips} and returns its five scalars.
func windowScalars(table, ctr *Node, w int) updateScalars {
	g := table.Graph()
	j := Reshape(Slice(ctr, AxisRange(0, 1)))
	k := Reshape(Slice(ctr, AxisRange(1, 2)))
	idx := Add(Mul(j, Scalar(g, dtypes.Int32, w)), k)
	rows := table.Shape().Dimensions[0]
	mask := Equal(Iota(g, shapes.Make(dtypes.Int32, rows), 0), idx)
	mask = BroadcastToDims(InsertAxes(mask, 1), rows, replicatedScalars)
	row := ReduceSum(Where(mask, table, ZerosLike(table)), 0)
	at := func(i int) *Node { return Reshape(Slice(row, AxisRange(i, i+1))) }
	return updateScalars{lr: at(0), decay: at(1), a: at(2), b: at(3), c: at(4)}
}

// nextCounter is the counter after a step that applied its update or not (apply is boolean):
// j+1; k+1 and consecutive+1 when skipped, consecutive 0 when applied.
func nextCounter(ctr, apply *Node) *Node {
	g := ctr.Graph()
	one := Scalar(g, dtypes.Int32, 1)
	skipped := ConvertDType(LogicalNot(apply), dtypes.Int32)
	j := Reshape(Slice(ctr, AxisRange(0, 1)))
	k := Reshape(Slice(ctr, AxisRange(1, 2)))
	c := Reshape(Slice(ctr, AxisRange(2, 3)))
	nc := Where(apply, ZerosLike(c), Add(c, one))
	return Concatenate([]*Node{InsertAxes(Add(j, one), 0), InsertAxes(Add(k, skipped), 0), InsertAxes(nc, 0)}, 0)
}

// allowed is false once the counter says the consecutive-skip limit was reached: the device then
// applies nothing until the host, at its next read, stops the run (Config.MaxConsecutiveNonfinite).
func (s *Stepper) allowed(ctr *Node) *Node {
	g := ctr.Graph()
	limit := s.cfg.MaxConsecutiveNonfinite
	if limit <= 0 {
		return Const(g, true)
	}
	c := Reshape(Slice(ctr, AxisRange(2, 3)))
	return LessThan(c, Scalar(g, dtypes.Int32, limit))
}
