package gobackend

import (
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

func shapesOf(dt dtypes.DType, dims []int) shapes.Shape { return shapes.Make(dt, dims...) }

func orEmpty(x []int) []int {
	if x == nil {
		return []int{}
	}
	return x
}

// mustOp returns a helper that unwraps a builder call's op, failing t on its error.
func mustOp(t testing.TB) func(backends.Op, error) backends.Op {
	return func(op backends.Op, err error) backends.Op {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
}
