package gobackend

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// Fusions with several outputs. An optimizer update makes three outputs of the program from the
// same elements: the new first and second moments, and the new parameter computed from them.
// Fused one group per output, AdamW reads the gradient and the moments, writes the new moments,
// then reads them back with the parameter to write the new parameter: ten passes over memory
// for each parameter tensor, where one program writing all three needs seven (four reads, three
// writes). In the GPT-2 124M step those passes cost more than any operation but the products,
// and they are limited by memory, not arithmetic.
//
// mergeOutputs folds a group G into the group R reading its value x when x is an output of the
// program, float32, read by nothing but R (elementwise, with R's own dimensions: so R computes
// every element of x from the same elements of its inputs that G would have read), and R's
// output is float32 too. R then writes x as an extra output (fusion.extra). The instructions
// are the same, in the same order, so the results are bitwise those of separate fusions.
//
// Only outputs of the program are merged: they never live in the arena (arena.go places one
// result per step) and nothing after R reads them, so the only effect on the schedule is that
// G's inputs are read at R's step instead of G's.
//
// mergeMaxOps bounds a merged program (members): each register is a block of fuseBlock floats,
// and a long program's registers would no longer stay in L1. AdamW's merged update has 17.
const mergeMaxOps = 48

// fusedOut is an extra output of a fusion: value is written from register reg, after every
// instruction of the block has run.
type fusedOut struct {
	value, reg int
}

// mergeOutputs merges groups into their readers as described above, updating members, and
// returns the extra outputs of each root that took some (value ids, in merge order).
func (b *Builder) mergeOutputs(members map[int][]int, isOutput []bool, users [][]int) map[int][]int {
	// where[id]: the groups computing node id (more than one when remat.go copied it).
	where := map[int][]int{}
	roots := make([]int, 0, len(members))
	for r, ids := range members {
		roots = append(roots, r)
		for _, id := range ids {
			where[id] = append(where[id], r)
		}
	}
	slices.Sort(roots)
	extras := map[int][]int{}
	for _, g := range roots {
		ids := members[g]
		n := b.nodes[g]
		x := n.outputs[0]
		if !isOutput[x.id] || x.shape.DType != dtypes.Float32 || len(users[x.id]) == 0 ||
			!(fusedUnary[n.op] || fusedBinary[n.op] || n.op == backends.OpTypeWhere) {
			continue
		}
		// The one group reading x: every reader a member of it alone, reading x at its own index.
		r := -1
		for _, u := range users[x.id] {
			ws, un := where[u], b.nodes[u]
			if len(ws) != 1 || ws[0] == g || r >= 0 && ws[0] != r || adapter(un) ||
				!slices.Equal(un.outputs[0].shape.Dimensions, x.shape.Dimensions) {
				r = -1
				break
			}
			r = ws[0]
		}
		if r < 0 {
			continue
		}
		out := b.nodes[r].outputs[0]
		if out.shape.DType != dtypes.Float32 || !slices.Equal(out.shape.Dimensions, x.shape.Dimensions) ||
			len(members[r])+len(ids) > mergeMaxOps {
			continue
		}
		merged := append(slices.Clone(members[r]), ids...)
		slices.Sort(merged)
		members[r] = slices.Compact(merged)
		for _, id := range ids {
			ws := slices.DeleteFunc(where[id], func(v int) bool { return v == g })
			if !slices.Contains(ws, r) {
				ws = append(ws, r)
			}
			where[id] = ws
		}
		extras[r] = append(extras[r], append(extras[g], x.id)...)
		delete(extras, g)
		delete(members, g)
	}
	return extras
}
