package step

import (
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/distributed"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	. "github.com/gomlx/gomlx/pkg/core/graph" //nolint:revive // graph code reads better unqualified.
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	mlctx "github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/gotpu/gotpu/internal/shard"
	"github.com/gotpu/gotpu/xla"
)

// Mesh axis names of an FSDP step: parameters are sharded over "fsdp" and replicated over "data";
// the batch is split over both.
const (
	DataAxis = "data"
	FSDPAxis = "fsdp"
)

// FSDP configures fully sharded data parallelism (Config.FSDP): HF's fsdp="full_shard" (Data 1)
// or "hybrid_shard" (Data groups of Shard devices) with the XLA FSDPv2 semantics.
type FSDP struct {
	// Data × Shard is the device mesh; it must equal Config.NumReplicas. Device r sits at data
	// coordinate r / Shard and fsdp coordinate r % Shard (row-major, as GoMLX numbers meshes).
	Data, Shard int
	// MinNumParams keeps tensors with fewer elements replicated (fsdp_config min_num_params).
	MinNumParams int64
}

// fsdpPlan is an FSDP stepper's layout: the mesh, each parameter's layout over the fsdp axis
// (internal/shard) and its sharding spec, from which its optimizer state's are derived
// (stateSpec).
type fsdpPlan struct {
	cfg     FSDP
	mesh    *distributed.DeviceMesh
	layouts []shard.Layout
	specs   []*distributed.ShardingSpec
	// idx holds, per replica and on its device, the replica's fsdp coordinate (int32 scalar):
	// where its shard starts is idx × the shard's size. GoMLX has no replica-id operation.
	idx []*tensors.Tensor
	// frozen are a models.Frozen model's frozen parameters (a LoRA adapter's base), laid out by
	// the same rule (fsdp_frozen.go): the programs gather the sharded ones for the forward and
	// backward pass and never update them, so they have no gradient and no optimizer state.
	frozen []frozenParam
}

// newFSDPPlan validates cfg for the stepper's parameters and lays them out.
func (s *Stepper) newFSDPPlan(cfg FSDP) (*fsdpPlan, error) {
	if cfg.Data < 1 || cfg.Shard < 1 || cfg.Data*cfg.Shard != s.cfg.NumReplicas {
		return nil, fmt.Errorf("step.Config.FSDP: mesh %d × %d does not cover Config.NumReplicas %d devices", cfg.Data, cfg.Shard, s.cfg.NumReplicas)
	}
	if cfg.MinNumParams < 0 {
		return nil, fmt.Errorf("step.Config.FSDP.MinNumParams: %d is negative", cfg.MinNumParams)
	}
	if s.cfg.Optimizer.Name != "adamw" && cfg.Shard > 1 && s.rt.Kind() == xla.DeviceGo {
		// Adafactor's factored moments are means over a parameter's rows and columns: on a shard
		// they would need their own collectives, which the written-out SPMD form on gotpu's
		// backend (fsdpTrainGraph) does not build. On a PJRT plugin the step is the AutoSharding
		// program (fsdp_auto.go), whose partitioner adds them.
		return nil, fmt.Errorf("step.Config.FSDP: optimizer %q is not supported with FSDP on gotpu's backend (adamw is; a PJRT plugin runs both)", s.cfg.Optimizer.Name)
	}
	mesh, err := distributed.NewDeviceMesh([]int{cfg.Data, cfg.Shard}, []string{DataAxis, FSDPAxis})
	if err != nil {
		return nil, err
	}
	f := &fsdpPlan{cfg: cfg, mesh: mesh}
	for _, p := range s.params {
		l, spec, err := f.layout(p.Name, p.Shape)
		if err != nil {
			return nil, err
		}
		f.layouts = append(f.layouts, l)
		f.specs = append(f.specs, spec)
	}
	if err := s.planFrozen(f); err != nil {
		return nil, err
	}
	return f, nil
}

