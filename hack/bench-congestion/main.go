// Command bench-congestion runs netfleet's congestion-response scenario (internal/congestionlab)
// twice — the congestion controller enabled, then disabled — and reports, per client class
// (healthy, lossy, bursty, capped, lossy-capped, policed, drop), the two runs side by side, the
// reference targets with the measured figures, a JSON record of both runs and a PNG plot of every
// client's send rate and snapshot age over time.
//
//	go run ./hack/bench-congestion --out _out/bench
//
// `make bench-congestion` runs it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/internal/botswarm"
	"github.com/netfleet/netfleet/internal/congestionlab"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-congestion:", err)
		os.Exit(1)
	}
}

// record is the JSON the benchmark writes.
type record struct {
	Started  time.Time             `json:"started"`
	Enabled  *congestionlab.Result `json:"enabled"`
	Disabled *congestionlab.Result `json:"disabled"`
	Targets  targetsRecord         `json:"targets"`
}

type targetsRecord struct {
	Enabled  congestionlab.Targets `json:"enabled"`
	Disabled congestionlab.Targets `json:"disabled"`
	Verdicts []verdict             `json:"verdicts"`
}

// verdict is one reference target with the figure measured for it.
type verdict struct {
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench-congestion", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "_out/bench", "directory for congestion.json and congestion.png")
	seed := fs.Uint64("seed", 1, "seed of the world, linkem and the bots")
	ncJSON := fs.String("netcode", "{}", "the server's netcode config as JSON, e.g. '{\"congestion\":{\"delayMarginMs\":10}}'; congestion.enabled is set per run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var nc netcode.NetcodeConfig
	dec := json.NewDecoder(strings.NewReader(*ncJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nc); err != nil {
		return fmt.Errorf("--netcode: %w", err)
	}
	if err := nc.Validate(); err != nil {
		return fmt.Errorf("--netcode: %w", err)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	rec := record{Started: time.Now()}
	for _, enabled := range []bool{true, false} {
		o := congestionlab.DefaultOptions()
		o.Seed = *seed
		o.Netcode = nc
		o.ControllerEnabled = enabled
		name := runName(enabled)
		o.Progress = func(p botswarm.Progress, phase string) {
			fmt.Fprintf(stderr, "%s t=%2ds %-8s%s\n", name, int(p.Elapsed/time.Second), phase, classLine(p))
		}
		r, err := congestionlab.Run(ctx, o)
		if err != nil {
			return fmt.Errorf("run with the controller %s: %w", name, err)
		}
		if enabled {
			rec.Enabled = r
		} else {
			rec.Disabled = r
		}
	}
	rec.Targets.Enabled = rec.Enabled.Measure()
	rec.Targets.Disabled = rec.Disabled.Measure()
	rec.Targets.Verdicts = verdicts(rec.Enabled, rec.Targets.Enabled, rec.Targets.Disabled)

	if err := writeTables(stdout, rec); err != nil {
		return err
	}
	jsonPath := filepath.Join(*out, "congestion.json")
	b, err := json.MarshalIndent(rec, "", " ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	pngPath := filepath.Join(*out, "congestion.png")
	if err := writePlot(pngPath, rec.Enabled, rec.Disabled); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "\nwrote %s and %s\n", jsonPath, pngPath)
	return nil
}

func runName(enabled bool) string {
	if enabled {
		return "enabled"
	}
	return "disabled"
}

func classLine(p botswarm.Progress) string {
	s := ""
	for _, c := range p.Classes {
		s += fmt.Sprintf("  %s %2.0f Hz (min %2d) age p95 %3.0f ms", c.Name, c.HzMedian, c.HzMin, c.AgeP95Ms)
	}
	return s
}

// phase is a window of a run's seconds.
type phase struct {
	name     string
	from, to func(r *congestionlab.Result) int
}

var phases = []phase{
	{"warm-up", func(*congestionlab.Result) int { return congestionlab.WarmupFrom }, func(r *congestionlab.Result) int { return r.ImpairFrom }},
	{"impaired", func(r *congestionlab.Result) int { return r.ImpairFrom }, func(r *congestionlab.Result) int { return r.ImpairTo }},
	{"recovery", func(r *congestionlab.Result) int { return r.ImpairTo }, func(r *congestionlab.Result) int { return 0 }},
}

// writeTables prints, per class, each phase's figures with the controller enabled and disabled
// side by side, then the reference targets with the measured figures.
func writeTables(w io.Writer, rec record) error {
	e, d := rec.Enabled, rec.Disabled
	fmt.Fprintf(w, "congestion response: impairment in seconds [%d, %d) of %d; on = controller enabled, off = disabled\n",
		e.ImpairFrom, e.ImpairTo, len(e.Swarm.Clients[0].Series)-1)
	for _, r := range []*congestionlab.Result{e, d} {
		fmt.Fprintf(w, "server, controller %s: %s\n", runName(r.Options.ControllerEnabled), serverLine(r))
		if !r.DemandMeasuredCleanly() {
			fmt.Fprintf(w, "  WARNING: the server did not keep time while the proxied clients' demand was measured (a loaded machine);\n"+
				"  their caps and policers (%v B/s) are fractions of a degraded demand\n", r.Limit)
		}
	}
	queueing := map[string][2]congestionlab.QueueFigures{
		congestionlab.ClassCapped:      {rec.Targets.Enabled.Capped, rec.Targets.Disabled.Capped},
		congestionlab.ClassLossyCapped: {rec.Targets.Enabled.LossyCapped, rec.Targets.Disabled.LossyCapped},
		congestionlab.ClassDrop:        {rec.Targets.Enabled.Drop, rec.Targets.Disabled.Drop},
	}
	for _, class := range congestionlab.Classes {
		if len(e.Clients(class)) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nclass %s (%d clients)\n", class, len(e.Clients(class)))
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		header := "\t"
		for _, p := range phases {
			header += p.name + " on\t" + p.name + " off\t"
		}
		fmt.Fprintln(tw, header)
		rows := []struct {
			name   string
			format string
			value  func(r *congestionlab.Result, p phase) float64
		}{
			{"median Hz", "%.1f", func(r *congestionlab.Result, p phase) float64 { return r.Window(class, p.from(r), p.to(r)).HzMedian }},
			{"send Hz (estimated)", "%.1f", func(r *congestionlab.Result, p phase) float64 { return sendHz(r, class, p.from(r), p.to(r)) }},
			{"kB/s", "%.1f", func(r *congestionlab.Result, p phase) float64 { return r.Window(class, p.from(r), p.to(r)).KBps }},
			{"snapshot age p50 ms", "%.0f", func(r *congestionlab.Result, p phase) float64 { return r.Window(class, p.from(r), p.to(r)).AgeP50Ms }},
			{"snapshot age p95 ms", "%.0f", func(r *congestionlab.Result, p phase) float64 { return r.Window(class, p.from(r), p.to(r)).AgeP95Ms }},
			{"queueing delay p95 ms", "%.0f", func(r *congestionlab.Result, p phase) float64 { return queueP95(r, class, p) }},
			{"updates applied/s", "%.0f", func(r *congestionlab.Result, p phase) float64 {
				return r.Window(class, p.from(r), p.to(r)).AppliedPerSec
			}},
			{"packet loss %", "%.1f", func(r *congestionlab.Result, p phase) float64 { return r.Window(class, p.from(r), p.to(r)).LossPct }},
		}
		for _, row := range rows {
			line := row.name + "\t"
			for _, p := range phases {
				line += fmt.Sprintf(row.format+"\t"+row.format+"\t", row.value(e, p), row.value(d, p))
			}
			fmt.Fprintln(tw, line)
		}
		if err := tw.Flush(); err != nil {
			return fmt.Errorf("write tables: %w", err)
		}
		if q, ok := queueing[class]; ok {
			fmt.Fprintf(w, "linkem queueing delay p95 ms per client at the end of the impairment (counted since the client's\n"+
				"first packet, warm-up included, so below the impairment's own): on %.0f, off %.0f\n",
				q[0].LinkemQueueP95Ms, q[1].LinkemQueueP95Ms)
		}
		if class == congestionlab.ClassPoliced {
			p := rec.Targets
			fmt.Fprintf(w, "bytes sent per second from %d s into the impairment over the policer's rate, per client: on %.2f, off %.2f;\n"+
				"packets the policer dropped then: on %.0f%%, off %.0f%%\n", congestionlab.SettleSec,
				p.Enabled.Policed.SentShare, p.Disabled.Policed.SentShare, p.Enabled.Policed.DroppedPct, p.Disabled.Policed.DroppedPct)
		}
	}
	fmt.Fprintln(w, "\ntargets (controller enabled unless stated):")
	for _, v := range rec.Targets.Verdicts {
		mark := "MET   "
		if !v.Met {
			mark = "MISSED"
		}
		fmt.Fprintf(w, "  %s  %s\n          measured: %s\n", mark, v.Target, v.Measured)
	}
	return nil
}

// sendHz is the class's median estimated send rate (botswarm.Second.SentHz) over full seconds.
func sendHz(r *congestionlab.Result, class string, from, to int) float64 {
	var perClient []float64
	for _, c := range r.Clients(class) {
		var v []float64
		end := len(c.Series)
		if to > 0 {
			end = min(end, to)
		}
		for s := from; s < end; s++ {
			if c.Series[s].Full {
				v = append(v, c.Series[s].SentHz())
			}
		}
		if len(v) > 0 {
			perClient = append(perClient, botswarm.Median(v))
		}
	}
	return botswarm.Median(perClient)
}

// queueP95 is the class's snapshot-age p95 in the phase above its warm-up median: the queueing
// delay on loopback, where a snapshot's age is its one-way delay.
func queueP95(r *congestionlab.Result, class string, p phase) float64 {
	base := r.Window(class, congestionlab.WarmupFrom, r.ImpairFrom).AgeP50Ms
	return r.Window(class, p.from(r), p.to(r)).AgeP95Ms - base
}

func verdicts(e *congestionlab.Result, te, td congestionlab.Targets) []verdict {
	var out []verdict
	for _, rl := range []struct {
		class   string
		on, off congestionlab.RandomLossFigures
	}{{congestionlab.ClassLossy, te.Lossy, td.Lossy}, {congestionlab.ClassBursty, te.Bursty, td.Bursty}} {
		if rl.on.Clients == 0 {
			continue
		}
		sh := 0.0
		if rl.off.AppliedPerSec > 0 {
			sh = rl.on.AppliedPerSec / rl.off.AppliedPerSec
		}
		out = append(out, verdict{
			Target: fmt.Sprintf("%s (random loss): updates applied/s over the impairment >= %.0f%% of the controller disabled's",
				rl.class, 100*congestionlab.RandomMinUpdatesShare),
			Measured: fmt.Sprintf("%.0f%%: %.0f vs %.0f updates/s; median send rate from %d s in %v Hz per client; loss %.1f%% vs %.1f%%",
				100*sh, rl.on.AppliedPerSec, rl.off.AppliedPerSec, congestionlab.SettleSec, rl.on.SentHz, rl.on.LossPct, rl.off.LossPct),
			Met: sh >= congestionlab.RandomMinUpdatesShare,
		})
	}
	out = append(out, verdict{
		Target:   fmt.Sprintf("capped: backed off, send rate <= %d Hz (median from %d s into the impairment)", congestionlab.CappedMaxHz, congestionlab.SettleSec),
		Measured: fmt.Sprintf("median %v Hz per client", te.Capped.SentHz),
		Met:      te.Capped.BackoffOK,
	})
	// The capped class is judged over the whole impairment, its onset's queue included; the
	// classes whose cap comes with random loss or halfway through are judged once their onset's
	// queue has had SettleSec to drain (the onset is the capped class's, over fewer seconds).
	for _, q := range []struct {
		class  string
		steady bool
		f      congestionlab.QueueFigures
	}{
		{congestionlab.ClassCapped, false, te.Capped},
		{congestionlab.ClassLossyCapped, true, te.LossyCapped},
		{congestionlab.ClassDrop, true, te.Drop},
	} {
		if q.f.Clients == 0 {
			continue
		}
		target, got := fmt.Sprintf("%s: queueing delay p95 <= %d ms above base", q.class, congestionlab.QueueMaxMs), q.f.QueueP95Ms
		if q.steady {
			target = fmt.Sprintf("%s: queueing delay p95 <= %d ms above base from %d s after the cap began", q.class, congestionlab.QueueMaxMs, congestionlab.SettleSec)
			got = q.f.SteadyQueueP95Ms
		}
		out = append(out, verdict{
			Target: target,
			Measured: fmt.Sprintf("%.0f ms from the cap on (second %d), %.0f ms after its first %d s, above the warm-up base of %.0f ms; "+
				"%.0f ms above the capped path's own delay (p5 %.0f ms: one packet's serialization at the cap); send rate %v Hz",
				q.f.QueueP95Ms, q.f.Onset, q.f.SteadyQueueP95Ms, congestionlab.SettleSec, q.f.BaseAgeMs, q.f.QueueP95AboveLinkMs, q.f.LinkAgeP5Ms, q.f.SentHz),
			Met: got <= congestionlab.QueueMaxMs,
		})
	}
	out = append(out, verdict{
		Target: fmt.Sprintf("capped, controller disabled: queueing delay p95 >= %d ms", congestionlab.CappedMinQueueMsOff),
		Measured: fmt.Sprintf("%.0f ms over the impairment above the warm-up base of %.0f ms; %.0f ms above the capped path's own delay (p5 %.0f ms)",
			td.Capped.QueueP95Ms, td.Capped.BaseAgeMs, td.Capped.QueueP95AboveLinkMs, td.Capped.LinkAgeP5Ms),
		Met: td.Capped.QueueP95Ms >= congestionlab.CappedMinQueueMsOff,
	})
	if te.Policed.Clients > 0 {
		out = append(out, verdict{
			Target: fmt.Sprintf("policed: backs off within %d s (sent at most %.0f%% of what the policer passes, on average from then on)",
				congestionlab.PolicedBackoffSec, 100*congestionlab.PolicedMaxShare),
			Measured: fmt.Sprintf("from %v s after the impairment started, per client (disabled: %v, -1 never); sent %.2f of the policer's rate after %d s (disabled: %.2f)",
				te.Policed.BackoffSec, td.Policed.BackoffSec, te.Policed.SentShare, congestionlab.SettleSec, td.Policed.SentShare),
			Met: te.Policed.BackoffOK,
		})
	}
	var rec []string
	for _, class := range congestionlab.ImpairedClasses {
		if s, ok := te.RecoverySec[class]; ok {
			rec = append(rec, fmt.Sprintf("%s %v", class, s))
		}
	}
	out = append(out,
		verdict{
			Target:   fmt.Sprintf("impaired classes: back to >= %d Hz within %d s of the impairment ending", congestionlab.RecoveredHz, congestionlab.RecoverySec),
			Measured: "held from (s, per client) " + strings.Join(rec, "; "),
			Met:      te.RecoveryOK,
		},
		verdict{
			Target:   fmt.Sprintf("healthy: median >= %d Hz in every second", congestionlab.HealthyMinHz),
			Measured: healthyMeasured(e, te.Healthy),
			Met:      len(te.Healthy.Below) == 0,
		},
	)
	return out
}

// serverLine says how well the server's tick loop kept time: on a loaded machine it runs late,
// sends less to everyone and may enter overload mode, which no network impairment explains.
func serverLine(r *congestionlab.Result) string {
	kept, overloaded, ticks := 0, 0, 0
	worst := 0.0
	for _, s := range r.Server {
		ticks += s.Ticks
		if s.KeptTime() {
			kept++
		}
		if s.OverloadedTicks > 0 {
			overloaded++
		}
		worst = max(worst, s.MaxLateMs)
	}
	return fmt.Sprintf("%.1f ticks/s; kept time (>= %d ticks, none over %v late, no overload) in %d of %d s; overload mode in %d s; latest tick %.0f ms late",
		float64(ticks)/float64(max(len(r.Server), 1)), congestionlab.KeptMinTicks, congestionlab.KeptMaxLate, kept, len(r.Server), overloaded, worst)
}

func healthyMeasured(e *congestionlab.Result, h congestionlab.HealthyFigures) string {
	s := fmt.Sprintf("lowest second %.1f Hz", h.MinMedianHz)
	if len(h.Below) == 0 {
		return s
	}
	s += "; below in"
	for _, b := range h.Below {
		sec, _ := e.ServerSecond(b.T)
		s += fmt.Sprintf("\n             t=%d: %.0f Hz; the server ran %d ticks (%d in overload mode), the latest started %.0f ms late",
			b.T, b.MedianHz, b.ServerTicks, sec.OverloadedTicks, sec.MaxLateMs)
	}
	return s
}
