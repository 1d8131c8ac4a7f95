package gobackend

import "github.com/gomlx/gomlx/backends"

// opKind names the binary operations that have vector kernels.
type opKind uint8

const (
	vecNone opKind = iota
	vecAdd
	vecSub
	vecMul
	vecDiv
)

// vecKind maps a fused binary operation to its vector kernel, if any.
func vecKind(op backends.OpType) opKind {
	switch op {
	case backends.OpTypeAdd:
		return vecAdd
	case backends.OpTypeSub:
		return vecSub
	case backends.OpTypeMul:
		return vecMul
	case backends.OpTypeDiv:
		return vecDiv
	}
	return vecNone
}
