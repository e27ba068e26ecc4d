// Command congestion-sim measures, over many simulated runs, how the congestion controller treats
// a peer on a link with random loss: how often it is sent more than the lossy target allows while
// the loss lasts, and how soon it is back at full rate once the link heals. It runs the game
// server's own congestion.Controller and congestion.LossEstimator, with the session's parameters
// for a netcode config, against a simulated path: the snapshot stream, the client's ACKs (kept as
// the game client keeps them, protocol.AckState), and ENet's smoothed RTT from its periodic pings.
//
// The congestion-response scenario (make bench-congestion) runs real clients, but a run takes a
// minute and shows four lossy clients; whether a target holds with a margin, or only most of the
// time, takes thousands of runs. On a link with loss alone, random loss cannot be told from a
// link that healed but by a long enough stretch without loss, so the two lossy targets pull
// against each other: the evidence a peer needs before it is sent full rate again decides both
// how often a lossy link's loss-free stretches earn it full rate, and how long a healed link
// waits for it. The scenario's lossy link also adds delay, which the controller holds against
// for as long as the loss lasts (gameserver/congestion, "The delay baselines"); --delay-ms 0
// shows the link with loss alone.
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
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/broadcast"
	"github.com/netfleet/netfleet/gameserver/congestion"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/gameserver/session"
	"github.com/netfleet/netfleet/internal/congestionlab"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "congestion-sim:", err)
		os.Exit(1)
	}
}

// Scenario is one simulated peer's timeline, in seconds: healthy, then impaired, then healthy.
type Scenario struct {
	WarmupSec   int     `json:"warmupSec"`
	ImpairedSec int     `json:"impairedSec"`
	RecoverySec int     `json:"recoverySec"`
	LossRatio   float64 `json:"lossRatio"`
	DelayMs     float64 `json:"delayMs"`
	// BaseOneWayMs is each direction's delay on the healthy path.
	BaseOneWayMs float64 `json:"baseOneWayMs"`
	// FrameBytes is the size of every snapshot packet.
	FrameBytes int `json:"frameBytes"`
}

// PeerRun is what one simulated peer was sent.
type PeerRun struct {
	// Sent is the snapshot packets sent to the peer in each second.
	Sent []int `json:"sent"`
	// MaxImpairedHz is the highest two-second mean of Sent over the impairment from
	// congestionlab.LossyBackoffSec after it started (the measure of make bench-congestion).
	MaxImpairedHz float64 `json:"maxImpairedHz"`
	// MedianImpairedHz is the median of Sent over the same seconds.
	MedianImpairedHz float64 `json:"medianImpairedHz"`
	// RecoverySec is how many seconds after the impairment ended the peer was sent at least
	// congestionlab.LossyRecoveredHz in every second to the end of the run.
	RecoverySec int `json:"recoverySec"`
}

// Summary is the runs measured against the lossy targets of the congestion response.
type Summary struct {
	Runs int `json:"runs"`
	// HoldFailures counts the peers whose MaxImpairedHz exceeded congestionlab.LossyMaxHz;
	// HoldFailureRatio is their share, and ScenarioHoldFailureRatio the chance that at least one
	// of the scenario's lossy clients (congestionlab.DefaultOptions) fails, runs being independent.
	HoldFailures             int     `json:"holdFailures"`
	HoldFailureRatio         float64 `json:"holdFailureRatio"`
	ScenarioHoldFailureRatio float64 `json:"scenarioHoldFailureRatio"`
	// RecoveryHistogram[s] counts the peers with RecoverySec s; RecoveryLate those over
	// congestionlab.LossyRecoverySec.
	RecoveryHistogram []int   `json:"recoveryHistogram"`
	RecoveryP50Sec    int     `json:"recoveryP50Sec"`
	RecoveryP90Sec    int     `json:"recoveryP90Sec"`
	RecoveryP99Sec    int     `json:"recoveryP99Sec"`
	RecoveryMaxSec    int     `json:"recoveryMaxSec"`
	RecoveryLate      int     `json:"recoveryLate"`
	MedianImpairedHz  float64 `json:"medianImpairedHz"`
}