// layout is internal/shard's layout of a tensor over the plan's fsdp axis and its sharding spec.
func (f *fsdpPlan) layout(name string, shape []int) (shard.Layout, *distributed.ShardingSpec, error) {
	l, err := shard.Choose(name, shape, f.cfg.Shard, f.cfg.MinNumParams)
	if err != nil {
		return shard.Layout{}, nil, fmt.Errorf("step.Config.FSDP: %w", err)
	}
	axes := make([]distributed.AxisSpec, len(shape))
	if l.Sharded() {
		axes[l.Dim] = distributed.AxisSpec{FSDPAxis}
	}
	spec, err := distributed.NewShardingSpec(f.mesh, axes...)
	if err != nil {
		return shard.Layout{}, nil, fmt.Errorf("step.Config.FSDP: %s: %w", name, err)
	}
	return l, spec, nil
}

// shardVariables gives every parameter and its optimizer state its sharding spec (stateSpec), so
// GoMLX splits their values into per-device shards at the next SPMD execution and the step's
// outputs replace the shards.
func (s *Stepper) shardVariables() error {
	c := s.model.Context()
	for i, p := range s.params {
		if err := s.variable(c, p).SetShardingSpec(s.fsdp.specs[i]); err != nil {
			return fmt.Errorf("step: sharding %s: %w", p.Name, err)
		}
		for _, st := range s.stateShapes(p) {
			v := c.GetVariableByScopeAndName(optimizerScope(st.kind, p), p.Var())
			spec, err := stateSpec(s.fsdp.mesh, s.fsdp.layouts[i], s.fsdp.specs[i], st)
			if err == nil {
				err = v.SetShardingSpec(spec)
			}
			if err != nil {
				return fmt.Errorf("step: sharding %s: %w", v.ScopeAndName(), err)
			}
		}
	}
	return s.shardFrozen()
}

// stateSpec is the sharding spec of optimizer state st of a parameter laid out as l (spec its
// parameter's): a state of the parameter's shape (AdamW's moments, Adafactor's unfactored
// second moment of a vector) shares spec. Adafactor's factored second moments of a matrix
// [a…, m, n] are reductions of it: the row state [a…, m] (the mean over the last dimension) and
// the column state [a…, n] (over the second-to-last). Each keeps the parameter's sharded
// dimension where it keeps that dimension (a dimension of a… or m for the rows, of a… or n —
// then at index rank−2 — for the columns) and is replicated where it reduced the sharded
// dimension away: each device then holds the whole means, which the partitioner all-reduces over
// the fsdp axis. Any other state is replicated.
func stateSpec(mesh *distributed.DeviceMesh, l shard.Layout, spec *distributed.ShardingSpec, st stateShape) (*distributed.ShardingSpec, error) {
	rank := len(l.Shape)
	if slices.Equal(st.shape.Dimensions, l.Shape) {
		return spec, nil
	}
	axes := make([]distributed.AxisSpec, st.shape.Rank())
	dim := -1 // the sharded dimension's index in the state
	if l.Sharded() && rank >= 2 {
		switch {
		case st.kind == "adafactor_row" && l.Dim < rank-1:
			dim = l.Dim
		case st.kind == "adafactor_col" && l.Dim < rank-2:
			dim = l.Dim
		case st.kind == "adafactor_col" && l.Dim == rank-1:
			dim = rank - 2
		}
	}
	if dim >= 0 {
		if dim >= len(axes) || st.shape.Dimensions[dim] != l.Shape[l.Dim] {
			return nil, fmt.Errorf("state %s %s does not keep dimension %d of its parameter %v", st.kind, st.shape, l.Dim, l.Shape)
		}
		axes[dim] = distributed.AxisSpec{FSDPAxis}
	}
	return distributed.NewShardingSpec(mesh, axes...)
}

