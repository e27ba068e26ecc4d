package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/netfleet/netfleet/internal/botswarm"
	"github.com/netfleet/netfleet/internal/congestionlab"
	"github.com/netfleet/netfleet/internal/plotpng"
)

var classColors = map[string]color.RGBA{
	congestionlab.ClassHealthy:     {R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	congestionlab.ClassLossy:       {R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
	congestionlab.ClassBursty:      {R: 0xbc, G: 0xbd, B: 0x22, A: 0xff},
	congestionlab.ClassCapped:      {R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	congestionlab.ClassLossyCapped: {R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	congestionlab.ClassPoliced:     {R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	congestionlab.ClassDrop:        {R: 0x8c, G: 0x56, B: 0x4b, A: 0xff},
}

// writePlot draws a 2x2 grid: send rate and snapshot age p95 of every client per second, with
// the controller enabled (top) and disabled (bottom); the impairment is shaded grey.
func writePlot(path string, enabled, disabled *congestionlab.Result) error {
	rows := [][]*plot.Plot{}
	for _, r := range []*congestionlab.Result{enabled, disabled} {
		name := runName(r.Options.ControllerEnabled)
		hz, err := seriesPlot(r, "send rate, controller "+name, "Hz (estimated from received frames + lost packets)",
			func(s *botswarm.Second) float64 { return s.SentHz() })
		if err != nil {
			return err
		}
		age, err := seriesPlot(r, "snapshot age p95, controller "+name, "ms",
			func(s *botswarm.Second) float64 { return s.AgeP95Ms })
		if err != nil {
			return err
		}
		rows = append(rows, []*plot.Plot{hz, age})
	}
	return plotpng.Write(path, rows, 30*vg.Centimeter, 20*vg.Centimeter)
}

// seriesPlot draws one line per client of value per full second, colored by class.
func seriesPlot(r *congestionlab.Result, title, yLabel string, value func(*botswarm.Second) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	// The impairment is shaded first, under the lines, up to the highest value of the plot.
	top := 0.0
	for _, c := range r.Swarm.Clients {
		for i := range c.Series {
			if c.Series[i].Full {
				top = max(top, value(&c.Series[i]))
			}
		}
	}
	shade, err := plotter.NewPolygon(plotter.XYs{
		{X: float64(r.ImpairFrom), Y: 0}, {X: float64(r.ImpairTo), Y: 0},
		{X: float64(r.ImpairTo), Y: top * 1.05}, {X: float64(r.ImpairFrom), Y: top * 1.05},
	})
	if err != nil {
		return nil, fmt.Errorf("plot impairment: %w", err)
	}
	shade.Color = color.NRGBA{R: 0x80, G: 0x80, B: 0x80, A: 0x30}
	shade.Width = 0
	p.Add(shade)
	for _, c := range r.Swarm.Clients {
		var pts plotter.XYs
		for i := range c.Series {
			s := &c.Series[i]
			if !s.Full {
				continue
			}
			if v := value(s); v >= 0 {
				pts = append(pts, plotter.XY{X: float64(s.T) + 0.5, Y: v})
			}
		}
		if len(pts) == 0 {
			continue
		}
		line, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("plot client %d: %w", c.ID, err)
		}
		line.Color = classColors[c.Class]
		line.Width = vg.Points(1)
		p.Add(line)
	}
	for _, class := range congestionlab.Classes {
		if len(r.Clients(class)) == 0 {
			continue
		}
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 0, Y: 0}})
		if err != nil {
			return nil, fmt.Errorf("plot legend: %w", err)
		}
		l.Color = classColors[class]
		p.Legend.Add(class, l)
	}
	p.Legend.Top = true
	p.Legend.YOffs = -vg.Millimeter * 6 // below the title
	p.Add(plotter.NewGrid())
	return p, nil
}
