// Command demo-report turns the botswarm report of `make demo` into a PNG and a before/after
// table: each client's send rate and snapshot age per second, colored by how the client reaches
// its server (direct, or through linkem's impaired link), with the moment of the live netcode
// change marked. Clients are grouped by the prefix of their class name, up to the first '-'
// (direct-1, direct-2 -> direct).
//
//	demo-report --swarm _out/demo/swarm.json --change-at 1767225600123 --change "minSendHz 15 -> 30" \
//	    --out _out/demo/demo.png
//
// It reads the report as cmd/botswarm writes it (internal/botswarm.Report) and imports nothing
// else from netfleet.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/netfleet/netfleet/internal/botswarm"
	"github.com/netfleet/netfleet/internal/plotpng"
)

// settle is how many seconds after the swarm's start, and after the change, are left out of the
// before/after figures: connects and the change's first second are transitions, not states.
const settle = 2

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo-report:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("demo-report", flag.ContinueOnError)
	var (
		swarmPath, out, change string
		changeAtMs             int64
	)
	fs.StringVar(&swarmPath, "swarm", "", "botswarm's JSON report (--json)")
	fs.Int64Var(&changeAtMs, "change-at", 0, "when the netcode change was made, in Unix milliseconds; 0: none")
	fs.StringVar(&change, "change", "netcode change", "what the change was, for the plot's marker")
	fs.StringVar(&out, "out", "", "PNG to write")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if swarmPath == "" || out == "" {
		return errors.New("--swarm and --out are required")
	}
	raw, err := os.ReadFile(swarmPath)
	if err != nil {
		return fmt.Errorf("read report: %w", err)
	}
	var r botswarm.Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("decode report %s: %w", swarmPath, err)
	}
	if len(r.Clients) == 0 {
		return fmt.Errorf("report %s has no clients", swarmPath)
	}
	// The change as seconds into the run; -1 without one.
	at := -1.0
	if changeAtMs > 0 {
		at = time.UnixMilli(changeAtMs).Sub(r.Start).Seconds()
	}
	groups := groupClients(r.Clients)
	if err := writeTable(stdout, groups, at); err != nil {
		return err
	}
	return writePlot(out, groups, at, change)
}

// group is the clients of one way in (direct, lossy, ...).
type group struct {
	name    string
	clients []botswarm.ClientReport
}

func groupClients(clients []botswarm.ClientReport) []group {
	var gs []group
	for _, c := range clients {
		name, _, _ := strings.Cut(c.Class, "-")
		i := slices.IndexFunc(gs, func(g group) bool { return g.name == name })
		if i < 0 {
			gs = append(gs, group{name: name})
			i = len(gs) - 1
		}
		gs[i].clients = append(gs[i].clients, c)
	}
	return gs
}

// window holds the figures of one group over [from, to) seconds.
type window struct {
	hz, ageP95, loss float64
	ok               bool
}

// measure takes the median over clients of each client's median send rate, the median of the
// per-second age p95, and the loss over the window's full seconds.
func measure(clients []botswarm.ClientReport, from, to int) window {
	var medians, ages []float64
	var lost, packets float64
	for _, c := range clients {
		var hz []float64
		for i := range c.Series {
			s := &c.Series[i]
			if !s.Full || s.T < from || s.T >= to {
				continue
			}
			hz = append(hz, s.SentHz())
			if s.AgeP95Ms >= 0 {
				ages = append(ages, s.AgeP95Ms)
			}
			lost += float64(s.Lost)
			packets += float64(s.Packets)
		}
		if len(hz) > 0 {
			medians = append(medians, botswarm.Median(hz))
		}
	}
	if len(medians) == 0 {
		return window{}
	}
	w := window{hz: botswarm.Median(medians), ageP95: botswarm.Median(ages), ok: true}
	if lost+packets > 0 {
		w.loss = 100 * lost / (lost + packets)
	}
	return w
}

