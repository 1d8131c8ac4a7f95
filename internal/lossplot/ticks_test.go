package lossplot

import (
	"math"
	"testing"
)

// TestNiceTicks: each axis is labelled every 1-2-5 step with at least 4 labels, and the frame
// (niceRange) starts and ends on labels. gonum's default labelled only 5.00 and 7.50 on a loss
// axis from 1.27 to 7.77.
func TestNiceTicks(t *testing.T) {
	for _, c := range []struct{ min, max float64 }{{1.27, 7.77}, {10, 200}, {2.301, 2.318}, {0, 1}, {3, 3}, {0.5, 123456}} {
		lo, hi := niceRange(c.min, c.max, minLabels)
		ticks := niceTicks{minLabels}.Ticks(lo, hi)
		var labels []string
		var vals []float64
		for _, tk := range ticks {
			if tk.Label != "" {
				labels, vals = append(labels, tk.Label), append(vals, tk.Value)
			}
		}
		t.Logf("[%g, %g] → frame [%g, %g], labels %v", c.min, c.max, lo, hi, labels)
		if lo > c.min || hi < c.max {
			t.Errorf("[%g, %g]: frame [%g, %g] does not hold the data", c.min, c.max, lo, hi)
		}
		if c.min == c.max {
			continue
		}
		if len(labels) < minLabels {
			t.Errorf("[%g, %g]: %d labels %v, want ≥ %d", c.min, c.max, len(labels), labels, minLabels)
			continue
		}
		if math.Abs(vals[0]-lo) > 1e-9*(hi-lo) || math.Abs(vals[len(vals)-1]-hi) > 1e-9*(hi-lo) {
			t.Errorf("[%g, %g]: frame [%g, %g] does not end on labels %v", c.min, c.max, lo, hi, labels)
		}
		step := vals[1] - vals[0]
		mant := step / math.Pow(10, math.Floor(math.Log10(step)+1e-9))
		if m := math.Round(mant*1e6) / 1e6; m != 1 && m != 2 && m != 5 {
			t.Errorf("[%g, %g]: step %g is not 1, 2 or 5 × 10^k", c.min, c.max, step)
		}
	}
}
