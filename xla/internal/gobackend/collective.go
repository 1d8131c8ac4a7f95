package gobackend

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
)

// AllReduce records backends.OpTypeAllReduce: operands reduced elementwise across the replicas of
// each replica group (indices into the device assignment; none means all replicas). It always
// runs natively (simplego has no collectives); the replica groups are checked against the number
// of replicas at Compile.
func (b *Builder) AllReduce(operands []backends.Op, red backends.ReduceOpType, groups [][]int) ([]backends.Op, error) {
	op := backends.OpTypeAllReduce
	if b.compiled {
		return nil, fmt.Errorf("gobackend: %s: computation %q is already compiled", op, b.name)
	}
	vals, err := b.ops(op, operands)
	if err != nil {
		return nil, err
	}
	if len(vals) == 0 {
		return nil, fmt.Errorf("gobackend: %s (computation %q): no operands", op, b.name)
	}
	if _, ok := reduceOps[red]; !ok {
		return nil, fmt.Errorf("gobackend: %s (computation %q): reduction %s is not one of sum, product, max, min", op, b.name, red)
	}
	for i, v := range vals {
		if !allReduceDType(v.shape.DType) {
			return nil, fmt.Errorf("gobackend: %s (computation %q): operand #%d is %s; supported are float32, float64, bfloat16, int32, int64",
				op, b.name, i, v.shape)
		}
	}
	seen := map[int]bool{}
	for _, g := range groups {
		for _, r := range g {
			if r < 0 || seen[r] {
				return nil, fmt.Errorf("gobackend: %s (computation %q): replica groups %v: replica %d is negative or in two groups", op, b.name, groups, r)
			}
			seen[r] = true
		}
	}
	groups = cloneIntLists(groups)
	outs := make([]backends.Op, len(vals))
	var plain []int // operands reduced as such; the others are row gathers (gather.go)
	for i, v := range vals {
		if x, mask, ok := rowsOperand(v); ok && red == backends.ReduceOpSum {
			o, err := b.recordCollective([]*value{x, mask}, []any{red, groups, rowsAttr}, []*value{v})
			if err != nil {
				return nil, err
			}
			outs[i] = o[0]
			continue
		}
		plain = append(plain, i)
	}
	if len(plain) > 0 {
		in := make([]*value, len(plain))
		for k, i := range plain {
			in[k] = vals[i]
		}
		o, err := b.recordCollective(in, []any{red, groups}, in)
		if err != nil {
			return nil, err
		}
		for k, i := range plain {
			outs[i] = o[k]
		}
	}
	return outs, nil
}

// recordCollective records an AllReduce node (a row gather when attrs has rowsAttr) reading in,
// with one result per like value, of its shape.
func (b *Builder) recordCollective(in []*value, attrs []any, like []*value) ([]backends.Op, error) {
	op := backends.OpTypeAllReduce
	n := &node{id: len(b.nodes), op: op, inputs: in, attrs: attrs,
		replay: func(backends.Builder, []backends.Op) ([]backends.Op, error) {
			return nil, errors.New("gobackend: AllReduce runs natively and is never replayed (bug)")
		}}
	outs := make([]backends.Op, len(like))
	for i, l := range like {
		// The shape builder sees each result as a parameter of the operand's shape: what the
		// operations that read it need, and it is never compiled.
		shadow, err := b.shadow.Parameter(fmt.Sprintf("#allreduce%d.%d", n.id, i), l.shape, nil)
		if err != nil {
			return nil, fmt.Errorf("gobackend: %s (computation %q): %w", op, b.name, err)
		}
		v := &value{b: b, node: n, index: i, id: len(b.values), shape: l.shape.Clone(), shadow: shadow}
		b.values = append(b.values, v)
		n.outputs = append(n.outputs, v)
		outs[i] = v
	}
	b.nodes = append(b.nodes, n)
	return outs, nil
}

// isRows reports whether an AllReduce node is a row gather.
func isRows(n *node) bool { return len(n.attrs) > 2 && n.attrs[2] == rowsAttr }

func allReduceDType(dt dtypes.DType) bool {
	switch dt {
	case dtypes.Float32, dtypes.Float64, dtypes.BFloat16, dtypes.Int32, dtypes.Int64:
		return true
	}
	return false
}

var reduceOps = map[backends.ReduceOpType]string{
	backends.ReduceOpSum: "sum", backends.ReduceOpProduct: "product", backends.ReduceOpMax: "max", backends.ReduceOpMin: "min",
}

// allReducePlan is a compiled AllReduce over replicas replicas.
type allReducePlan struct {
	red backends.ReduceOpType
	// groups partition the replicas 0..replicas-1; groupOf and rank place each replica.
	groups        [][]int
	groupOf, rank []int
	replicas      int
}

