package step

import "github.com/gotpu/gotpu/xla"

// MemoryStats returns the XLA compiler's memory figures (per device) of the train program — the
// step's last micro-batch: forward, backward, the gradients' reduction and the optimizer update —
// as compiled for the most recent batch shape. They are read when the program first runs, so
// they exist after the first step. Without them (before the first step, on the pure-Go backend)
// the error wraps xla.ErrMemoryStatsUnavailable.
func (s *Stepper) MemoryStats() (xla.MemoryStats, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.trainStats, s.trainStatsErr
}
