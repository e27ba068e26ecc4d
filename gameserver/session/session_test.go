package session

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/congestion"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

func TestSessionsConverge(t *testing.T) {
	h := newHarness(t, busyWorld(300), netcode.NetcodeConfig{}, 120)
	for range 3 {
		h.addPeer()
	}
	h.run(300)
	h.converge(200)
	for i, p := range h.peers {
		st, c := p.s.Stats(), p.s.Counters()
		if st.State != StateHealthy || st.RateClass != 1 || st.Throttle != 1 || st.KnownEntities == 0 {
			t.Errorf("peer %d stats %+v", i, st)
		}
		if c.FramesSent == 0 || c.PacketsSent == 0 || c.BytesSent == 0 || c.Acks == 0 || c.Pings == 0 ||
			c.SkipsBusy+c.SkipsPool != 0 || c.Malformed != 0 {
			t.Errorf("peer %d counters %+v", i, c)
		}
		if st.SendRateHz <= 0 || st.SendRateHz > testTickRate {
			t.Errorf("peer %d send rate %v Hz", i, st.SendRateHz)
		}
	}
}

// An idle tick — due, nothing changed — sends nothing and is not a skip.
func TestIdleTickIsNotASkip(t *testing.T) {
	h := newHarness(t, busyWorld(100), netcode.NetcodeConfig{}, 120)
	p := h.addPeer()
	h.run(120)
	h.converge(200)
	h.run(30) // the last acknowledgements settle
	before := p.s.Counters()
	for range 60 {
		if r := h.step()[0]; r.Outcome != Idle {
			t.Fatalf("frozen, converged world: outcome %d, want Idle", r.Outcome)
		}
		if len(p.out.snapshots)+len(p.out.reliable) != 0 {
			t.Fatal("an idle tick sent something")
		}
	}
	after := p.s.Counters()
	if after.FramesIdle-before.FramesIdle != 60 || after.SkipsBusy+after.SkipsPool != 0 || after.PacketsSent != before.PacketsSent {
		t.Errorf("counters before %+v after %+v", before, after)
	}
}

// The rate lever: a congested peer is not due every tick; the ticks it is not due build nothing,
// and its next frame carries the union, so its client still converges.
func TestRateLeverDefersToUnion(t *testing.T) {
	h := newHarness(t, busyWorld(300), netcode.NetcodeConfig{}, 120)
	p := h.addPeer()
	h.run(30)
	p.link.RTTMs = 400 // far above the 20 ms baseline: congested at every evaluation
	notDue := 0
	for range 240 {
		built := p.s.Counters().FramesBuilt
		if r := h.step()[0]; r.Outcome == NotDue {
			notDue++
			if p.s.Counters().FramesBuilt != built {
				t.Fatal("a tick the rate lever skipped built a frame")
			}
		}
	}
	st := p.s.Stats()
	if st.Throttle >= 0.5 || st.SendIntervalTick < 2 || notDue == 0 || st.State != StateDegraded {
		t.Fatalf("congested peer: %+v, %d ticks not due", st, notDue)
	}
	// The admin API says why: delay, over a baseline held within a millisecond of the path's
	// 20 ms (it drifts only until the first evaluation sees the rise).
	if st.Congestion != congestion.SignalDelay || st.BaselineRTTMs < 20 || st.BaselineRTTMs > 21 {
		t.Errorf("congested by %q over a %d ms baseline, want delay over 20-21 ms", st.Congestion, st.BaselineRTTMs)
	}
	h.converge(600)
}

