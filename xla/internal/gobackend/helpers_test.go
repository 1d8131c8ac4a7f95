package gobackend

import (
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
