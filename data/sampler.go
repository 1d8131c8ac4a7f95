package data

import (
	"fmt"
	"math/rand/v2"
)

// Sampler decides, deterministically, which examples make up each global batch of each epoch, and
// which part of a global batch each replica gets.
//
// The order of epoch e is a permutation drawn from a PCG generator seeded with (Seed, e), so it
// depends on nothing but the seed and the epoch: a resumed run, on any number of devices or
// hosts, sees the same global batches. (PyTorch's RandomSampler permutations are not reproduced:
// the seed means the same thing, the exact order differs.)
type Sampler struct {
	NumExamples int
	GlobalBatch int    // examples per global batch: per-device batch × replicas
	Seed        uint64 // HF's data_seed, else seed
	Shuffle     bool
	// DropLast drops a last incomplete global batch (HF's dataloader_drop_last). Otherwise it is
	// completed with examples from the start of the epoch's order, as accelerate's even_batches
	// does, so every step has the same shape (no recompilation for a short last batch).
	DropLast bool
}

// Validate names the first bad field.
func (s Sampler) Validate() error {
	switch {
	case s.NumExamples <= 0:
		return fmt.Errorf("data.Sampler.NumExamples: %d, need at least one example", s.NumExamples)
	case s.GlobalBatch <= 0:
		return fmt.Errorf("data.Sampler.GlobalBatch: %d is not positive", s.GlobalBatch)
	case s.DropLast && s.GlobalBatch > s.NumExamples:
		return fmt.Errorf("data.Sampler.GlobalBatch: %d is more than the %d examples and DropLast is set: no batch at all",
			s.GlobalBatch, s.NumExamples)
	}
	return nil
}

// BatchesPerEpoch is the number of global batches in one epoch.
func (s Sampler) BatchesPerEpoch() int {
	if s.DropLast {
		return s.NumExamples / s.GlobalBatch
	}
	return (s.NumExamples + s.GlobalBatch - 1) / s.GlobalBatch
}

// Order returns the example order of an epoch.
func (s Sampler) Order(epoch int) []int {
	order := make([]int, s.NumExamples)
	for i := range order {
		order[i] = i
	}
	if s.Shuffle {
		rng := rand.New(rand.NewPCG(s.Seed, uint64(epoch)))
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	}
	return order
}

// Batch returns the example indices of global batch b of an epoch, given that epoch's Order.
func (s Sampler) Batch(order []int, b int) []int {
	out := make([]int, s.GlobalBatch)
	start := b * s.GlobalBatch
	for i := range out {
		out[i] = order[(start+i)%len(order)]
	}
	return out
}

// Shard returns the part of a global batch that replica r of n computes: a contiguous slice, as
// torch_xla's and accelerate's distributed samplers give each process its own examples. Shards of
// all replicas are disjoint and together are the global batch. len(global) must be a multiple of n.
func Shard(global []int, r, n int) []int {
	per := len(global) / n
	return global[r*per : (r+1)*per]
}