// The budget lever: frames never exceed the static budget scaled by the throttle.
func TestBudgetLever(t *testing.T) {
	h := newHarness(t, busyWorld(400), netcode.NetcodeConfig{}, 150)
	static := netcode.DefaultBudgetSnapshotBytesPerTick
	p := h.addPeer()
	for i := range 300 {
		if i == 100 {
			p.link.RTTMs = 400
		}
		h.step()
		total := 0
		for _, b := range p.out.snapshots {
			total += len(b)
		}
		if limit := p.s.Stats().FrameBudgetBytes; total > limit || limit > static {
			t.Fatalf("tick %d: frame of %d bytes, budget %d", i, total, limit)
		}
	}
	if b := p.s.Stats().FrameBudgetBytes; b >= static || b < netcode.DefaultCongestionBudgetFloorBytes {
		t.Errorf("congested frame budget %d, want in [floor, %d)", b, static)
	}
	p.link.RTTMs = 20
	h.converge(2000)
}

// A session whose byte rate cannot carry what it has to send is moved up the detail levels and
// served less often; it loses rate, never state.
func TestSlowSessionLosesRateNotState(t *testing.T) {
	h := newHarness(t, busyWorld(300), netcode.NetcodeConfig{}, 120)
	fast, slow := h.addPeer(), h.addPeer()
	slow.s.SetBytesPerSecond(1200)
	h.run(600)
	fs, ss := fast.s.Stats(), slow.s.Stats()
	if ss.DetailLevel == 0 || ss.SendRateHz >= fs.SendRateHz || ss.State == StateHealthy {
		t.Fatalf("slow session: %+v %+v; fast %+v", ss, slow.s.Counters(), fs)
	}
	if ss.RateBytesPerSec != 1200 {
		t.Errorf("slow session paced at %v B/s", ss.RateBytesPerSec)
	}
	h.converge(3000)
}

func TestHandleMessage(t *testing.T) {
	h := newHarness(t, busyWorld(50), netcode.NetcodeConfig{Memory: netcode.MemoryConfig{
		MaxInboundMessageBytes: 64, MaxPendingBytesPerConnection: 64, MaxParkedBytesPerConnection: 256,
	}}, 100)
	p := h.addPeer()
	p.ack, p.ping = false, false
	h.run(5)
	seq := p.s.Replication().Stats().Packets
	cases := []struct {
		name string
		msg  []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"wrong version", []byte{0x23}, ErrMalformed},
		{"snapshot from a client", []byte{protocol.Version<<4 | byte(protocol.MsgSnapshot), 0, 0}, ErrMalformed},
		{"unknown type", []byte{protocol.Version<<4 | 9}, ErrMalformed},
		{"truncated ack", ackMsg(protocol.Ack{Latest: 1})[:5], ErrMalformed},
		{"ack of a future packet", ackMsg(protocol.Ack{Latest: uint16(seq + 5)}), ErrMalformed},
		{"ping with trailing bytes", append(pingMsg(protocol.Ping{}), 1), ErrMalformed},
		{"oversize", make([]byte, 65), ErrOversize},
		{"ack", ackMsg(protocol.Ack{Latest: uint16(seq - 1), Received: 1}), nil},
		{"ping", pingMsg(protocol.Ping{LastAppliedTick: uint32(h.tick)}), nil},
		{"command", commandMsg(t, protocol.Command{Seq: 7, Tick: 0xdeadbeef, Payload: []byte("forty bytes of input, the first command.")}), nil},
		{"command over the inbox", cmdMsg(t, make([]byte, 40)), ErrInboxFull},
	}
	for _, tc := range cases {
		if err := p.s.HandleMessage(tc.msg, h.nowMs); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	c := p.s.Counters()
	if c.Malformed != 7 || c.Oversize != 1 || c.Acks != 1 || c.Pings != 1 || c.Commands != 1 || c.InboxRefused != 1 ||
		c.MessagesReceived != uint64(len(cases)) {
		t.Errorf("counters %+v", c)
	}
	if p.s.Stats().ClientTick != uint32(h.tick) {
		t.Errorf("PING's last applied tick not recorded: %d", p.s.Stats().ClientTick)
	}
	var got []Command
	p.s.DrainCommands(func(c Command) { c.Payload = bytes.Clone(c.Payload); got = append(got, c) })
	if len(got) != 1 || got[0].Seq != 7 || got[0].Tick != 0xdeadbeef || string(got[0].Payload) != "forty bytes of input, the first command." {
		t.Errorf("drained %+v", got)
	}
	p.s.DrainCommands(func(Command) { t.Error("the inbox was not emptied") })
	p.s.End()
	if err := p.s.HandleMessage(pingMsg(protocol.Ping{}), h.nowMs); !errors.Is(err, ErrInactive) {
		t.Errorf("inactive session: %v", err)
	}
}

