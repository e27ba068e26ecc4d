package session

import (
	"errors"
	"testing"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// smallFrames is a config whose frame pool holds two frames, cheap to exhaust.
func smallFrames() netcode.NetcodeConfig {
	return netcode.NetcodeConfig{
		Backpressure: netcode.BackpressureConfig{FrameBytes: 32768},
		Memory:       netcode.MemoryConfig{FramePoolBudgetBytes: 65536},
	}
}

// A skipped session gathers nothing; its next frame carries the union of what it missed, with no
// RESET while the skip run stays within the push log.
func TestSkipReplaysUnion(t *testing.T) {
	h := newHarness(t, busyWorld(300), smallFrames(), 120)
	p := h.addPeer()
	h.run(120)
	release := h.exhaustFrames()
	frames := p.s.Replication().Stats().Frames
	skips := 0
	for range 6 {
		switch r := h.step()[0]; r.Outcome {
		case Skipped:
			skips++
		case NotDue: // the slower rate class the skips moved it to
		default:
			t.Fatalf("outcome %d while the frame pool is exhausted", r.Outcome)
		}
	}
	if got := p.s.Replication().Stats().Frames; got != frames {
		t.Fatalf("a skipped session was gathered for: %d frames built, want %d", got, frames)
	}
	if st := p.s.Stats(); st.State != StateStalled || st.SkipRun != skips || skips < 3 {
		t.Errorf("while skipped (%d skips): %+v", skips, st)
	}
	release()
	h.untilBuilt(p)
	c := p.s.Counters()
	if c.SkipsPool != uint64(skips) || c.PushLogResets != 0 || c.ResetsSent != 0 {
		t.Errorf("counters after a short skip run: %+v", c)
	}
	h.converge(300)
	if p.cl.Stats().Resets != 0 {
		t.Error("the client was reset after a skip run inside the push log")
	}
}

// Past the push log, the session's view is re-delivered with a RESET.
func TestSkipPastPushLogResets(t *testing.T) {
	h := newHarness(t, busyWorld(300), smallFrames(), 120)
	p := h.addPeer()
	h.run(120)
	release := h.exhaustFrames()
	h.run(netcode.DefaultBackpressurePushLogTicks + 4)
	release()
	h.untilBuilt(p)
	c := p.s.Counters()
	if c.PushLogResets != 1 || c.ResetsSent != 1 {
		t.Fatalf("counters after a long skip run: %+v", c)
	}
	if p.cl.Stats().Resets != 1 {
		t.Fatalf("client resets %d, want 1", p.cl.Stats().Resets)
	}
	h.converge(300)
}

// A session that keeps being skipped is served every 2nd, then every 4th tick, and closed with
// 1013 once the stall lasted backpressure.closeStalledAfterMs.
func TestRateClassProgressionAndClose(t *testing.T) {
	h := newHarness(t, busyWorld(200), smallFrames(), 120)
	p := h.addPeer()
	h.run(60)
	h.exhaustFrames()
	var classes []int
	start := h.nowMs
	var closed Result
	var closedAt int64
	for range 400 {
		r := h.step()[0]
		if st := p.s.Stats(); st.Slot >= 0 && (len(classes) == 0 || classes[len(classes)-1] != st.RateClass) {
			classes = append(classes, st.RateClass)
		}
		if r.Outcome == Close {
			closed, closedAt = r, h.nowMs
			break
		}
	}
	if len(classes) != 3 || classes[0] != 1 || classes[1] != 2 || classes[2] != 4 {
		t.Errorf("rate classes went %v, want [1 2 4]", classes)
	}
	if closed.CloseCode != protocol.CloseStalled {
		t.Fatalf("closed with %+v, want %d", closed, protocol.CloseStalled)
	}
	// Closed on the first skip at or after 3 s; at class 4 skips come every 4th tick.
	stall := closedAt - start
	if stall < netcode.DefaultBackpressureCloseStalledAfterMs || stall > netcode.DefaultBackpressureCloseStalledAfterMs+5*1000/testTickRate {
		t.Errorf("closed after %d ms of stall", stall)
	}
}

// A session that recovers is relaxed back to its class one step per relaxAfterMs, and is not
// closed.
func TestRateClassRelaxes(t *testing.T) {
	h := newHarness(t, busyWorld(200), smallFrames(), 120)
	p := h.addPeer()
	h.run(60)
	release := h.exhaustFrames()
	h.run(60) // a second of skips: class 4
	if c := p.s.Stats().RateClass; c != 4 {
		t.Fatalf("class %d after a second of skips", c)
	}
	release()
	h.run(70)
	if c := p.s.Stats().RateClass; c != 2 {
		t.Errorf("class %d a second after the skips ended, want 2", c)
	}
	h.run(70)
	st := p.s.Stats()
	if st.RateClass != 1 || st.State != StateHealthy {
		t.Errorf("two seconds after: %+v", st)
	}
	h.converge(300)
}

// A declared class is served every 2nd (4th) tick; under overload half as often.
func TestDeclaredClass(t *testing.T) {
	h := newHarness(t, busyWorld(300), netcode.NetcodeConfig{}, 120)
	one, two, four := h.addPeerClass(1), h.addPeerClass(2), h.addPeerClass(4)
	count := func(ticks int) [3]int {
		var n [3]int
		for range ticks {
			res := h.step()
			for i := range n {
				if res[i].Outcome == Built || res[i].Outcome == Idle {
					n[i]++
				}
			}
		}
		return n
	}
	h.run(30)
	if n := count(120); n[0] < 100 || n[1] != 60 || n[2] != 30 {
		t.Errorf("served ticks of 120 for classes 1, 2, 4: %v", n)
	}
	h.overloaded = true
	if n := count(120); n[0] < 100 || n[1] != 30 || n[2] != 15 {
		t.Errorf("overloaded: served ticks of 120 for classes 1, 2, 4: %v", n)
	}
	for i, p := range []*peer{one, two, four} {
		if st := p.s.Stats(); st.DetailLevel < 1 || st.DeclaredClass != []int{1, 2, 4}[i] {
			t.Errorf("overloaded peer %d: %+v", i, st)
		}
	}
	h.overloaded = false
	h.converge(600)
}

// A client that stops applying what it is sent, and keeps pinging, is skipped once a frame sent
// more than RTT + lagSkipRttAllowanceMs ago is still not applied; probes go out now and then;
// if it recovers the lag clears, if not it is closed as stalled.
func TestLagSkip(t *testing.T) {
	h := newHarness(t, busyWorld(300), netcode.NetcodeConfig{}, 120)
	p := h.addPeer()
	h.run(60)
	p.deliver, p.ack = false, false
	sent := p.s.Counters().FramesSent
	h.run(60)
	c := p.s.Counters()
	if c.SkipsLag == 0 || c.LagProbes == 0 {
		t.Fatalf("a second of not applying: %+v", c)
	}
	// Lag starts after RTT (20 ms) + 250 ms of sends; the rest of the second is skipped but for
	// a probe every allowance.
	if n := c.FramesSent - sent; n > 24 {
		t.Errorf("%d frames sent in a second to a client that applies nothing", n)
	}
	p.deliver, p.ack = true, true
	h.run(60)
	if st := p.s.Stats(); st.SkipRun != 0 || st.State == StateStalled {
		t.Errorf("after recovering: %+v", st)
	}
	h.converge(300)

	// converge stopped the world; a world that does not change sends nothing, and an idle session
	// is never behind.
	h.dt = 1.0 / testTickRate
	p.deliver, p.ack = false, false
	var r Result
	for range 400 {
		if r = h.step()[0]; r.Outcome == Close {
			break
		}
	}
	if r.CloseCode != protocol.CloseStalled {
		t.Errorf("a client that never applies again: %+v, want close %d", r, protocol.CloseStalled)
	}
}

// A client that stops pinging is closed with 4001 after backpressure.pingTimeoutMs.
func TestPingTimeout(t *testing.T) {
	h := newHarness(t, busyWorld(100), netcode.NetcodeConfig{}, 120)
	p := h.addPeer()
	h.run(30)
	p.ping = false
	last := h.nowMs
	for i := range 300 {
		r := h.step()[0]
		if r.Outcome != Close {
			continue
		}
		if r.CloseCode != protocol.CloseNoPing {
			t.Fatalf("closed with %d", r.CloseCode)
		}
		// The last PING came at most one ping interval before pinging stopped.
		if silent := h.nowMs - last; silent < netcode.DefaultBackpressurePingTimeoutMs-250 || silent > netcode.DefaultBackpressurePingTimeoutMs+50 {
			t.Errorf("closed %d ms after the last chance to ping (tick %d)", silent, i)
		}
		return
	}
	t.Fatal("a client that stopped pinging was not closed")
}

// Over-budget COMMANDs are refused whole; abuseWindows adjacent abusive windows close the session
// with 1008, and a single burst does not.
func TestIngressAbuse(t *testing.T) {
	h := newHarness(t, busyWorld(100), netcode.NetcodeConfig{}, 120)
	burst, flood := h.addPeer(), h.addPeer()
	payload := make([]byte, 200)
	cmd := cmdMsg(t, payload)
	send := func(p *peer, n int) (refused int) {
		for range n {
			if errors.Is(p.s.HandleMessage(cmd, h.nowMs), ErrRefused) {
				refused++
			}
		}
		p.s.DrainCommands(func(c Command) {
			if len(c.Payload) != len(payload) {
				t.Fatalf("a refused command was cut: %d bytes queued", len(c.Payload))
			}
		})
		return refused
	}
	h.run(10)
	// A one-second burst of 40 commands a tick, far over the budget.
	refused := 0
	for range 60 {
		refused += send(burst, 40)
		h.step()
	}
	if refused < netcode.DefaultIngressAbuseRefusalsPerWindow {
		t.Fatalf("only %d refusals in a flooded second", refused)
	}
	var closed Result
	var ticks int
	for ticks = range 400 {
		send(flood, 40)
		res := h.step()
		if res[0].Outcome == Close {
			t.Fatalf("a single burst closed the session: %+v", res[0])
		}
		if res[1].Outcome == Close {
			closed = res[1]
			break
		}
	}
	if closed.CloseCode != protocol.CloseAbuse {
		t.Fatalf("the flood was not closed with 1008: %+v", closed)
	}
	// Three whole windows of 1 s: the third closes at its end, plus at most a window's start.
	if ms := ticks * 1000 / testTickRate; ms < 2*netcode.DefaultIngressWindowMs || ms > 4*netcode.DefaultIngressWindowMs {
		t.Errorf("closed after %d ms of flooding", ms)
	}
	if c := burst.s.Counters(); c.IngressRefused == 0 || c.Acks == 0 {
		t.Errorf("burst counters %+v", c)
	}
}

// A budget too small for a busy view moves the session up the detail levels; the state pool's
// floor takes it to the last level, with half the radius. Either way its client converges on the
// world within the radius in force: no state is dropped.
func TestDetailLevelsNeverDropState(t *testing.T) {
	h := newHarness(t, busyWorld(400), netcode.NetcodeConfig{}, 150)
	p := h.addPeer()
	p.s.SetBytesPerSecond(6000)
	h.run(300)
	if st := p.s.Stats(); st.DetailLevel == 0 {
		t.Fatalf("a starved session stayed at level 0: %+v", st)
	}
	h.converge(3000)
	h.dt = 1.0 / testTickRate
	p.s.SetStatePressure(MaxLevel)
	h.run(60)
	if st := p.s.Stats(); st.DetailLevel != MaxLevel || st.InterestRadius != 75 {
		t.Fatalf("under state pressure: %+v", st)
	}
	h.converge(3000)
	h.dt = 1.0 / testTickRate
	p.s.SetStatePressure(0)
	p.s.SetBytesPerSecond(-1)
	h.run(300)
	if st := p.s.Stats(); st.DetailLevel != 0 || st.InterestRadius != 150 {
		t.Fatalf("relieved: %+v", st)
	}
	h.converge(3000)
}