// planAllReduce resolves the recorded replica groups for an execution over replicas replicas:
// none means one group of all; otherwise every replica must be in exactly one group.
func planAllReduce(n *node, replicas int) (*allReducePlan, error) {
	groups := n.attrs[1].([][]int)
	if len(groups) == 0 {
		all := make([]int, replicas)
		for i := range all {
			all[i] = i
		}
		groups = [][]int{all}
	}
	p := &allReducePlan{red: n.attrs[0].(backends.ReduceOpType), groups: groups, replicas: replicas,
		groupOf: make([]int, replicas), rank: make([]int, replicas)}
	for i := range p.groupOf {
		p.groupOf[i] = -1
	}
	for gi, g := range groups {
		for k, r := range g {
			if r >= replicas {
				return nil, fmt.Errorf("replica groups %v name replica %d of %d", groups, r, replicas)
			}
			p.groupOf[r], p.rank[r] = gi, k
		}
	}
	if i := slices.Index(p.groupOf, -1); i >= 0 {
		return nil, fmt.Errorf("replica groups %v leave out replica %d of %d", groups, i, replicas)
	}
	return p, nil
}

// collectives is the rendezvous of one SPMD execution's replicas: a barrier per replica group
// and a slot per replica where it posts the operands and results of its current collective.
// Replicas run the same program, so they meet at the same collectives in the same order.
type collectives struct {
	replicas int
	slots    []collectiveSlot
	// held counts, for each result buffer a group shares, the members that still read it: the
	// last to let go recycles it (release), so shared results go back to the pool like any
	// intermediate value rather than waiting for the garbage collector.
	heldMu sync.Mutex
	held   map[backends.Buffer]int
	// bars is created on first use for each distinct group layout (an execution may hold
	// all-reduces over different groups).
	mu    sync.Mutex
	bars  map[string][]*barrier
	abort chan struct{}
	once  sync.Once
}

// collectiveSlot is what a replica posts for its current collective: its operands and, for the
// group's first member, the results it allocated (bufs holds their simplego buffers).
type collectiveSlot struct {
	ins, outs []any
	bufs      []backends.Buffer
}

func newCollectives(replicas int) *collectives {
	return &collectives{replicas: replicas, slots: make([]collectiveSlot, replicas), bars: map[string][]*barrier{},
		abort: make(chan struct{}), held: map[backends.Buffer]int{}}
}

// hold registers result buffers a group of members shares.
func (c *collectives) hold(bufs []backends.Buffer, members int) {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	for _, b := range bufs {
		c.held[b] = members
	}
}

// release is one member letting go of buf: it reports whether buf is a shared result whose last
// reader that was (the caller then recycles it). Buffers that are not shared results are not the
// collectives' business: false.
func (c *collectives) release(buf backends.Buffer) bool {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	n, ok := c.held[buf]
	if !ok {
		return false
	}
	if n <= 1 {
		delete(c.held, buf)
		return true
	}
	c.held[buf] = n - 1
	return false
}

// fail releases every replica waiting at a barrier: another replica failed and will not come.
func (c *collectives) fail() { c.once.Do(func() { close(c.abort) }) }

func (c *collectives) barriers(p *allReducePlan) []*barrier {
	key := fmt.Sprint(p.groups)
	c.mu.Lock()
	defer c.mu.Unlock()
	bs, ok := c.bars[key]
	if !ok {
		bs = make([]*barrier, len(p.groups))
		for i, g := range p.groups {
			bs[i] = newBarrier(len(g), c.abort)
		}
		c.bars[key] = bs
	}
	return bs
}

// errReplicaFailed is what a replica's collective returns when another replica failed first.
var errReplicaFailed = errors.New("another replica of the SPMD execution failed")

