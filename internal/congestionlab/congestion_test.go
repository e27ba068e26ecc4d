package congestionlab

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/netfleet/netfleet/internal/botswarm"
)

// What a second must show to be judged (see judged), and the margins of the assertions.
const (
	// A second is judged when the server kept time (ServerSample.KeptTime) in it and the
	// judgeSettleSec seconds before it. The settling time covers the controller's climb back from
	// a back-off a starved tick loop caused (throttle floor to 1 in about 1.7 s).
	judgeSettleSec = 3
	// A queueing client (capped, lossy-capped, drop) is paced under its path's bottleneck: the
	// median over judged seconds of its per-second snapshot-age p95, from SettleSec after its
	// path's onset, may exceed the class's warm-up median by at most queueMs (its path's 200 ms
	// queue fills without the controller).
	queueMs = 100
	// A queueing client is sent no more than its path carries: over the judged seconds from
	// SettleSec after the onset, at most queueMaxLoss of the snapshot packets sent to it are lost
	// beyond the path's own random loss (the queue overflows). Without the controller the server
	// keeps sending twice what the path carries and about half is lost.
	queueMaxLoss = 0.10
	// A policed client is backed off to what its policer passes: over the judged seconds from
	// SettleSec into the impairment, the policer drops at most policedMaxDrop of its packets
	// (without the controller, 40%).
	policedMaxDrop = 0.15
	// A random-loss client (lossy, bursty) is not backed off: its median send rate over judged
	// seconds from SettleSec into the impairment is at least recoveredHz. A recovered client is
	// sent every tick again; two judged seconds in a row at recoveredHz or more show it, from
	// recoveryFromSec after the impairment ended (the expected climb is about 2.5 s).
	recoveredHz     = 50
	recoveryFromSec = 4
	// A healthy client's frames over two judged seconds may trail the ticks the server ran by at
	// most healthySlack (a bot woken late moves frames across a second boundary; a backed-off one
	// misses half of them).
	healthySlack = 20
	// minJudgedPairs is how many pairs of judged seconds the healthy check needs; fewer mean the
	// machine was too loaded for the run to say anything, and the test is skipped.
	minJudgedPairs = 3
)

