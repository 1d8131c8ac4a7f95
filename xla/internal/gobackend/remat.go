package gobackend

import (
	"slices"
)

// Rematerialization. Reverse-mode differentiation reads forward intermediates in the backward
// pass, so an elementwise chain such as GPT-2's tanh GELU leaves every one of its intermediates
// (x², x³, the tanh argument, the tanh, 1 + tanh, x/2) materialized from the forward pass to the
// backward one: six [tokens, 4·d] float32 buffers a layer where one would do, most of a 124M
// model's activation memory. XLA avoids this by fusing producers into each consumer and
// recomputing them; this pass does the same for the groups planFusions formed.
//
// A group whose value v is read only by other fusion groups, elementwise and with v's own
// dimensions, and is not an output, is dissolved: its members are copied into every reader
// group, which computes v itself from v's own inputs, and v is never written to a buffer. The
// result is bitwise the same (the same instructions on the same inputs, over the same blocks).
// It is done only when it costs no memory and little time:
//   - the buffers the group reads whose lives it would extend (those no operation outside the
//     group reads as late as the last reader group) add up to no more bytes than v's buffer:
//     each extension lies within v's own life, so the saved buffer pays for them. Most groups
//     extend nothing (every input is read later anyway); the optimizer's mean, clipped
//     gradient (sum/count, then times the clipping factor) extends the gradient sum it replaces;
//     GELU's chain extends nothing;
//   - the group has at most rematMaxOps members and at most rematMaxReaders reader groups, so the
//     recomputation stays a small fraction of the readers' own work.
//
// Groups are visited in recording order, so a chain dissolves link by link: once x² is copied
// into the group computing x³, that group reads x instead of x², and may dissolve in turn.
const (
	rematMaxOps     = 24
	rematMaxReaders = 4
)

// groupMembers returns each fusion root's members (root included), in ascending node order.
func (b *Builder) groupMembers(group []int) map[int][]int {
	members := map[int][]int{}
	for id, r := range group {
		if r >= 0 {
			members[r] = append(members[r], id)
		}
	}
	return members
}

// rematerialize dissolves the groups that are cheaper to recompute than to keep (see above) and
// returns the remaining groups' members, each in ascending node order.
func (b *Builder) rematerialize(members map[int][]int, group []int, isOutput []bool, users [][]int) map[int][]int {
	// where[id]: the groups a node is computed in (its own, plus those it was copied into).
	where := make([][]int, len(b.nodes))
	for r, ids := range members {
		for _, id := range ids {
			where[id] = append(where[id], r)
		}
	}
	// pos is when a reader of a value runs, as a node id: a group member runs with (the last
	// of) the roots of the groups that compute it.
	pos := func(u int) int {
		if len(where[u]) > 0 {
			return slices.Max(where[u])
		}
		return u
	}
	roots := make([]int, 0, len(members))
	for r := range members {
		roots = append(roots, r)
	}
	slices.Sort(roots)
	for _, r := range roots {
		ids := members[r]
		v := b.nodes[r].outputs[0]
		if isOutput[v.id] || len(ids) > rematMaxOps || len(users[v.id]) == 0 {
			continue
		}
		// The reader groups, each reading v elementwise with v's dimensions.
		var readers []int
		ok := true
		for _, u := range users[v.id] {
			un := b.nodes[u]
			if len(where[u]) == 0 || adapter(un) || !slices.Equal(un.outputs[0].shape.Dimensions, v.shape.Dimensions) {
				ok = false
				break
			}
			for _, g := range where[u] {
				if !slices.Contains(readers, g) {
					readers = append(readers, g)
				}
			}
		}
		if !ok || len(readers) > rematMaxReaders {
			continue
		}
		last := slices.Max(readers)
		// The buffers the group reads that nothing else (the readers included) reads at last or
		// later would be kept alive longer, up to last. v itself is alive from the group to last,
		// and an input is alive at least until the group runs, so each extension lies within v's
		// life: while they add up to no more bytes than v's buffer, which is no longer needed,
		// no point of the execution holds more than before.
		inGroup := func(id int) bool { _, found := slices.BinarySearch(ids, id); return found }
		var extended uintptr
		for _, in := range b.groupInputs(ids, group) {
			if in.shape.Size() == 1 {
				continue // a scalar: kept or not, it costs nothing
			}
			if isOutput[in.id] {
				continue // kept to the end anyway
			}
			later := false
			for _, u := range users[in.id] {
				if !inGroup(u) && pos(u) >= last {
					later = true
					break
				}
			}
			if !later {
				extended += in.shape.Memory()
			}
		}
		if extended > v.shape.Memory() {
			continue
		}
		for _, g := range readers {
			merged := append(slices.Clone(members[g]), ids...)
			slices.Sort(merged)
			members[g] = slices.Compact(merged)
			for _, id := range ids {
				if !slices.Contains(where[id], g) {
					where[id] = append(where[id], g)
				}
			}
		}
		delete(members, r)
		for _, id := range ids {
			where[id] = slices.DeleteFunc(where[id], func(g int) bool { return g == r })
		}
	}
	return members
}

// groupInputs returns the values a group's members read that it does not compute, looking
// through inlined adapters to the buffers they read.
func (b *Builder) groupInputs(ids, group []int) []*value {
	var ins []*value
	seen := map[int]bool{}
	for _, id := range ids {
		for _, in := range b.nodes[id].inputs {
			if _, member := slices.BinarySearch(ids, in.node.id); member {
				continue
			}
			src := in
			if group[in.node.id] == inlined {
				src = in.node.inputs[0]
			}
			if !seen[src.id] {
				seen[src.id] = true
				ins = append(ins, src)
			}
		}
	}
	return ins
}
