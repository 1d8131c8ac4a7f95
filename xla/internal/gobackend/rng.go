package gobackend

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// RNGBitGenerator runs natively. simplego's kernel writes the shape field of its state input
// when it does not own it, a data race when replicas of an SPMD execution (or concurrent
// executions) read the same state buffer; natively the state is only read, and a step drawing
// from a state every replica shares is computed once for all (spmd.go).
//
// The numbers are simplego's, so both backends draw the same dropout masks from the same state:
// PCG seeded with the state's first two words, the output's bytes filled from successive
// Uint64s, least significant byte first; the new state is the generator's MarshalBinary
// encoding ("pcg:", then the two words big-endian) with each word read back little-endian, as
// simplego stores it, and the state's other words are kept.

// rngPlan is a native RNGBitGenerator: reads[0] is the state (uint64), outs are the new state and
// the random bits.
type rngPlan struct{}

// nativeRNG reports whether an RNGBitGenerator node can run natively (a uint64 state of at least
// two words, which is what GoMLX builds).
func nativeRNG(n *node) bool {
	s := n.inputs[0].shape
	return s.DType == dtypes.Uint64 && s.Size() >= 2 && len(n.outputs) == 2
}

// run draws into bits (any dtype's memory) and writes the new state.
func (rngPlan) run(newState, state []uint64, bits []byte) error {
	pcg := rand.NewPCG(state[0], state[1])
	for i := 0; i < len(bits); i += 8 {
		var word [8]byte
		binary.LittleEndian.PutUint64(word[:], pcg.Uint64())
		copy(bits[i:], word[:])
	}
	enc, err := pcg.MarshalBinary()
	if err != nil || len(enc) != 20 || string(enc[:4]) != "pcg:" {
		return fmt.Errorf("RNGBitGenerator: the PCG state encoding changed (%d bytes, err %v)", len(enc), err)
	}
	copy(newState, state)
	newState[0] = binary.LittleEndian.Uint64(enc[4:12])
	newState[1] = binary.LittleEndian.Uint64(enc[12:20])
	return nil
}
