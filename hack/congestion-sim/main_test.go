package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/session"
	"github.com/netfleet/netfleet/internal/congestionlab"
)

func defaultScenario() Scenario {
	return Scenario{WarmupSec: 6, ImpairedSec: 12, RecoverySec: 10, LossRatio: 0.05, DelayMs: 80, BaseOneWayMs: 0.5, FrameBytes: 300}
}

// A path that is never impaired is sent every tick, every second: the controller of a healthy
// peer is the same as none.
func TestHealthyPathFullRate(t *testing.T) {
	cfg, err := session.NewConfig(netcode.Resolved{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	sc := defaultScenario()
	sc.LossRatio, sc.DelayMs = 0, 0
	r := simulatePeer(cfg.Congestion, cfg.TickRateHz, sc, rand.New(rand.NewPCG(1, 2)))
	for s, n := range r.Sent {
		if n != cfg.TickRateHz {
			t.Fatalf("second %d: %d packets sent, want %d (per-second sends %v)", s, n, cfg.TickRateHz, r.Sent)
		}
	}
	if r.RecoverySec != 0 || r.MaxImpairedHz != float64(cfg.TickRateHz) {
		t.Errorf("recovery %d s, max %v Hz; want 0 s and %d Hz", r.RecoverySec, r.MaxImpairedHz, cfg.TickRateHz)
	}
}

// On the reference lossy path the peer is backed off to well under full rate, and is back at
// full rate before the healed stretch ends; with the controller disabled it is never backed off.
func TestLossyPathBackedOffAndRecovered(t *testing.T) {
	s, err := simulate(netcode.NetcodeConfig{}, defaultScenario(), 1, 50)
	if err != nil {
		t.Fatal(err)
	}
	if s.MedianImpairedHz > congestionlab.LossyMaxHz {
		t.Errorf("median send rate while impaired %v Hz, want at most %d", s.MedianImpairedHz, congestionlab.LossyMaxHz)
	}
	if s.RecoveryMaxSec >= defaultScenario().RecoverySec {
		t.Errorf("a peer was not back at full rate by the end of the run (recovery histogram %v)", s.RecoveryHistogram)
	}
	off := false
	s, err = simulate(netcode.NetcodeConfig{Congestion: netcode.CongestionConfig{Enabled: &off}}, defaultScenario(), 1, 5)
	if err != nil {
		t.Fatal(err)
	}
	if s.MedianImpairedHz != 60 || s.HoldFailures != s.Runs || s.RecoveryMaxSec != 0 {
		t.Errorf("controller disabled: %+v, want every peer sent 60 Hz throughout", s)
	}
}

// Over 1000 simulated peers on the reference lossy path (5% loss, 80 ms added), none is sent more
// than the lossy target allows while the impairment lasts, and every one is back at full rate
// within the recovery target: the delay that comes with the loss holds the peer through the
// loss-free stretches that the loss estimate alone reads as healthy (without the baseline hold,
// 253 of these 1000 peers are sent over 30 Hz for some two seconds).
func TestLossyTargetsHoldOverManyPeers(t *testing.T) {
	s, err := simulate(netcode.NetcodeConfig{}, defaultScenario(), 1, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if s.HoldFailures != 0 {
		t.Errorf("%d of %d peers sent over %d Hz on average over two seconds of the impairment", s.HoldFailures, s.Runs, congestionlab.LossyMaxHz)
	}
	if s.RecoveryLate != 0 || s.RecoveryMaxSec > congestionlab.LossyRecoverySec {
		t.Errorf("recovery histogram %v: %d peers later than %d s", s.RecoveryHistogram, s.RecoveryLate, congestionlab.LossyRecoverySec)
	}
}

func TestRunWritesJSON(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if err := run([]string{"--runs", "20", "--out", dir}, &out, &errOut); err != nil {
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
	if rec.Summary.Runs != 20 || len(rec.Summary.RecoveryHistogram) == 0 || !strings.Contains(out.String(), "median send rate while impaired") {
		t.Errorf("summary %+v, table:\n%s", rec.Summary, out.String())
	}
}

func TestRunRefusesBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--runs", "0"}, "--runs"},
		{[]string{"--loss", "1.5"}, "--loss"},
		{[]string{"--delay-ms", "-1"}, "--delay-ms"},
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