// readyFSDP configures the gradient and train programs as SPMD programs over the mesh and puts
// each replica's fsdp coordinate on its device.
func (s *Stepper) readyFSDP() error {
	f := s.fsdp
	if have := s.rt.NumDevices(); s.cfg.NumReplicas > have {
		return fmt.Errorf("step.Config.NumReplicas: %d replicas, but the runtime has %d devices (xla.Config.NumDevices)", s.cfg.NumReplicas, have)
	}
	// The frozen base is split first: the whole values go, so no device keeps the whole base.
	if err := s.splitFrozen(); err != nil {
		return err
	}
	if s.auto {
		s.autoExec(s.grad)
		s.autoExec(s.train)
		s.autoExec(s.eval)
		if err := s.shardVariables(); err != nil {
			return err
		}
		s.spmdReady = true
		return nil
	}
	s.grad.SPMD(f.mesh)
	s.train.SPMD(f.mesh)
	if err := s.shardVariables(); err != nil {
		return err
	}
	for r := range s.cfg.NumReplicas {
		t := tensors.FromScalar(int32(r % f.cfg.Shard))
		if err := s.rt.Transfer(r, t); err != nil {
			return fmt.Errorf("step: fsdp coordinate of replica %d: %w", r, err)
		}
		f.idx = append(f.idx, t)
	}
	s.spmdReady = true
	return nil
}

// spread puts this replica's shard x (layout l) in row idx of a tensor [n, shard…] whose other
// rows are zeros: the broadcast shard times a one-hot row mask. gotpu's backend recognises this
// product under the all-reduce and gathers the rows natively with the same arithmetic, never
// materialising the product (xla/internal/gobackend/gather.go; a Where would not be recognised).
// x·1 is x and x·0 is 0 for finite x; parameters are finite, as the step never applies a
// non-finite update (a non-finite one would make the gathered tensor, and so the step's
// gradients, non-finite: skipped).
func spread(x *Node, l shard.Layout, idx *Node) *Node {
	g := x.Graph()
	n := l.N
	dims := append([]int{n}, x.Shape().Dimensions...)
	mine := ConvertDType(Equal(Iota(g, shapes.Make(dtypes.Int32, n), 0), idx), x.DType())
	mask := Reshape(mine, append([]int{n}, ones(x.Rank())...)...)
	return Mul(BroadcastToDims(InsertAxes(x, 0), dims...), mask)
}

// joinRows turns [n, a…, s, b…] (row k is shard k of a tensor sharded on dimension l.Dim) into
// the whole tensor [a…, n·s, b…].
func joinRows(x *Node, l shard.Layout) *Node {
	if l.Dim > 0 {
		perm := make([]int, 0, x.Rank())
		for d := 1; d <= l.Dim; d++ {
			perm = append(perm, d)
		}
		perm = append(perm, 0)
		for d := l.Dim + 1; d < x.Rank(); d++ {
			perm = append(perm, d)
		}
		x = TransposeAllDims(x, perm...)
	}
	return Reshape(x, l.Shape...)
}

// rowOf is the inverse view of joinRows followed by the row of shard idx: the shard of the whole
// tensor x that replica idx holds.
func rowOf(x *Node, l shard.Layout, idx *Node) *Node {
	split := slices.Clone(l.Shape[:l.Dim])
	split = append(split, l.N, l.ShardShape[l.Dim])
	split = append(split, l.Shape[l.Dim+1:]...)
	x = Reshape(x, split...)
	if l.Dim > 0 {
		perm := []int{l.Dim}
		for d := range split {
			if d != l.Dim {
				perm = append(perm, d)
			}
		}
		x = TransposeAllDims(x, perm...)
	}
	return Gather(x, idx)
}

func ones(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = 1
	}
	return out
}

