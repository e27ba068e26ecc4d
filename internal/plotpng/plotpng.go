// Package plotpng writes a grid of gonum plots, aligned on their axes, to one PNG file: the
// figure the benchmark and demo reports draw.
package plotpng

import (
	"fmt"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Write draws rows (every row as long as the first) into a w x h image and writes it to path
// as PNG.
func Write(path string, rows [][]*plot.Plot, w, h vg.Length) error {
	if len(rows) == 0 || len(rows[0]) == 0 {
		return fmt.Errorf("write plot %s: no plots", path)
	}
	for i := range rows {
		if len(rows[i]) != len(rows[0]) {
			return fmt.Errorf("write plot %s: row %d has %d plots, row 0 %d", path, i, len(rows[i]), len(rows[0]))
		}
	}
	img := vgimg.New(w, h)
	tiles := draw.Tiles{Rows: len(rows), Cols: len(rows[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align(rows, tiles, draw.New(img))
	for i := range rows {
		for j := range rows[i] {
			rows[i][j].Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("write plot %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write plot %s: %w", path, err)
	}
	return nil
}
