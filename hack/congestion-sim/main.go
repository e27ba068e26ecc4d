// Command congestion-sim measures, over thousands of simulated links, how well the congestion
// controller tells random loss from congestion: how often a link that only loses packets at
// random is backed off, and how often a congested link is not. It runs the game server's own
// congestion.Controller and congestion.LossEstimator, with the session's parameters and budgets
// for a netcode config, against simulated paths: the snapshot stream as a session sends it, the
// client's ACKs (kept as the game client keeps them, protocol.AckState), and ENet's smoothed RTT
// from its periodic pings.
//
// Each link is clean for a warm-up, impaired for a while, then clean again, and runs twice, with
// the controller and without. Half the links only lose packets — independently or in bursts,
// with or without a delay added at the same time — and are backed off if they were delivered
// less than 85% of what the same link delivered without the controller. The other half are
// congested — capped with a queue, capped and lossy, policed, or clean until their capacity
// drops halfway through — and are not backed off if, from 2 s after the congestion began, they
// were sent more than 110% of what their path carries.
//
// The congestion-response scenario (make bench-congestion) runs real clients, a few per class;
// whether a result holds for most links, or only for the few, takes thousands of them.
//
//	go run ./hack/congestion-sim --runs 2000 --out _out/bench
//
// make bench runs it.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/session"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "congestion-sim:", err)
		os.Exit(1)
	}
}

// The goals for the two rates.
const (
	RandomBackedOffGoal   = 0.05
	CongestedNotBackedOff = 0.05
)

// KindSummary is the links of one kind measured.
type KindSummary struct {
	Kind      string `json:"kind"`
	Congested bool   `json:"congested"`
	Links     int    `json:"links"`
	// Missed counts the random-loss links backed off, or the congested links not.
	Missed int `json:"missed"`
	// DeliveredShareP50 and P5 are quantiles of the links' DeliveredShare; SentShareP50 and P95
	// of a congested kind's SentShare; QueueP95MsP50 is the median link's queueing p95, and
	// LossPctP50 the median link's loss, both from congestedSettleSec after the onset.
	DeliveredShareP50 float64 `json:"deliveredShareP50"`
	DeliveredShareP5  float64 `json:"deliveredShareP5"`
	SentShareP50      float64 `json:"sentShareP50,omitempty"`
	SentShareP95      float64 `json:"sentShareP95,omitempty"`
	QueueP95MsP50     float64 `json:"queueP95MsP50"`
	LossPctP50        float64 `json:"lossPctP50"`
	// RecoveryP90Sec and RecoveryMaxSec are quantiles of the links' RecoverySec.
	RecoveryP90Sec int `json:"recoveryP90Sec"`
	RecoveryMaxSec int `json:"recoveryMaxSec"`
}

// Summary is the run measured.
type Summary struct {
	Kinds []KindSummary `json:"kinds"`
	// RandomLinks and CongestedLinks count the links of either half; RandomBackedOff the
	// random-loss links backed off, CongestedNotBackedOff the congested links not, and the
	// ratios their shares.
	RandomLinks                int     `json:"randomLinks"`
	RandomBackedOff            int     `json:"randomBackedOff"`
	RandomBackedOffRatio       float64 `json:"randomBackedOffRatio"`
	CongestedLinks             int     `json:"congestedLinks"`
	CongestedNotBackedOff      int     `json:"congestedNotBackedOff"`
	CongestedNotBackedOffRatio float64 `json:"congestedNotBackedOffRatio"`
	// Missed are the links behind the counts.
	Missed []Verdict `json:"missed"`
}

