package lossplot

import (
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mapEntry is a log entry as plain numbers (trainer.LogEntry is tested against Entry in the
// examples that plot a real history).
type mapEntry map[string]float64

func (m mapEntry) Float(key string) (float64, bool) { v, ok := m[key]; return v, ok }

func entry(step float64, key string, v float64) mapEntry {
	return mapEntry{key: v, "step": step}
}

// count returns how many pixels of img are within a small distance of c.
func count(t *testing.T, path string, c color.RGBA) (n, w, h int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	near := func(a uint32, b uint8) bool { return math.Abs(float64(a>>8)-float64(b)) < 24 }
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near(r, c.R) && near(g, c.G) && near(bl, c.B) {
				n++
			}
		}
	}
	return n, b.Dx(), b.Dy()
}

func TestWritePNG(t *testing.T) {
	var hist []mapEntry
	for s := 10; s <= 200; s += 10 {
		hist = append(hist, entry(float64(s), "loss", 8*math.Exp(-float64(s)/60)+1))
		if s%50 == 0 {
			hist = append(hist, entry(float64(s), "eval_loss", 8*math.Exp(-float64(s)/60)+1.3))
		}
	}
	hist = append(hist, entry(210, "loss", math.NaN())) // skipped, not drawn
	train, eval := FromLogHistory(hist)
	if len(train.Y) != 20 || len(eval.Y) != 4 {
		t.Fatalf("extracted %d training and %d held-out points, want 20 and 4", len(train.Y), len(eval.Y))
	}
	path := filepath.Join(t.TempDir(), "loss.png")
	if err := WritePNG(path, "test", train, eval); err != nil {
		t.Fatal(err)
	}
	nt, w, h := count(t, path, TrainColor)
	ne, _, _ := count(t, path, EvalColor)
	t.Logf("%dx%d PNG, %d training-curve pixels, %d held-out-curve pixels", w, h, nt, ne)
	if w < 400 || h < 250 {
		t.Errorf("image is %dx%d", w, h)
	}
	if nt < 500 || ne < 200 {
		t.Errorf("curves not drawn: %d training, %d held-out pixels", nt, ne)
	}
	// Only the training curve: no held-out color at all.
	path2 := filepath.Join(t.TempDir(), "train.png")
	if err := WritePNG(path2, "test", train, Series{}); err != nil {
		t.Fatal(err)
	}
	if ne2, _, _ := count(t, path2, EvalColor); ne2 != 0 {
		t.Errorf("%d held-out pixels in a picture without held-out loss", ne2)
	}
}

func TestWritePNGErrors(t *testing.T) {
	dir := t.TempDir()
	if err := WritePNG(filepath.Join(dir, "x.png"), "", Series{}, Series{}); err == nil || !strings.Contains(err.Error(), "x.png") {
		t.Errorf("empty history: %v", err)
	}
	s := Series{Steps: []float64{1}, Y: []float64{1}}
	if err := WritePNG(filepath.Join(dir, "x.jpg"), "", s, Series{}); err == nil {
		t.Error("accepted .jpg")
	}
	if err := WritePNG(filepath.Join(dir, "missing", "x.png"), "", s, Series{}); err == nil || !strings.Contains(err.Error(), "x.png") {
		t.Errorf("unwritable path: %v", err)
	}
}