// gatherParams makes every sharded parameter — trained or frozen — whole for the model's forward
// and backward pass:
// each replica puts its shard in its row of an [n, shard…] tensor of zeros (spread), and one
// all-reduce (sum) over the fsdp group — the devices that share a data coordinate — fills every
// row; the rows joined are the whole tensor. That is an all-gather: GoMLX v0.26.0's graph API has
// no all-gather (its CollectiveOps is AllReduce only), and adding zeros is exact, so every
// replica gets bitwise the whole tensor, deterministically (gotpu's backend reduces in group
// order). The variables' graph values become the whole tensors; the shards are returned (the
// trained parameters', then the frozen ones'), to be restored before the optimizer
// (restoreShards). A frozen weight of another dtype than float32 (a bfloat16 base) is gathered as
// float32 and converted back, both exact, so it takes the backend's native row gather too.
func (s *Stepper) gatherParams(c *mlctx.Context, g *Graph, idx *Node) []*Node {
	vars := make([]*mlctx.Variable, 0, len(s.params)+len(s.fsdp.frozen))
	layouts := make([]shard.Layout, 0, cap(vars))
	for i, p := range s.params {
		vars = append(vars, s.variable(c, p))
		layouts = append(layouts, s.fsdp.layouts[i])
	}
	for _, fp := range s.fsdp.frozen {
		vars = append(vars, fp.v)
		layouts = append(layouts, fp.layout)
	}
	shards := make([]*Node, len(vars))
	var placed []*Node
	var which []int
	for i, v := range vars {
		shards[i] = v.ValueGraph(g)
		if l := layouts[i]; l.Sharded() {
			placed = append(placed, spread(ConvertDType(shards[i], dtypes.Float32), l, idx))
			which = append(which, i)
		}
	}
	if len(placed) == 0 {
		return shards
	}
	gathered := g.Distributed().Along(FSDPAxis).AllReduce(placed, backends.ReduceOpSum)
	for k, i := range which {
		vars[i].SetValueGraph(ConvertDType(joinRows(gathered[k], layouts[i]), shards[i].DType()))
	}
	return shards
}

// restoreShards makes the parameters' graph values (trained, then frozen: gatherParams) their
// shards again, so no frozen variable is an output of the program and the trained ones are
// updated from their shards.
func (s *Stepper) restoreShards(c *mlctx.Context, shards []*Node) {
	for i, p := range s.params {
		s.variable(c, p).SetValueGraph(shards[i])
	}
	for j, fp := range s.fsdp.frozen {
		fp.v.SetValueGraph(shards[len(s.params)+j])
	}
}

// scatterGradients sums whole gradients over every replica and keeps this replica's shard of the
// sharded ones: a reduce-scatter, as an all-reduce followed by the replica's slice (GoMLX has no
// reduce-scatter). extra scalars (loss sum, loss-term count) join the same all-reduce. It returns
// the shards, the whole sums (bitwise those of the data-parallel step) and the extra sums.
func (s *Stepper) scatterGradients(g *Graph, grads []*Node, idx *Node, extra ...*Node) (shards, whole, extraSums []*Node) {
	all := append(slices.Clone(grads), extra...)
	summed := g.Distributed().AllReduce(all, backends.ReduceOpSum)
	shards = make([]*Node, len(grads))
	for i, gr := range summed[:len(grads)] {
		l := s.fsdp.layouts[i]
		if l.Sharded() {
			gr = rowOf(gr, l, idx)
		}
		shards[i] = gr
	}
	return shards, summed[:len(grads)], summed[len(grads):]
}

// fsdpGradGraph is gradGraph for FSDP: inputs are the replica's batch, its fsdp coordinate and,
// after the first micro-batch, its accumulators (loss sum pair and count, local; gradient
// shards). Each micro-batch's gradients are reduce-scattered at once, so the accumulators are
// shards, as FSDP keeps them.
func (s *Stepper) fsdpGradGraph(c *mlctx.Context, nodes []*Node) []*Node {
	p := len(s.params)
	nb, hasAcc := batchArity(len(nodes)-1, p+carryScalars)
	b := s.splitBatch(nodes[:nb])
	idx := nodes[nb]
	g := idx.Graph()
	shards := s.gatherParams(c, g, idx)
	sum, terms, grads := s.replicaGradients(c, b)
	s.restoreShards(c, shards)
	grads, _, _ = s.scatterGradients(g, grads, idx)
	hi, lo := sum, ZerosLike(sum)
	acc := nodes[nb+1:]
	if hasAcc {
		hi, lo = exactSum(acc[0], acc[1], sum)
		terms = Add(acc[2], terms)
	}
	out := []*Node{hi, lo, terms}
	for i, gr := range grads {
		if hasAcc {
			gr = Add(acc[carryScalars+i], gr)
		}
		out = append(out, gr)
	}
	return out
}