type record struct {
	Scenario Scenario              `json:"scenario"`
	Netcode  netcode.NetcodeConfig `json:"netcode"`
	Seed     uint64                `json:"seed"`
	Summary  Summary               `json:"summary"`
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("congestion-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("out", "_out/bench", "directory for congestion-sim.json")
	runs := fs.Int("runs", 2000, "simulated peers")
	seed := fs.Uint64("seed", 1, "seed of the first peer's loss; peer i uses seed+i")
	loss := fs.Float64("loss", 0.05, "the impaired path's downstream loss ratio")
	delay := fs.Float64("delay-ms", 80, "the impaired path's added downstream delay")
	ncJSON := fs.String("netcode", "{}", "the netcode config as JSON, e.g. '{\"congestion\":{\"minSendHz\":20}}'")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	case *runs < 1:
		return errors.New("--runs must be at least 1")
	case *loss < 0 || *loss > 1:
		return fmt.Errorf("--loss %v out of range [0, 1]", *loss)
	case *delay < 0:
		return fmt.Errorf("--delay-ms %v must not be negative", *delay)
	}
	var nc netcode.NetcodeConfig
	dec := json.NewDecoder(strings.NewReader(*ncJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nc); err != nil {
		return fmt.Errorf("--netcode: %w", err)
	}
	lab := congestionlab.DefaultOptions()
	sc := Scenario{
		WarmupSec: int(lab.Warmup.Seconds()), ImpairedSec: int(lab.Impaired.Seconds()), RecoverySec: int(lab.Recovery.Seconds()),
		LossRatio: *loss, DelayMs: *delay, BaseOneWayMs: 0.5, FrameBytes: 300,
	}
	sum, err := simulate(nc, sc, *seed, *runs)
	if err != nil {
		return err
	}
	writeTable(stdout, sc, sum)
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	b, err := json.MarshalIndent(record{Scenario: sc, Netcode: nc, Seed: *seed, Summary: sum}, "", " ")
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

// simulate runs n peers with seeds seed..seed+n-1 and measures them.
func simulate(nc netcode.NetcodeConfig, sc Scenario, seed uint64, n int) (Summary, error) {
	r, err := netcode.Resolve(nc)
	if err != nil {
		return Summary{}, fmt.Errorf("netcode: %w", err)
	}
	cfg, err := session.NewConfig(r, 1)
	if err != nil {
		return Summary{}, fmt.Errorf("netcode: %w", err)
	}
	s := Summary{Runs: n}
	var recovery []int
	var medians []float64
	for i := range n {
		r := simulatePeer(cfg.Congestion, cfg.TickRateHz, sc, rand.New(rand.NewPCG(seed+uint64(i), 0x6e66)))
		if r.MaxImpairedHz > congestionlab.LossyMaxHz {
			s.HoldFailures++
		}
		if r.RecoverySec > congestionlab.LossyRecoverySec {
			s.RecoveryLate++
		}
		for len(s.RecoveryHistogram) <= r.RecoverySec {
			s.RecoveryHistogram = append(s.RecoveryHistogram, 0)
		}
		s.RecoveryHistogram[r.RecoverySec]++
		recovery = append(recovery, r.RecoverySec)
		medians = append(medians, r.MedianImpairedHz)
	}
	s.HoldFailureRatio = float64(s.HoldFailures) / float64(n)
	s.ScenarioHoldFailureRatio = 1 - math.Pow(1-s.HoldFailureRatio, float64(congestionlab.DefaultOptions().Lossy))
	slices.Sort(recovery)
	slices.Sort(medians)
	q := func(p float64) int { return recovery[min(len(recovery)-1, int(p*float64(len(recovery))))] }
	s.RecoveryP50Sec, s.RecoveryP90Sec, s.RecoveryP99Sec, s.RecoveryMaxSec = q(0.5), q(0.9), q(0.99), recovery[len(recovery)-1]
	s.MedianImpairedHz = medians[len(medians)/2]
	return s, nil
}

// pendingAck is a client ACK on its way to the server.
type pendingAck struct {
	atMs      float64
	latest    uint16
	preceding uint64
}

// simulatePeer runs one peer through the scenario, tick by tick, as the session does: the ACKs
// that arrived are given to the loss estimator, the estimator judges what is due, the controller
// steps with the tick's sample, and a snapshot packet goes out when the controller says so.
func simulatePeer(p congestion.Params, tickRateHz int, sc Scenario, rng *rand.Rand) PeerRun {
	var c congestion.Controller
	c.Reset(p)
	var est congestion.LossEstimator
	tickMs := 1000 / float64(tickRateHz)
	pingMs := float64(broadcast.PingInterval.Milliseconds())
	total := sc.WarmupSec + sc.ImpairedSec + sc.RecoverySec
	sent := make([]int, total)

	var acks []pendingAck
	var client protocol.AckState
	var seq uint16
	rtt := 2 * sc.BaseOneWayMs // ENet's smoothed RTT
	lastPing := math.Inf(-1)
	lastSent := uint64(congestion.NeverSent)
	for tick := range uint64(total * tickRateHz) {
		now := float64(tick) * tickMs
		sec := int(tick) / tickRateHz
		down, loss := sc.BaseOneWayMs, 0.0
		if sec >= sc.WarmupSec && sec < sc.WarmupSec+sc.ImpairedSec {
			down, loss = sc.BaseOneWayMs+sc.DelayMs, sc.LossRatio
		}
		// ENet's ping: a reliable command, so a lost one is resent and still measures the path;
		// ENet moves its RTT an eighth of the way to each sample.
		if now-lastPing >= pingMs {
			lastPing = now
			rtt += (down + sc.BaseOneWayMs - rtt) / 8
		}
		kept := acks[:0]
		for _, a := range acks {
			if a.atMs <= now {
				est.OnAckFieldAt(a.latest, a.preceding, int64(now))
			} else {
				kept = append(kept, a)
			}
		}
		acks = kept
		lossRatio := est.Update(int64(now), uint32(rtt))
		ackRTT, haveAckRTT := est.TakeAckRTT()
		c.Step(congestion.Sample{LossRatio: lossRatio, RTTMs: uint32(rtt), AckRTTMs: ackRTT, HaveAckRTT: haveAckRTT,
			Delivered: est.Delivered(), NowMs: uint32(now)})
		if !c.ShouldSend(tick, lastSent) {
			continue
		}
		lastSent = tick
		est.OnSent(seq, sc.FrameBytes, int64(now))
		sent[sec]++
		if rng.Float64() >= loss {
			// The client acknowledges on receipt.
			client.Receive(seq)
			acks = append(acks, pendingAck{atMs: now + down + sc.BaseOneWayMs, latest: client.Latest, preceding: client.Received})
		}
		seq++
	}
	return measure(sent, sc)
}

// measure applies the lossy targets' measures to a peer's per-second sends. A simulated client
// receives every packet not lost, so what it was sent also measures its recovery; a peer that
// never recovered counts as late by the whole healed stretch.
func measure(sent []int, sc Scenario) PeerRun {
	hz := make([]float64, len(sent))
	for s, n := range sent {
		hz[s] = float64(n)
	}
	to := sc.WarmupSec + sc.ImpairedSec
	m := congestionlab.MeasureLossy(hz, hz, sc.WarmupSec, to, len(sent))
	r := PeerRun{Sent: sent, MaxImpairedHz: m.MaxMeanHz, MedianImpairedHz: m.MedianHz, RecoverySec: m.RecoverySec}
	if r.RecoverySec < 0 {
		r.RecoverySec = len(sent) - to
	}
	return r
}

func writeTable(w io.Writer, sc Scenario, s Summary) {
	fmt.Fprintf(w, "%d simulated peers: %d s healthy, %d s at %.0f%% loss and +%.0f ms, %d s healed\n\n",
		s.Runs, sc.WarmupSec, sc.ImpairedSec, 100*sc.LossRatio, sc.DelayMs, sc.RecoverySec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "measure\tvalue\t\n")
	fmt.Fprintf(tw, "median send rate while impaired (Hz)\t%.0f\t\n", s.MedianImpairedHz)
	fmt.Fprintf(tw, "peers over %d Hz (two-second mean) from %d s into the impairment\t%d (%.1f%%)\t\n",
		congestionlab.LossyMaxHz, congestionlab.LossyBackoffSec, s.HoldFailures, 100*s.HoldFailureRatio)
	fmt.Fprintf(tw, "scenario runs (%d lossy clients) with one over it, expected\t%.1f%%\t\n",
		congestionlab.DefaultOptions().Lossy, 100*s.ScenarioHoldFailureRatio)
	fmt.Fprintf(tw, "seconds to >= %d Hz after the impairment, p50/p90/p99/max\t%d/%d/%d/%d\t\n",
		congestionlab.LossyRecoveredHz, s.RecoveryP50Sec, s.RecoveryP90Sec, s.RecoveryP99Sec, s.RecoveryMaxSec)
	fmt.Fprintf(tw, "peers later than %d s\t%d\t\n", congestionlab.LossyRecoverySec, s.RecoveryLate)
	_ = tw.Flush()
	fmt.Fprintf(w, "recovery seconds histogram: %v\n", s.RecoveryHistogram)
}