// TestCongestionResponse runs the reference scenario with the controller enabled and checks what
// the clients observed, with wide margins (make bench-congestion measures the reference targets
// themselves): the lossy and bursty clients, whose loss is random, keep their send rate; the
// capped, lossy-capped and drop clients are paced under their path's bottleneck so that its
// queue stays short and seldom overflows, the capped ones backed off (a median send rate of at
// most 40 Hz); the policed clients are backed off to what their policer passes; every impaired
// client comes back to full rate after the impairment ends; and the healthy clients keep full
// rate throughout. It judges only seconds in which the server's tick loop kept time (see
// judged), so a loaded machine cannot pass for a congested link.
func TestCongestionResponse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	r, err := Run(ctx, DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			logTimeline(t, r)
		}
	}()
	end := len(r.Swarm.Clients[0].Series) - 1 // the closing second is partial
	for _, c := range r.Swarm.Clients {
		if c.State != botswarm.StateDone {
			t.Fatalf("client %d (%s): state %q, code %d: every session should last the run", c.ID, c.Class, c.State, c.CloseCode)
		}
	}
	var judgedSecs []int
	for s := WarmupFrom; s < end; s++ {
		if judged(r, s) {
			judgedSecs = append(judgedSecs, s)
		}
	}
	t.Logf("demand %v B/s, caps and policers at %v B/s; impairment in seconds [%d, %d) of %d, the drop from %d; judged seconds %v",
		r.Demand, r.Limit, r.ImpairFrom, r.ImpairTo, end, r.DropFrom, judgedSecs)

	// Healthy first: without judged seconds nothing else can be trusted either.
	pairs := 0
	for s := WarmupFrom; s+1 < end; s++ {
		if !judged(r, s) || !judged(r, s+1) {
			continue
		}
		pairs++
		ticks := r.ServerTicks(s) + r.ServerTicks(s+1)
		for _, c := range r.Clients(ClassHealthy) {
			if got := c.Series[s].Hz + c.Series[s+1].Hz; got < ticks-healthySlack {
				t.Errorf("healthy client %d: %d frames in seconds %d-%d, the server ran %d ticks", c.ID, got, s, s+1, ticks)
			}
		}
	}
	if pairs < minJudgedPairs {
		t.Skipf("only %d pairs of seconds in which the server's tick loop kept time (machine overloaded); judged seconds %v", pairs, judgedSecs)
	}

	for _, class := range []string{ClassLossy, ClassBursty} {
		for _, c := range r.Clients(class) {
			// Random loss and a longer path are not congestion. Starvation lowers send rates,
			// so only judged seconds count.
			var sent []float64
			for s := r.ImpairFrom + SettleSec; s < r.ImpairTo; s++ {
				if judged(r, s) {
					sent = append(sent, c.Series[s].SentHz())
				}
			}
			if hz := botswarm.Median(sent); len(sent) > 0 && hz < recoveredHz {
				t.Errorf("%s client %d: median send rate %.1f Hz from %d s into the impairment, want at least %d: backed off for random loss",
					class, c.ID, hz, SettleSec, recoveredHz)
			}
		}
	}

	// Starvation only ever lowers send rates, so the capped back-off is judged over every second.
	if m := r.Measure(); !m.Capped.BackoffOK {
		t.Errorf("capped clients: median send rate %v Hz from %d s into the impairment, want at most %d: not backed off",
			m.Capped.SentHz, SettleSec, CappedMaxHz)
	}
	for _, q := range []struct {
		class string
		onset int
		loss  float64 // the path's own random loss
	}{{ClassCapped, r.ImpairFrom, 0}, {ClassLossyCapped, r.ImpairFrom, r.Options.LossRatio}, {ClassDrop, r.DropFrom, 0}} {
		base := r.Window(q.class, WarmupFrom, r.ImpairFrom).AgeP50Ms
		for _, c := range r.Clients(q.class) {
			var p95 []float64
			var got, lost int
			for s := q.onset + SettleSec; s < r.ImpairTo; s++ {
				if !judged(r, s) {
					continue
				}
				if c.Series[s].AgeP95Ms >= 0 {
					p95 = append(p95, c.Series[s].AgeP95Ms)
				}
				got, lost = got+c.Series[s].Packets, lost+c.Series[s].Lost
			}
			if sent := got + lost; sent > 0 {
				t.Logf("%s client %d: %d of %d snapshot packets lost from %d s after the onset", q.class, c.ID, lost, sent, SettleSec)
				if float64(lost) > (q.loss+queueMaxLoss)*float64(sent) {
					t.Errorf("%s client %d: %d of %d snapshot packets lost, want at most %.0f%%: it is sent more than the path carries",
						q.class, c.ID, lost, sent, 100*(q.loss+queueMaxLoss))
				}
			}
			qd := botswarm.Median(p95) - base
			t.Logf("%s client %d: median per-second snapshot-age p95 %.0f ms above the warm-up's %.0f ms", q.class, c.ID, qd, base)
			if len(p95) > 0 && qd > queueMs {
				t.Errorf("%s client %d: snapshot-age p95 %.0f ms above the warm-up's in the median judged second, want at most %d", q.class, c.ID, qd, queueMs)
			}
		}
	}
	for _, c := range r.Clients(ClassPoliced) {
		var in, dropped uint64
		for s := r.ImpairFrom + SettleSec; s < r.ImpairTo; s++ {
			if lc, ok := r.LinkSecond(c.ID, s); ok && judged(r, s) {
				in, dropped = in+lc.PacketsIn, dropped+lc.DroppedPolicer
			}
		}
		t.Logf("policed client %d: the policer dropped %d of %d packets from %d s into the impairment", c.ID, dropped, in, SettleSec)
		if in > 0 && float64(dropped) > policedMaxDrop*float64(in) {
			t.Errorf("policed client %d: the policer dropped %d of %d packets, want at most %.0f%%: not backed off to what it passes",
				c.ID, dropped, in, 100*policedMaxDrop)
		}
	}

	for _, class := range ImpairedClasses {
		for _, c := range r.Clients(class) {
			recovered, seen := false, false
			for s := r.ImpairTo + recoveryFromSec; s+1 < end; s++ {
				if judged(r, s) && judged(r, s+1) {
					seen = true
					recovered = recovered || c.Series[s].Hz >= recoveredHz && c.Series[s+1].Hz >= recoveredHz
				}
			}
			if !seen {
				t.Skipf("no two seconds in a row in which the server kept time from %d s after the impairment (machine overloaded)", recoveryFromSec)
			}
			if !recovered {
				t.Errorf("%s client %d: not back at %d Hz for two seconds from %d s after the impairment ended", class, c.ID, recoveredHz, recoveryFromSec)
			}
		}
	}
}

// judged reports whether second s and the judgeSettleSec before it are ones in which the server's
// tick loop kept time.
func judged(r *Result, s int) bool {
	for i := s - judgeSettleSec; i <= s; i++ {
		if i < 0 {
			continue
		}
		sample, ok := r.ServerSecond(i)
		if !ok || !sample.KeptTime() {
			return false
		}
	}
	return true
}

// logTimeline logs every client's per-second rate, lost packets and snapshot age, and the
// server's ticks, throttles and RTTs by slot, so a failure shows what happened when.
func logTimeline(t *testing.T, r *Result) {
	t.Helper()
	for _, c := range r.Swarm.Clients {
		var hz, lost, age []string
		for _, s := range c.Series {
			hz = append(hz, fmt.Sprint(s.Hz))
			lost = append(lost, fmt.Sprint(s.Lost))
			age = append(age, fmt.Sprintf("%.0f", s.AgeP95Ms))
		}
		t.Logf("client %2d %-7s Hz   %s", c.ID, c.Class, strings.Join(hz, " "))
		t.Logf("client %2d %-7s lost %s", c.ID, c.Class, strings.Join(lost, " "))
		t.Logf("client %2d %-7s age  %s", c.ID, c.Class, strings.Join(age, " "))
	}
	for _, s := range r.Server {
		var peers []string
		for _, p := range s.Peers {
			peers = append(peers, fmt.Sprintf("%d:%.0fHz/th%.2f/rtt%.0f/loss%.2f", p.Slot, p.SendRateHz, p.Throttle, p.RTTMillis, p.LossRatio))
		}
		t.Logf("server second %d: %d ticks (%d overloaded), latest start %.0f ms late, longest %.1f ms; %s",
			s.T, s.Ticks, s.OverloadedTicks, s.MaxLateMs, s.MaxWorkMs, strings.Join(peers, " "))
	}
}