func TestSendErrorsCounted(t *testing.T) {
	h := newHarness(t, busyWorld(100), netcode.NetcodeConfig{}, 120)
	p := h.addPeer()
	p.out.fail = true
	h.run(10)
	if c := p.s.Counters(); c.SendErrors == 0 || c.PacketsSent != 0 {
		t.Errorf("counters %+v", c)
	}
}

func TestFramePool(t *testing.T) {
	p := NewFramePool(3*1000, 1000)
	a, b, c := p.Get(), p.Get(), p.Get()
	if a == nil || b == nil || c == nil {
		t.Fatal("pool refused within its budget")
	}
	if p.Get() != nil {
		t.Fatal("pool allocated past its budget")
	}
	p.Put(a)
	if got := p.Get(); got != a {
		t.Fatal("a returned frame was not reused")
	}
	p.Put(a)
	p.Configure(3*2000, 2000) // bigger frames: the free one of the old size goes
	if st := p.Stats(); st.Free != 0 || st.HeldBytes != 2000 || st.InUse != 2 || st.Refused != 1 {
		t.Fatalf("after Configure: %+v", st)
	}
	p.Put(b) // old size: dropped on return
	if f := p.Get(); f == nil || f.Cap() != 2000 {
		t.Fatal("no frame of the new size")
	}
	if st := p.Stats(); st.HeldBytes != 1000+2000 || st.InUse != 2 {
		t.Fatalf("after new-size Get: %+v", st)
	}
}

func TestMeter(t *testing.T) {
	var m sendMeter
	m.reset(60)
	for tick := uint64(1); tick <= 300; tick++ {
		if tick%3 == 0 {
			m.mark(tick)
		}
	}
	if n := m.count(300); n != 20 {
		t.Errorf("every 3rd tick over a second: %d sends, want 20", n)
	}
	if n := m.count(300 + 60); n != 0 {
		t.Errorf("a second later: %d sends, want 0", n)
	}
	m.mark(1000)
	if n := m.count(1000); n != 1 {
		t.Errorf("after a gap: %d sends, want 1", n)
	}
}

// A warm session's send and receive paths allocate nothing: ticks that build and send frames to a
// client, and that client's ACKs and PINGs (and a malformed message) coming back.
func TestWarmSessionAllocatesNothing(t *testing.T) {
	h := newHarness(t, busyWorld(300), netcode.NetcodeConfig{}, 120)
	p := h.addPeer()
	h.run(600)
	buf := make([]byte, 0, 256)
	bad := []byte{0xff}
	out := &toClient{cl: p.cl}
	tick := func() {
		h.w.Step(h.dt)
		h.tick = uint64(h.w.Store().Tick())
		h.nowMs += 16
		h.nanos += 16e6
		out.nowMs = h.nowMs
		p.s.Tick(h.now(), p.link, out)
		if b, ok := p.cl.AppendAck(buf[:0]); ok {
			_ = p.s.HandleMessage(b, h.nowMs)
		}
		_ = p.s.HandleMessage(p.cl.AppendPing(buf[:0], h.nowMs), h.nowMs)
		_ = p.s.HandleMessage(bad, h.nowMs)
	}
	for range 300 {
		tick()
	}
	sent := p.s.Counters().PacketsSent
	if allocs := testing.AllocsPerRun(200, tick); allocs != 0 {
		t.Errorf("warm session: %.1f allocations per tick", allocs)
	}
	if p.s.Counters().PacketsSent == sent || p.s.Counters().Acks == 0 {
		t.Fatalf("the measured ticks sent nothing: %+v", p.s.Counters())
	}
}

