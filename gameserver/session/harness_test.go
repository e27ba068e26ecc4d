package session

import (
	"testing"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/demo"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/gameserver/snapshot"
)

// The harness runs sessions against in-memory clients tick by tick, with an injected clock and
// link: every rule is exercised deterministically, without a network.

const testTickRate = 60

// recorder is a Sender that keeps what it is given.
type recorder struct {
	snapshots [][]byte
	reliable  [][]byte
	fail      bool
}

func (r *recorder) SendSnapshot(b []byte) error {
	if r.fail {
		return errSend
	}
	r.snapshots = append(r.snapshots, append([]byte(nil), b...))
	return nil
}

func (r *recorder) SendReliable(b []byte) error {
	if r.fail {
		return errSend
	}
	r.reliable = append(r.reliable, append([]byte(nil), b...))
	return nil
}

type sendError struct{}

func (sendError) Error() string { return "send failed" }

var errSend error = sendError{}

// peer is one session with its client.
type peer struct {
	s    *Session
	cl   *client.Client
	out  recorder
	link Link
	// deliver: the client receives what the session sends; else snapshots are lost on the way
	// and reliable messages wait.
	deliver bool
	// ack: the client acknowledges what it received; ping: it pings at 4 Hz.
	ack, ping bool
	// backlog holds reliable messages not delivered yet.
	backlog [][]byte
	buf     []byte
	// bottleneck, if set, is on the way to the client.
	bottleneck *bottleneck
}

// bottleneck is a FIFO link of rate bytes per second with a tail-drop queue of queueMs: a
// snapshot crosses it after the ones before it, in its size over the rate, and arrives at the
// first tick after it has. sojourns records each packet's time in it.
type bottleneck struct {
	rate     float64
	queueMs  float64
	freeMs   float64 // when the link has sent what it holds
	queue    []crossing
	sojourns []float64
}

type crossing struct {
	doneMs float64
	msg    []byte
}

// pass takes the snapshots sent at nowMs and returns those that have crossed by then.
func (b *bottleneck) pass(nowMs int64, sent [][]byte) [][]byte {
	now := float64(nowMs)
	for _, m := range sent {
		done := max(now, b.freeMs) + float64(len(m))*1000/b.rate
		if done-now > b.queueMs {
			continue
		}
		b.freeMs = done
		b.queue = append(b.queue, crossing{doneMs: done, msg: m})
		b.sojourns = append(b.sojourns, done-now)
	}
	n := 0
	for n < len(b.queue) && b.queue[n].doneMs <= now {
		n++
	}
	out := make([][]byte, n)
	for i := range n {
		out[i] = b.queue[i].msg
	}
	b.queue = b.queue[n:]
	return out
}

type harness struct {
	t      testing.TB
	w      *demo.World
	shared *snapshot.Shared
	cfg    Config
	frames *FramePool
	peers  []*peer
	tick   uint64
	nowMs  int64
	nanos  int64
	dt     float32
	// overloaded is passed to every session as the server's load.
	overloaded bool
	// afterTick, if set, runs after every session ticked.
	afterTick func()
	// ownRefused is the check on the clients' own ACKs and PINGs; nil means they must be
	// accepted.
	ownRefused func(error) bool
}