type record struct {
	Timeline Timeline              `json:"timeline"`
	Netcode  netcode.NetcodeConfig `json:"netcode"`
	Seed     uint64                `json:"seed"`
	Summary  Summary               `json:"summary"`
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("congestion-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "_out/bench", "directory for congestion-sim.json")
	runs := fs.Int("runs", 2000, "simulated links: half random-loss, half congested, split evenly between the kinds of each")
	seed := fs.Uint64("seed", 1, "seed of the first link; link i uses seed+i")
	only := fs.String("kind", "", "simulate only the links of this kind")
	ncJSON := fs.String("netcode", "{}", "the netcode config as JSON, e.g. '{\"congestion\":{\"lossCeilingPermille\":100}}'")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	case *runs < 1:
		return errors.New("--runs must be at least 1")
	case *only != "" && !slices.ContainsFunc(kinds, func(k kind) bool { return k.name == *only }):
		return fmt.Errorf("--kind %q is none of %s", *only, kindNames())
	}
	var nc netcode.NetcodeConfig
	dec := json.NewDecoder(strings.NewReader(*ncJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nc); err != nil {
		return fmt.Errorf("--netcode: %w", err)
	}
	tl := Timeline{WarmupSec: 6, ImpairedSec: 12, RecoverySec: 10}
	sum, err := simulate(nc, tl, *seed, *runs, *only)
	if err != nil {
		return err
	}
	writeTable(stdout, tl, sum)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	b, err := json.MarshalIndent(record{Timeline: tl, Netcode: nc, Seed: *seed, Summary: sum}, "", " ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	path := filepath.Join(*out, "congestion-sim.json")
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write JSON: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s\n", path)
	return nil
}

func kindNames() string {
	var names []string
	for _, k := range kinds {
		names = append(names, fmt.Sprintf("%q", k.name))
	}
	return strings.Join(names, ", ")
}

// perKind is how many of n links are of kind k: half the links are random-loss, half
// congested, split evenly between the kinds of each half, the first kinds taking one more where
// it does not divide (all n of them for only).
func perKind(k kind, n int, only string) int {
	if only != "" {
		if k.name == only {
			return n
		}
		return 0
	}
	half := n / 2
	if k.congested {
		half = n - n/2
	}
	same, at := 0, 0
	for _, o := range kinds {
		if o.congested == k.congested {
			if o.name == k.name {
				at = same
			}
			same++
		}
	}
	if at < half%same {
		return half/same + 1
	}
	return half / same
}

// simulate runs the links with seeds seed, seed+1, ... and measures them.
func simulate(nc netcode.NetcodeConfig, tl Timeline, seed uint64, n int, only string) (Summary, error) {
	r, err := netcode.Resolve(nc)
	if err != nil {
		return Summary{}, fmt.Errorf("netcode: %w", err)
	}
	on, err := session.NewConfig(r, 1)
	if err != nil {
		return Summary{}, fmt.Errorf("netcode: %w", err)
	}
	off := on.Congestion
	off.Enabled = false
	d := r.Config()
	b := Budgets{
		TickRateHz: on.TickRateHz, SnapshotBytesPerTick: on.SnapshotBytesPerTick, BytesPerSecond: on.BytesPerSecond,
		MaxPacketBytes: int(d.Budget.MaxPacketBytes), MinFrameBytes: netcode.MinSnapshotBytesPerTick,
	}
	var s Summary
	next := seed
	for _, k := range kinds {
		var verdicts []Verdict
		for range perKind(k, n, only) {
			linkSeed := next
			next++
			rng := rand.New(rand.NewPCG(linkSeed, 0x11c))
			l := Link{Kind: k.name, Seed: linkSeed, BaseOneWayMs: uniform(rng, 1, 40), AckJitterMs: uniform(rng, 0, 10), FrameBytes: frameBytes(rng)}
			full := float64(b.TickRateHz * min(l.FrameBytes, b.SnapshotBytesPerTick))
			l.Impaired, l.Later, l.LaterSec = k.draw(rng, full, tl.ImpairedSec)
			v := judge(k, l, tl, simulatePeer(on.Congestion, b, l, tl, linkSeed), simulatePeer(off, b, l, tl, linkSeed))
			verdicts = append(verdicts, v)
			if v.Missed {
				s.Missed = append(s.Missed, v)
			}
		}
		if len(verdicts) == 0 {
			continue
		}
		ks := summarize(k, verdicts)
		s.Kinds = append(s.Kinds, ks)
		if k.congested {
			s.CongestedLinks += ks.Links
			s.CongestedNotBackedOff += ks.Missed
		} else {
			s.RandomLinks += ks.Links
			s.RandomBackedOff += ks.Missed
		}
	}
	s.RandomBackedOffRatio = share(float64(s.RandomBackedOff), float64(s.RandomLinks))
	s.CongestedNotBackedOffRatio = share(float64(s.CongestedNotBackedOff), float64(s.CongestedLinks))
	return s, nil
}

// frameBytes draws what a peer's frames carry: from a few entities' changes a tick, as the
// congestion benchmark's clients see, to more than the default 2400-byte budget.
func frameBytes(rng *rand.Rand) int {
	if rng.Float64() < 0.5 {
		return int(uniform(rng, 100, 600))
	}
	return int(uniform(rng, 600, 3000))
}

func summarize(k kind, vs []Verdict) KindSummary {
	ks := KindSummary{Kind: k.name, Congested: k.congested, Links: len(vs)}
	var delivered, sent, queue, loss []float64
	var recovery []float64
	for _, v := range vs {
		if v.Missed {
			ks.Missed++
		}
		delivered = append(delivered, v.DeliveredShare)
		sent = append(sent, v.SentShare)
		queue = append(queue, v.QueueP95Ms)
		loss = append(loss, v.LossPct)
		recovery = append(recovery, float64(v.RecoverySec))
	}
	ks.DeliveredShareP50, ks.DeliveredShareP5 = quantile(delivered, 0.5), quantile(delivered, 0.05)
	if k.congested {
		ks.SentShareP50, ks.SentShareP95 = quantile(sent, 0.5), quantile(sent, 0.95)
	}
	ks.QueueP95MsP50, ks.LossPctP50 = quantile(queue, 0.5), quantile(loss, 0.5)
	ks.RecoveryP90Sec, ks.RecoveryMaxSec = int(quantile(recovery, 0.9)), int(quantile(recovery, 1))
	return ks
}

func writeTable(w io.Writer, tl Timeline, s Summary) {
	fmt.Fprintf(w, "%d simulated links: %d s clean, %d s impaired, %d s clean again; each run with the controller and without\n\n",
		s.RandomLinks+s.CongestedLinks, tl.WarmupSec, tl.ImpairedSec, tl.RecoverySec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tlinks\tmissed\tdelivered on/off p50\tp5\tsent/carried p50\tp95\tqueue p95 ms p50\tloss % p50\trecovery s p90\tmax\t")
	for _, k := range s.Kinds {
		sentP50, sentP95 := "-", "-"
		if k.Congested {
			sentP50, sentP95 = fmt.Sprintf("%.2f", k.SentShareP50), fmt.Sprintf("%.2f", k.SentShareP95)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.2f\t%s\t%s\t%.0f\t%.1f\t%d\t%d\t\n", k.Kind, k.Links, k.Missed,
			k.DeliveredShareP50, k.DeliveredShareP5, sentP50, sentP95, k.QueueP95MsP50, k.LossPctP50, k.RecoveryP90Sec, k.RecoveryMaxSec)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nmissed: a random-loss link delivered under %.0f%% of the bytes it was delivered without the controller over the\n"+
		"impairment (backed off); a congested link sent over %.0f%% of what its path carries from %d s after its congestion began (not)\n\n",
		100*randomMinShare, 100*congestedMaxShare, congestedSettleSec)
	fmt.Fprintf(w, "random-loss links backed off:   %d of %d (%.1f%%), goal under %.0f%%: %s\n", s.RandomBackedOff, s.RandomLinks,
		100*s.RandomBackedOffRatio, 100*RandomBackedOffGoal, met(s.RandomLinks > 0 && s.RandomBackedOffRatio < RandomBackedOffGoal))
	fmt.Fprintf(w, "congested links not backed off: %d of %d (%.1f%%), goal under %.0f%%: %s\n", s.CongestedNotBackedOff, s.CongestedLinks,
		100*s.CongestedNotBackedOffRatio, 100*CongestedNotBackedOff, met(s.CongestedLinks > 0 && s.CongestedNotBackedOffRatio < CongestedNotBackedOff))
}

func met(ok bool) string {
	if ok {
		return "MET"
	}
	return "MISSED"
}
