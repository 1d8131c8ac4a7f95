// Package lossplot draws a run's loss curves (training loss and held-out loss against the
// global step) from its log history into a PNG, with gonum/plot. The examples write it beside
// their checkpoints, the picture HF users get from TensorBoard or W&B, without a server.
//
// Errors name the output file; a history without any loss value is an error, not an empty
// picture. Functions are safe for concurrent use (no shared state).
package lossplot

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Series is one curve: y values at global steps.
type Series struct {
	Name  string
	Steps []float64
	Y     []float64
}

// Colors of the training and held-out curves (tests look for them in the image).
var (
	TrainColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	EvalColor  = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
)

// Entry is one log_history entry as the plot reads it; trainer.LogEntry satisfies it. An
// interface rather than the trainer's type keeps this plumbing package from importing the
// trainer above it.
type Entry interface {
	// Float returns the entry's number under key, and whether there is one.
	Float(key string) (float64, bool)
}

// FromLogHistory extracts "loss" and "eval_loss" against "step" from a trainer's log history
// (TrainerState.LogHistory, or a trainer_state.json read back).
func FromLogHistory[E Entry](history []E) (train, eval Series) {
	train.Name, eval.Name = "training loss", "held-out loss"
	for _, e := range history {
		step, ok := e.Float("step")
		if !ok {
			continue
		}
		if v, ok := e.Float("loss"); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			train.Steps, train.Y = append(train.Steps, step), append(train.Y, v)
		}
		if v, ok := e.Float("eval_loss"); ok && !math.IsNaN(v) && !math.IsInf(v, 0) {
			eval.Steps, eval.Y = append(eval.Steps, step), append(eval.Y, v)
		}
	}
	return train, eval
}

// WritePNG draws the training and held-out curves (either may be empty, not both) into a
// width×height-inch PNG at path.
func WritePNG(path, title string, train, eval Series) error {
	if len(train.Y) == 0 && len(eval.Y) == 0 {
		return fmt.Errorf("lossplot: %s: the log history has no loss values to plot", path)
	}
	if filepath.Ext(path) != ".png" {
		return fmt.Errorf("lossplot: %s: the file name must end in .png", path)
	}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "step"
	p.Y.Label.Text = "cross-entropy loss (nats/token)"
	p.Add(plotter.NewGrid())
	for _, s := range []struct {
		Series
		c      color.Color
		points bool
	}{{train, TrainColor, false}, {eval, EvalColor, true}} {
		if len(s.Y) == 0 {
			continue
		}
		if len(s.Steps) != len(s.Y) {
			return fmt.Errorf("lossplot: %s: series %q has %d steps and %d values", path, s.Name, len(s.Steps), len(s.Y))
		}
		xy := make(plotter.XYs, len(s.Y))
		for i := range xy {
			xy[i].X, xy[i].Y = s.Steps[i], s.Y[i]
		}
		line, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return fmt.Errorf("lossplot: %s: %w", path, err)
		}
		line.Color, line.Width = s.c, vg.Points(2)
		pts.Color = s.c
		if !s.points {
			pts.Radius = 0
		}
		p.Add(line, pts)
		p.Legend.Add(s.Name, line)
	}
	// Ticks every 1-2-5 step with at least minLabels labels on each axis, and the frame on
	// labelled values.
	p.X.Tick.Marker, p.Y.Tick.Marker = niceTicks{minLabels}, niceTicks{minLabels}
	p.X.Min, p.X.Max = niceRange(p.X.Min, p.X.Max, minLabels)
	p.Y.Min, p.Y.Max = niceRange(p.Y.Min, p.Y.Max, minLabels)
	// The legend inside the frame, under the title (gonum draws it over the title's band,
	// against the image's edge), where falling loss curves leave room.
	p.Legend.Top = true
	p.Legend.XOffs = -vg.Points(10)
	p.Legend.YOffs = -(p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding + vg.Points(8))
	// A right margin: the last x label is centred on the frame's edge and would be cut.
	const w, h = 8 * vg.Inch, 5 * vg.Inch
	c, err := draw.NewFormattedCanvas(w, h, "png")
	if err != nil {
		return fmt.Errorf("lossplot: %s: %w", path, err)
	}
	dc := draw.New(c)
	p.Draw(draw.Crop(dc, 0, -vg.Points(18), 0, -vg.Points(4)))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return fmt.Errorf("lossplot: %s: %w", path, err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o666); err != nil {
		return fmt.Errorf("lossplot: writing %s: %w", path, err)
	}
	return nil
}

// minLabels is the fewest labelled ticks on an axis.
const minLabels = 4