func newHarness(t testing.TB, wcfg demo.Config, nc netcode.NetcodeConfig, radius float32) *harness {
	t.Helper()
	w, err := demo.NewWorld(wcfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := NewConfig(netcode.MustResolve(nc), radius)
	if err != nil {
		t.Fatal(err)
	}
	d := nc.Default()
	return &harness{
		t: t, w: w, shared: snapshot.NewShared(w.Store().Capacity()), cfg: cfg, frames: NewFramePool(d.Memory.FramePoolBudgetBytes, int(d.Backpressure.FrameBytes)),
		tick: uint64(w.Store().Tick()), nowMs: 1_000_000, dt: 1.0 / testTickRate,
	}
}

func (h *harness) now() Now {
	return Now{Tick: h.tick, UnixMs: h.nowMs, Nanos: h.nanos, Overloaded: h.overloaded}
}

// addPeer starts a session for a new avatar; its client receives and acknowledges everything.
func (h *harness) addPeer() *peer {
	h.t.Helper()
	return h.addPeerClass(1)
}

// addPeerClass starts a session that declared a rate class.
func (h *harness) addPeerClass(class int) *peer {
	h.t.Helper()
	avatar, err := h.w.AddAvatar()
	if err != nil {
		h.t.Fatal(err)
	}
	snap, err := snapshot.NewView(h.w.Store(), h.shared, h.cfg.Snapshot)
	if err != nil {
		h.t.Fatal(err)
	}
	s := New(h.cfg, h.frames)
	if err := s.Start(len(h.peers), snap, avatar, class, h.now()); err != nil {
		h.t.Fatal(err)
	}
	p := &peer{s: s, cl: client.New(), deliver: true, ack: true, ping: true, link: Link{RTTMs: 20}}
	h.peers = append(h.peers, p)
	return p
}

// step advances one tick: the world steps, every session ticks, every client takes what was sent
// to it and answers at once (ACK, PING at 4 Hz).
func (h *harness) step() []Result {
	h.t.Helper()
	h.w.Step(h.dt)
	h.tick = uint64(h.w.Store().Tick())
	h.nowMs += 1000 / testTickRate
	h.nanos += int64(1e9) / testTickRate
	res := make([]Result, len(h.peers))
	for i, p := range h.peers {
		if !p.s.Active() {
			continue
		}
		p.out.snapshots, p.out.reliable = p.out.snapshots[:0], p.out.reliable[:0]
		res[i] = p.s.Tick(h.now(), p.link, &p.out)
		if res[i].Outcome == Close {
			p.s.End()
			continue
		}
		// Reliable messages are never lost, only late: the transport resends them.
		p.backlog = append(p.backlog, p.out.reliable...)
		if p.deliver {
			for _, m := range p.backlog {
				if err := p.cl.HandleMessage(m, h.nowMs); err != nil {
					h.t.Fatalf("client refused a RESET: %v", err)
				}
			}
			p.backlog = p.backlog[:0]
			arrived := p.out.snapshots
			if p.bottleneck != nil {
				arrived = p.bottleneck.pass(h.nowMs, p.out.snapshots)
			}
			for _, m := range arrived {
				if err := p.cl.HandleMessage(m, h.nowMs); err != nil {
					h.t.Fatalf("client refused a snapshot: %v", err)
				}
			}
		}
		if p.ack && p.cl.AckDue() {
			if b, ok := p.cl.AppendAck(p.buf[:0]); ok {
				if err := p.s.HandleMessage(b, h.nowMs); err != nil && !h.allowed(err) {
					h.t.Fatalf("session refused an ACK: %v", err)
				}
			}
		}
		if p.ping && p.cl.PingDue(h.nowMs) {
			if err := p.s.HandleMessage(p.cl.AppendPing(p.buf[:0], h.nowMs), h.nowMs); err != nil && !h.allowed(err) {
				h.t.Fatalf("session refused a PING: %v", err)
			}
		}
	}
	if h.afterTick != nil {
		h.afterTick()
	}
	return res
}

// allowed reports whether the session may refuse a client's own ACK or PING with err.
func (h *harness) allowed(err error) bool { return h.ownRefused != nil && h.ownRefused(err) }

// sessions lists the harness's sessions.
func (h *harness) sessions() []*Session {
	out := make([]*Session, len(h.peers))
	for i, p := range h.peers {
		out[i] = p.s
	}
	return out
}

func (h *harness) run(ticks int) {
	for range ticks {
		h.step()
	}
}

// untilBuilt steps until p's session builds a frame, at most a second.
func (h *harness) untilBuilt(p *peer) {
	h.t.Helper()
	for range testTickRate {
		if r := h.step(); r[h.index(p)].Outcome == Built {
			return
		}
	}
	h.t.Fatal("no frame built within a second")
}

func (h *harness) index(p *peer) int {
	for i, q := range h.peers {
		if q == p {
			return i
		}
	}
	return -1
}

// exhaustFrames takes every frame the pool will give and returns a function that gives them
// back.
func (h *harness) exhaustFrames() (release func()) {
	var held []*snapshot.Frame
	for f := h.frames.Get(); f != nil; f = h.frames.Get() {
		held = append(held, f)
	}
	return func() {
		for _, f := range held {
			h.frames.Put(f)
		}
	}
}

// problems compares a client's view with the world around its session's focus, within the
// session's current radius (and the 10% exit hysteresis).
func (h *harness) problems(p *peer) int {
	x, y, _, ok := h.w.Position(p.s.Focus())
	if !ok {
		return 1
	}
	r := p.s.InterestRadius()
	n := 0
	st := h.w.Store()
	for _, hit := range st.Query(x, y, r, nil) {
		e, ok := p.cl.Entity(hit.Slot)
		if !ok || e.State != st.States()[hit.Slot] {
			n++
		}
	}
	inExit := map[uint16]bool{}
	for _, hit := range st.Query(x, y, r*1.1, nil) {
		inExit[hit.Slot] = true
	}
	for _, e := range view(p.cl) {
		if !inExit[e.ID] || e.State != st.States()[e.ID] {
			n++
		}
	}
	return n
}

// view lists a client's live entities. Range also yields entries a RESET freed (they keep their
// alive flag until reused), so every id is looked up again by Entity, which sees only live ones.
func view(cl *client.Client) map[uint16]client.Entity {
	out := map[uint16]client.Entity{}
	cl.Range(func(e client.Entity) bool {
		if cur, ok := cl.Entity(e.ID); ok {
			out[e.ID] = cur
		}
		return true
	})
	return out
}

// converge freezes the world and runs until every client's view matches, failing after limit
// ticks.
func (h *harness) converge(limit int) {
	h.t.Helper()
	h.dt = 0
	for range limit {
		h.step()
		ok := true
		for _, p := range h.peers {
			if p.s.Active() && h.problems(p) != 0 {
				ok = false
			}
		}
		if ok {
			return
		}
	}
	for i, p := range h.peers {
		if p.s.Active() {
			h.t.Errorf("peer %d: %d differences from the world", i, h.problems(p))
		}
	}
	h.t.FailNow()
}

// busyWorld is a small world where every session sees dozens of moving entities.
func busyWorld(population int) demo.Config {
	return demo.Config{Seed: 3, Capacity: population + 64, Population: population, HalfExtent: 200}
}

// encode helpers for hand-made inbound messages.
func ackMsg(a protocol.Ack) []byte   { return protocol.AppendAck(nil, &a) }
func pingMsg(p protocol.Ping) []byte { return protocol.AppendPing(nil, &p) }
func cmdMsg(tb testing.TB, payload []byte) []byte {
	tb.Helper()
	return commandMsg(tb, protocol.Command{Payload: payload})
}

func commandMsg(tb testing.TB, c protocol.Command) []byte {
	tb.Helper()
	b, err := protocol.AppendCommand(nil, &c)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