func writeTable(w io.Writer, groups []group, at float64) error {
	end := 0
	for _, g := range groups {
		for _, c := range g.clients {
			end = max(end, len(c.Series))
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if at < 0 {
		fmt.Fprintln(tw, "CLIENTS\tN\tSEND-HZ\tAGE-P95-MS\tLOSS%\t")
		for _, g := range groups {
			m := measure(g.clients, settle, end)
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t\n", g.name, len(g.clients), f0(m.hz, m.ok), f0(m.ageP95, m.ok), f1(m.loss, m.ok))
		}
		return flush(tw)
	}
	change := int(at)
	if _, err := fmt.Fprintf(w, "change at t=%.1fs; before: seconds %d to %d, after: %d to %d\n", at, settle, change, change+settle, end); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	fmt.Fprintf(tw, "CLIENTS\tN\tSEND-HZ BEFORE\tAFTER\tAGE-P95-MS BEFORE\tAFTER\tLOSS%% BEFORE\tAFTER\t\n")
	for _, g := range groups {
		b := measure(g.clients, settle, change)
		a := measure(g.clients, change+settle, end)
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", g.name, len(g.clients),
			f0(b.hz, b.ok), f0(a.hz, a.ok), f0(b.ageP95, b.ok), f0(a.ageP95, a.ok), f1(b.loss, b.ok), f1(a.loss, a.ok))
	}
	return flush(tw)
}

func flush(tw *tabwriter.Writer) error {
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

func f0(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}

func f1(v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return fmt.Sprintf("%.1f", v)
}

// palette colors the groups in order of appearance.
var palette = []color.RGBA{
	{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, // green
	{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}, // orange
	{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, // blue
	{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, // red
}

// writePlot draws send rate (top) and snapshot age p95 (bottom) of every client per second.
func writePlot(path string, groups []group, at float64, change string) error {
	hz, err := seriesPlot(groups, at, change, "send rate per client", "Hz (frames received + lost)",
		func(s *botswarm.Second) float64 { return s.SentHz() })
	if err != nil {
		return err
	}
	age, err := seriesPlot(groups, at, change, "snapshot age p95 per client", "ms",
		func(s *botswarm.Second) float64 { return s.AgeP95Ms })
	if err != nil {
		return err
	}
	return plotpng.Write(path, [][]*plot.Plot{{hz}, {age}}, 24*vg.Centimeter, 20*vg.Centimeter)
}

// seriesPlot draws one line per client of value over its full seconds, colored by group, and a
// dashed vertical line at the change.
func seriesPlot(groups []group, at float64, change, title, yLabel string, value func(*botswarm.Second) float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = yLabel
	p.Y.Min = 0
	top := 0.0
	for gi, g := range groups {
		col := palette[gi%len(palette)]
		for _, c := range g.clients {
			var pts plotter.XYs
			for i := range c.Series {
				s := &c.Series[i]
				if !s.Full {
					continue
				}
				if v := value(s); v >= 0 {
					pts = append(pts, plotter.XY{X: float64(s.T) + 0.5, Y: v})
					top = max(top, v)
				}
			}
			if len(pts) == 0 {
				continue
			}
			line, err := plotter.NewLine(pts)
			if err != nil {
				return nil, fmt.Errorf("plot client %d: %w", c.ID, err)
			}
			line.Color = col
			line.Width = vg.Points(1)
			p.Add(line)
		}
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 0, Y: 0}})
		if err != nil {
			return nil, fmt.Errorf("plot legend: %w", err)
		}
		l.Color = col
		p.Legend.Add(fmt.Sprintf("%s (%d clients)", g.name, len(g.clients)), l)
	}
	if at >= 0 {
		marker, err := plotter.NewLine(plotter.XYs{{X: at, Y: 0}, {X: at, Y: top * 1.05}})
		if err != nil {
			return nil, fmt.Errorf("plot change: %w", err)
		}
		marker.Color = color.Gray{Y: 0x40}
		marker.Width = vg.Points(1.5)
		marker.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(marker)
		p.Legend.Add("kubectl patch: "+change, marker)
	}
	// Headroom above the lines keeps the legend off them.
	p.Y.Max = top * 1.4
	p.Legend.Top = true
	p.Legend.YOffs = -vg.Millimeter * 6 // below the title
	p.Add(plotter.NewGrid())
	return p, nil
}
