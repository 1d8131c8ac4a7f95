package shard

import (
	"errors"
	"fmt"
	"math"
)

// ErrUneven is wrapped by Choose's error for a tensor none of whose dimensions divides by the fsdp
// size.
var ErrUneven = errors.New("no dimension divides evenly over the fsdp axis")

// Layout is where one tensor lives on an fsdp axis of size N.
type Layout struct {
	// Dim is the sharded dimension, or -1 for a replicated tensor (every device holds all of it).
	Dim int
	// N is the fsdp size the layout is for.
	N int
	// Shape is the tensor's whole shape; ShardShape what each device holds (Shape with Dim
	// divided by N; Shape itself when replicated).
	Shape, ShardShape []int
}

// Sharded reports whether the tensor is split over the fsdp axis.
func (l Layout) Sharded() bool { return l.Dim >= 0 }

// Elements is the number of elements of the whole tensor.
func (l Layout) Elements() int64 { return elements(l.Shape) }

// ShardElements is the number of elements one device holds.
func (l Layout) ShardElements() int64 { return elements(l.ShardShape) }

// String describes the layout ("dim 1 of [50257 768] over 8", "replicated [768]").
func (l Layout) String() string {
	if !l.Sharded() {
		return fmt.Sprintf("replicated %v", l.Shape)
	}
	return fmt.Sprintf("dim %d of %v over %d", l.Dim, l.Shape, l.N)
}

// Choose returns the layout of tensor name (used in errors only) of the given shape over an fsdp
// axis of n devices, following the package's rule: replicated when n is 1, for scalars and for
// tensors of fewer than minNumParams elements; otherwise sharded along dimension 0 if it divides
// by n, else along the first dimension that does; an error wrapping ErrUneven when none does.
func Choose(name string, shape []int, n int, minNumParams int64) (Layout, error) {
	if n < 1 {
		return Layout{}, fmt.Errorf("shard: %s: fsdp size %d is not positive", name, n)
	}
	for i, d := range shape {
		if d < 0 {
			return Layout{}, fmt.Errorf("shard: %s: dimension %d of %v is negative", name, i, shape)
		}
	}
	l := Layout{Dim: -1, N: n, Shape: append([]int(nil), shape...), ShardShape: append([]int(nil), shape...)}
	if n == 1 || len(shape) == 0 || elements(shape) < minNumParams {
		return l, nil
	}
	for d, size := range shape {
		if size > 0 && size%n == 0 {
			l.Dim = d
			l.ShardShape[d] = size / n
			return l, nil
		}
	}
	return Layout{}, fmt.Errorf("shard: %s %v over %d devices: %w (set fsdp_config min_num_params above %d to replicate it, or use a device count that divides one of its dimensions)",
		name, shape, n, ErrUneven, elements(shape))
}

// elements is the product of dims, saturating at math.MaxInt64 (shapes come from checked configs,
// but the planner must not wrap around on any input).
func elements(dims []int) int64 {
	n := int64(1)
	for _, d := range dims {
		if d == 0 {
			return 0
		}
		if n > math.MaxInt64/int64(d) {
			return math.MaxInt64
		}
		n *= int64(d)
	}
	return n
}
