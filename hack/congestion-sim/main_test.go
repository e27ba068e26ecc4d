package main

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/session"
)

var testTimeline = Timeline{WarmupSec: 6, ImpairedSec: 12, RecoverySec: 10}

func testBudgets(t *testing.T) (session.Config, Budgets) {
	t.Helper()
	r, err := netcode.Resolve(netcode.NetcodeConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := session.NewConfig(r, 1)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, Budgets{TickRateHz: cfg.TickRateHz, SnapshotBytesPerTick: cfg.SnapshotBytesPerTick,
		BytesPerSecond: cfg.BytesPerSecond, MaxPacketBytes: 1200, MinFrameBytes: netcode.MinSnapshotBytesPerTick}
}

// A path that is never impaired is sent every tick, every second, what it would be sent without
// the controller: the controller of a healthy peer is the same as none.
func TestHealthyPathFullRate(t *testing.T) {
	cfg, b := testBudgets(t)
	l := Link{BaseOneWayMs: 20, AckJitterMs: 5, FrameBytes: 2000}
	on := simulatePeer(cfg.Congestion, b, l, testTimeline, 1)
	off := cfg.Congestion
	off.Enabled = false
	want := simulatePeer(off, b, l, testTimeline, 1)
	for s := range on {
		if on[s].Frames != cfg.TickRateHz || on[s].SentBytes != want[s].SentBytes {
			t.Fatalf("second %d: %d frames, %d bytes; want %d frames and the %d bytes sent without the controller",
				s, on[s].Frames, on[s].SentBytes, cfg.TickRateHz, want[s].SentBytes)
		}
	}
}

// The path model: a policer passes its rate and drops the rest, a bottleneck passes its rate and
// drops what would wait longer than its queue, and bursty loss loses its long-run share.
func TestPathModel(t *testing.T) {
	const n = 60000 // packets of 1000 bytes, one every 10 ms: 100000 B/s
	send := func(imp Impairment) (delivered int, maxQueueMs float64) {
		p := path{baseMs: 5, rng: rand.New(rand.NewPCG(1, 2))}
		p.set(imp, 0)
		for i := range n {
			o := p.send(float64(i)*10, 1000)
			if o.delivered {
				delivered++
				maxQueueMs = max(maxQueueMs, o.queueMs)
			}
		}
		return delivered, maxQueueMs
	}
	if d, _ := send(Impairment{PolicerBytesPerSec: 40000, PolicerBurstBytes: 5000}); math.Abs(float64(d)/n-0.4) > 0.01 {
		t.Errorf("a 40000 B/s policer passed %d of %d packets of a 100000 B/s stream, want 40%%", d, n)
	}
	if d, q := send(Impairment{RateBytesPerSec: 50000, QueueMs: 100}); math.Abs(float64(d)/n-0.5) > 0.01 || q > 100 {
		t.Errorf("a 50000 B/s bottleneck passed %d of %d packets, the longest after %.0f ms; want 50%% within 100 ms", d, n, q)
	}
	if d, _ := send(Impairment{Loss: 0.05, LossBurst: 4}); math.Abs(1-float64(d)/n-0.05) > 0.005 {
		t.Errorf("bursty 5%% loss passed %d of %d packets", d, n)
	}
	if d, _ := send(Impairment{}); d != n {
		t.Errorf("a clean path passed %d of %d packets", d, n)
	}
}

// The measures can fail: without the controller every congested link is sent all its demand,
// over what its path carries, and every random-loss link is delivered what it would be anyway.
func TestMeasuresWithoutController(t *testing.T) {
	off := false
	s, err := simulate(netcode.NetcodeConfig{Congestion: netcode.CongestionConfig{Enabled: &off}}, testTimeline, 1, 60, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.RandomBackedOff != 0 || s.CongestedNotBackedOff != s.CongestedLinks || s.CongestedLinks == 0 {
		t.Errorf("controller disabled: %d of %d random-loss links backed off, %d of %d congested not; want none and all",
			s.RandomBackedOff, s.RandomLinks, s.CongestedNotBackedOff, s.CongestedLinks)
	}
}

// Over 300 simulated links both goals hold: a random-loss link is backed off, and a congested
// link is not, each for under 5% of the links.
func TestGoalsOverManyLinks(t *testing.T) {
	s, err := simulate(netcode.NetcodeConfig{}, testTimeline, 1, 300, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("random-loss backed off %d of %d, congested not backed off %d of %d", s.RandomBackedOff, s.RandomLinks,
		s.CongestedNotBackedOff, s.CongestedLinks)
	if s.RandomBackedOffRatio >= RandomBackedOffGoal {
		t.Errorf("%d of %d random-loss links backed off", s.RandomBackedOff, s.RandomLinks)
	}
	if s.CongestedNotBackedOffRatio >= CongestedNotBackedOff {
		t.Errorf("%d of %d congested links not backed off", s.CongestedNotBackedOff, s.CongestedLinks)
	}
	for _, k := range s.Kinds {
		if k.RecoveryMaxSec >= testTimeline.RecoverySec {
			t.Errorf("%s: a link was not back at the controller-off rate by the end of the run", k.Kind)
		}
	}
}

func TestRunWritesJSON(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if err := run([]string{"--runs", "28", "--out", dir}, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	raw, err := os.ReadFile(filepath.Join(dir, "congestion-sim.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec record
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if rec.Summary.RandomLinks+rec.Summary.CongestedLinks != 28 || len(rec.Summary.Kinds) != len(kinds) ||
		!strings.Contains(out.String(), "random-loss links backed off") {
		t.Errorf("summary %+v, table:\n%s", rec.Summary, out.String())
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runs", "0"}, "--runs"},
		{[]string{"--kind", "wormhole"}, "--kind"},
		{[]string{"--netcode", `{"tickRateHz":0.5}`}, "--netcode"},
		{[]string{"--netcode", `{"congestion":{"minSendHz":500}}`}, "congestion.minSendHz"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		var out, errOut bytes.Buffer
		err := run(append(tc.args, "--out", t.TempDir()), &out, &errOut)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one naming %q", tc.args, err, tc.want)
		}
	}
}