// toClient is a Sender that hands every message straight to a client.
type toClient struct {
	cl    *client.Client
	nowMs int64
}

func (c *toClient) SendSnapshot(b []byte) error { return c.cl.HandleMessage(b, c.nowMs) }
func (c *toClient) SendReliable(b []byte) error { return c.cl.HandleMessage(b, c.nowMs) }

// A peer whose path carries half of what it is sent: the congestion controller's bottleneck
// ceiling paces the session under the path — its byte rate and frames are held to the ceiling —
// so the path's queue stays short, and frames the ceiling cuts leave the detail level alone (the
// controller's probes need the peer's demand). When the path recovers, so does the peer.
func TestBottleneckCeiling(t *testing.T) {
	h := newHarness(t, busyWorld(400), netcode.NetcodeConfig{}, 150)
	p := h.addPeer()
	h.run(120)
	before := p.s.Counters().BytesSent
	h.run(120)
	demand := float64(p.s.Counters().BytesSent-before) / 2 // bytes per second
	p.bottleneck = &bottleneck{rate: demand / 2, queueMs: 200}
	cut := 0
	for i := range 8 * testTickRate {
		if i == 2*testTickRate {
			p.bottleneck.sojourns = p.bottleneck.sojourns[:0] // the onset
		}
		built := h.step()[0].Outcome == Built
		st := p.s.Stats()
		ceiling := p.s.cc.ByteRateCeiling()
		if ceiling == 0 || !built {
			continue
		}
		if st.CeilingBytesPerSec != ceiling || st.State == StateHealthy {
			t.Fatalf("tick %d: Stats report a ceiling of %v B/s and state %s, the controller holds %v", i, st.CeilingBytesPerSec, st.State, ceiling)
		}
		if st.RateBytesPerSec != ceiling || st.FrameBudgetBytes > p.s.cc.FrameCeilingBytes() {
			t.Fatalf("tick %d: paced at %v B/s, frame budget %d; ceiling %v B/s, frame ceiling %d",
				i, st.RateBytesPerSec, st.FrameBudgetBytes, ceiling, p.s.cc.FrameCeilingBytes())
		}
		if p.s.ceilingBound {
			cut++
		}
		if st.DetailLevel != 0 {
			t.Fatalf("tick %d: detail level %d under the ceiling", i, st.DetailLevel)
		}
	}
	s := slices.Clone(p.bottleneck.sojourns)
	slices.Sort(s)
	t.Logf("demand %.0f B/s; queueing p95 after the onset %.0f ms over %d packets; %d frames cut by the ceiling",
		demand, s[len(s)*95/100], len(s), cut)
	if cut == 0 {
		t.Fatal("the ceiling never cut a frame: the scenario does not test the detail level")
	}
	if q := s[len(s)*95/100]; q > 80 {
		t.Errorf("queueing p95 %.0f ms on the capped path", q)
	}
	// The packets still queued on the path are lost when it is removed: the loss backs the peer
	// off to the floor, and it climbs back by the additive increase (1.7 s)
	// before it can outgrow the ceiling (released 4.8 s after the recovery).
	p.bottleneck = nil
	h.run(6 * testTickRate)
	if c := p.s.cc.ByteRateCeiling(); c != 0 && c < demand {
		t.Errorf("6 s after the path recovered: ceiling %v B/s", c)
	}
	if c := p.s.Stats().CeilingBytesPerSec; c != p.s.cc.ByteRateCeiling() {
		t.Errorf("6 s after the path recovered: Stats report a ceiling of %v B/s, the controller holds %v", c, p.s.cc.ByteRateCeiling())
	}
	h.converge(600)
}