// fsdpTrainGraph is trainGraph for FSDP: inputs are the replica's batch, the window table and
// counter, its fsdp coordinate and, for the last micro-batch of an accumulating step, its
// accumulators (fsdpGradGraph's outputs). The parameters are gathered, the replica's gradients
// computed and reduce-scattered, and the optimizer updates this replica's shards of the
// parameters and their moments only. Outputs as trainGraph's.
func (s *Stepper) fsdpTrainGraph(c *mlctx.Context, nodes []*Node) []*Node {
	p := len(s.params)
	nb := len(nodes) - 3
	var acc []*Node
	if nb > 4 {
		nb -= carryScalars + p
		acc = nodes[nb+3:]
	}
	b := s.splitBatch(nodes[:nb])
	table, ctr, idx := nodes[nb], nodes[nb+1], nodes[nb+2]
	g := idx.Graph()
	shards := s.gatherParams(c, g, idx)
	sum, terms, grads := s.replicaGradients(c, b)
	s.restoreShards(c, shards)
	if acc != nil {
		sum, terms = Add(Add(acc[0], acc[1]), sum), Add(acc[2], terms)
	}
	grads, whole, scalars := s.scatterGradients(g, grads, idx, sum, terms)
	if acc != nil {
		for i := range grads {
			grads[i] = Add(acc[carryScalars+i], grads[i])
		}
		whole = nil // the accumulated sums exist only as shards
	}
	sc := windowScalars(table, ctr, s.cfg.window())
	norm, applied := s.update(c, grads, scalars[1], sc, s.allowed(ctr), whole)
	return []*Node{scalars[0], scalars[1], norm, ConvertDType(applied, dtypes.Float32), nextCounter(ctr, applied)}
}

// wholeSumSq is the squared global L2 norm of whole gradients, in data parallelism's order.
func (s *Stepper) wholeSumSq(g *Graph, grads []*Node) *Node {
	sumSq := Scalar(g, dtypes.Float32, 0)
	for _, gr := range grads {
		sumSq = Add(sumSq, sumSquares(gr))
	}
	return sumSq
}

// sumSquares is the sum of the squares of x's elements: of each row (last axis) first, then of
// the rows' sums. The rows' sums are independent, so a backend computes them side by side (the
// CPU backend eight rows at a time on each core); a single running sum over the whole tensor
// would wait for every addition before the next — for GPT-2's 124M gradients, a tenth of a
// second per step on one core while the other idles.
func sumSquares(x *Node) *Node {
	sq := Square(x)
	if x.Rank() >= 2 && x.Shape().Dim(-1) > 1 {
		sq = ReduceSum(sq, -1)
	}
	return ReduceAllSum(sq)
}

// gradSumSq is the squared global L2 norm of grads. In an FSDP step with accumulation a sharded
// gradient is this replica's accumulated shard: the shards' sums of squares are added over the
// fsdp group (every data group holds the same shards after the reduce-scatters), the replicated
// gradients' added once.
func (s *Stepper) gradSumSq(g *Graph, grads []*Node) *Node {
	if s.fsdp == nil || g.DistributedStrategy() == distributed.AutoSharding {
		return s.wholeSumSq(g, grads)
	}
	sumSq := Scalar(g, dtypes.Float32, 0)
	sharded := Scalar(g, dtypes.Float32, 0)
	for i, gr := range grads {
		if s.fsdp.layouts[i].Sharded() {
			sharded = Add(sharded, sumSquares(gr))
		} else {
			sumSq = Add(sumSq, sumSquares(gr))
		}
	}
	return Add(g.Distributed().Along(FSDPAxis).AllReduceOne(sharded, backends.ReduceOpSum), sumSq)
}