// allReduce runs replica r's part of an all-reduce: it posts its operands (the group's first
// member also the results, which alloc makes), waits for its group, reduces its share of the
// elements (of all operands together) from every member's operands in group order into the one
// set of results the group shares, then waits until the whole group has done so. It returns those
// results: an all-reduce gives every member the same values, so the group holds them once, not
// once per member (the callers only read them). Every element is computed from the same operands
// in the same order, so the results are bitwise what every replica would compute.
func (c *collectives) allReduce(p *allReducePlan, r int, ins []any, alloc func() ([]any, []backends.Buffer, error)) ([]backends.Buffer, error) {
	bar := c.barriers(p)[p.groupOf[r]]
	slot := collectiveSlot{ins: ins}
	if p.rank[r] == 0 {
		outs, bufs, err := alloc()
		if err != nil {
			c.fail()
			return nil, err
		}
		slot.outs, slot.bufs = outs, bufs
		c.hold(bufs, len(p.groups[p.groupOf[r]]))
	}
	c.slots[r] = slot
	if err := bar.wait(); err != nil {
		return nil, err
	}
	members := p.groups[p.groupOf[r]]
	total := 0
	for _, in := range ins {
		total += flatLen(in)
	}
	m := len(members)
	lo, hi := p.rank[r]*total/m, (p.rank[r]+1)*total/m
	base := 0
	for k, in := range ins {
		n := flatLen(in)
		a, b := max(lo-base, 0), min(hi-base, n)
		if a < b {
			if err := catch(func() { c.reduceRange(p.red, members, k, a, b) }); err != nil {
				c.fail()
				return nil, err
			}
		}
		base += n
	}
	bufs := c.slots[members[0]].bufs
	if err := bar.wait(); err != nil {
		return nil, err
	}
	return bufs, nil
}

func (c *collectives) reduceRange(red backends.ReduceOpType, members []int, k, lo, hi int) {
	switch c.slots[members[0]].ins[k].(type) {
	case []float32:
		reduceTyped[float32](c, red, members, k, lo, hi)
	case []float64:
		reduceTyped[float64](c, red, members, k, lo, hi)
	case []int32:
		reduceTyped[int32](c, red, members, k, lo, hi)
	case []int64:
		reduceTyped[int64](c, red, members, k, lo, hi)
	case []bfloat16.BFloat16:
		reduceBF16(c, red, members, k, lo, hi)
	default:
		panic(fmt.Sprintf("all-reduce of %T", c.slots[members[0]].ins[k]))
	}
}

type reducible interface {
	~float32 | ~float64 | ~int32 | ~int64
}

func combine[T reducible](red backends.ReduceOpType, a, b T) T {
	switch red {
	case backends.ReduceOpSum:
		return a + b
	case backends.ReduceOpProduct:
		return a * b
	case backends.ReduceOpMax:
		return max(a, b)
	default:
		return min(a, b)
	}
}

func reduceTyped[T reducible](c *collectives, red backends.ReduceOpType, members []int, k, lo, hi int) {
	first := c.slots[members[0]].ins[k].([]T)[lo:hi]
	acc := c.slots[members[0]].outs[k].([]T)[lo:hi]
	copy(acc, first)
	for _, r := range members[1:] {
		in := c.slots[r].ins[k].([]T)[lo:hi]
		if red == backends.ReduceOpSum {
			for i, x := range in {
				acc[i] += x
			}
			continue
		}
		for i, x := range in {
			acc[i] = combine(red, acc[i], x)
		}
	}
}

// reduceBF16 accumulates in float32 and rounds once, as bfloat16 products do.
func reduceBF16(c *collectives, red backends.ReduceOpType, members []int, k, lo, hi int) {
	acc := make([]float32, hi-lo)
	for i, x := range c.slots[members[0]].ins[k].([]bfloat16.BFloat16)[lo:hi] {
		acc[i] = x.Float32()
	}
	for _, r := range members[1:] {
		for i, x := range c.slots[r].ins[k].([]bfloat16.BFloat16)[lo:hi] {
			acc[i] = combine(red, acc[i], x.Float32())
		}
	}
	out := c.slots[members[0]].outs[k].([]bfloat16.BFloat16)[lo:hi]
	for i, x := range acc {
		out[i] = bfloat16.FromFloat32(x)
	}
}

func flatLen(flat any) int {
	switch f := flat.(type) {
	case []float32:
		return len(f)
	case []float64:
		return len(f)
	case []int32:
		return len(f)
	case []int64:
		return len(f)
	case []bfloat16.BFloat16:
		return len(f)
	}
	panic(fmt.Sprintf("all-reduce of %T", flat))
}

// barrier is a reusable rendezvous of n goroutines that gives up when abort is closed.
type barrier struct {
	mu    sync.Mutex
	n     int
	count int
	gen   chan struct{}
	abort <-chan struct{}
}

func newBarrier(n int, abort <-chan struct{}) *barrier {
	return &barrier{n: n, gen: make(chan struct{}), abort: abort}
}

// wait blocks until n goroutines have called it (this round), or abort is closed.
func (b *barrier) wait() error {
	b.mu.Lock()
	b.count++
	if b.count == b.n {
		close(b.gen)
		b.gen, b.count = make(chan struct{}), 0
		b.mu.Unlock()
		return nil
	}
	gen := b.gen
	b.mu.Unlock()
	select {
	case <-gen:
		return nil
	case <-b.abort:
		return errReplicaFailed
	}
}
