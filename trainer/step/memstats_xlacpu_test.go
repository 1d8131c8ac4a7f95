//go:build !noxla

package step

import (
	"context"
	"errors"
	"testing"

	"github.com/gotpu/gotpu/data"
	"github.com/gotpu/gotpu/xla"
	"github.com/gotpu/gotpu/xla/pjrttest"
)

// TestStepperMemoryStatsOnXLACPU: the train program's compiler figures exist after the first step
// on XLA's CPU plugin, and its arguments and outputs hold the parameters and AdamW moments; before
// the first step there are none.
func TestStepperMemoryStatsOnXLACPU(t *testing.T) {
	s := newFixtureStepper(t, pjrttest.OpenCPUPlugin(t, 1), "gpt2-tiny", Config{Optimizer: DefaultAdamW(), NumReplicas: 1})
	if _, err := s.MemoryStats(); !errors.Is(err, xla.ErrMemoryStatsUnavailable) {
		t.Fatalf("MemoryStats before the first step: %v, want ErrMemoryStatsUnavailable", err)
	}
	b := &data.Batch{Size: 2, SeqLen: 16}
	for i := range 32 {
		id := int32(i * 7 % 50)
		b.InputIDs, b.AttentionMask, b.Labels = append(b.InputIDs, id), append(b.AttentionMask, 1), append(b.Labels, id)
	}
	if _, err := s.Step(context.Background(), [][]*data.Batch{{b}}, 1e-3); err != nil {
		t.Fatal(err)
	}
	st, err := s.MemoryStats()
	if err != nil {
		t.Fatal(err)
	}
	var state int64
	for _, p := range s.model.Params() {
		n := int64(4 * 3) // float32 parameter and its two AdamW moments
		for _, d := range p.Shape {
			n *= int64(d)
		}
		state += n
	}
	t.Logf("train program: %v; parameters + AdamW state %d bytes", st, state)
	if st.Argument < state || st.Argument > state+64<<10 || st.Output < state || st.Output > state+64<<10 || st.Temp <= 0 {
		t.Errorf("compiler figures %v: want arguments and outputs of the %d bytes of state plus the step's small inputs, and some temp", st, state)
	}
}
