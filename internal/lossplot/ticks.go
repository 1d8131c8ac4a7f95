package lossplot

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
)

// niceTicks marks an axis every step of the 1-2-5 sequence (…, 0.1, 0.2, 0.5, 1, 2, 5, 10, …),
// the largest step that still labels at least minLabels values between min and max, with an
// unlabelled minor tick halfway between labels. gonum's default ticker labels as few as two
// values (5.00 and 7.50 on a loss curve from 1.2 to 7.8), which a reader cannot interpolate
// from.
type niceTicks struct{ minLabels int }

// niceStep is the largest 1-2-5 step giving at least n labels on [min, max] widened to its
// multiples.
func niceStep(min, max float64, n int) float64 {
	span := max - min
	if !(span > 0) || math.IsInf(span, 0) {
		return 1
	}
	// Start one decade above the span and walk down 5, 2, 1 per decade until enough fit.
	step := math.Pow(10, math.Ceil(math.Log10(span)))
	for range 64 {
		for _, m := range []float64{1, 0.5, 0.2} {
			s := step * m
			// Counted over [min, max] widened to multiples of s, the frame niceRange draws.
			if count := math.Ceil(max/s-1e-9) - math.Floor(min/s+1e-9) + 1; count >= float64(n) {
				return s
			}
		}
		step /= 10
	}
	return step
}

// Ticks implements plot.Ticker.
func (t niceTicks) Ticks(min, max float64) []plot.Tick {
	s := niceStep(min, max, t.minLabels)
	decimals := max0(-int(math.Floor(math.Log10(s) + 1e-9)))
	var ticks []plot.Tick
	// Values within a rounding error of a multiple of s count as on it (2.3000000000000003).
	for i := math.Ceil(min/s - 1e-9); i*s <= max+s*1e-9; i++ {
		v := i * s
		if v == 0 {
			v = 0 // no "-0"
		}
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', decimals, 64)})
		if h := v + s/2; h <= max+s*1e-9 {
			ticks = append(ticks, plot.Tick{Value: h}) // a minor tick: no label
		}
	}
	if first := math.Ceil(min/s-1e-9) * s; first-s/2 >= min-s*1e-9 {
		ticks = append([]plot.Tick{{Value: first - s/2}}, ticks...)
	}
	return ticks
}

func max0(n int) int {
	if n < 0 {
		return 0
	}
	return n
}

// niceRange widens [min, max] to multiples of the axis' label step, so that the frame starts
// and ends on labelled values.
// Widening can make a larger step fit, so it repeats until the range holds still: then Ticks
// picks the same step for it and both ends carry labels.
func niceRange(min, max float64, n int) (float64, float64) {
	for range 8 {
		s := niceStep(min, max, n)
		lo, hi := math.Floor(min/s+1e-9)*s, math.Ceil(max/s-1e-9)*s
		if math.Abs(lo-min) <= s*1e-9 && math.Abs(hi-max) <= s*1e-9 {
			break
		}
		min, max = lo, hi
	}
	return min, max
}
