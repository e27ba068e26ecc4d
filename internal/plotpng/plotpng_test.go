package plotpng

import (
	"bytes"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func TestWrite(t *testing.T) {
	line := func() *plot.Plot {
		p := plot.New()
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 2}})
		if err != nil {
			t.Fatal(err)
		}
		p.Add(l)
		return p
	}
	path := filepath.Join(t.TempDir(), "grid.png")
	if err := Write(path, [][]*plot.Plot{{line(), line()}, {line(), line()}}, 10*vg.Centimeter, 8*vg.Centimeter); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 80 {
		t.Errorf("image of %v", b)
	}
	if err := Write(path, [][]*plot.Plot{{line(), line()}, {line()}}, vg.Centimeter, vg.Centimeter); err == nil {
		t.Error("ragged rows accepted")
	}
	if err := Write(path, nil, vg.Centimeter, vg.Centimeter); err == nil {
		t.Error("no plots accepted")
	}
}
