package broadcast

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/demo"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/entity"
)

// testDeadline bounds every wait on the network: a hang guard generous enough for a loaded
// two-core machine, not a speed assertion.
const testDeadline = 30 * time.Second

var loopback = netip.MustParseAddrPort("127.0.0.1:0")

// bot is a well-behaved test client: a real ENet client host and the protocol client, acking what
// it receives and pinging at 4 Hz like a real client.
type bot struct {
	host    *enet.Host
	peer    enet.Peer
	cl      *client.Client
	ev      enet.Event
	buf     []byte
	paused  bool // stops servicing its host, as a client that stops reading
	deaf    bool // services its host but applies (and so acknowledges) nothing it receives
	up      bool // connected
	down    bool // disconnected
	code    uint32
	recvErr int
	data    uint32
}

// newBot connects a bot to server; data is its connect data, which the server keeps per session.
func newBot(tb testing.TB, server netip.AddrPort, data uint32) *bot {
	tb.Helper()
	h, err := enet.NewHost(enet.Config{Peers: 1, Channels: Channels})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(h.Destroy)
	p, err := h.Connect(server, Channels, data)
	if err != nil {
		tb.Fatal(err)
	}
	return &bot{host: h, peer: p, cl: client.New(), buf: make([]byte, 0, 256), data: data}
}

// service handles every event waiting on the bot's host, then acks and pings.
func (bt *bot) service(tb testing.TB, nowMs int64) {
	if bt.paused || bt.down {
		return
	}
	for {
		ok, err := bt.host.Service(&bt.ev, 0)
		if err != nil {
			tb.Fatalf("bot service: %v", err)
		}
		if !ok {
			break
		}
		switch bt.ev.Type {
		case enet.EventConnect:
			bt.up = true
			bt.send(tb, bt.cl.AppendHello(bt.buf[:0]), enet.Reliable)
		case enet.EventDisconnect:
			bt.down, bt.code = true, bt.ev.Data
			return
		case enet.EventReceive:
			if bt.deaf {
				continue
			}
			if bt.cl.HandleMessage(bt.ev.Packet.Bytes(), nowMs) != nil {
				bt.recvErr++
			}
		}
	}
	if !bt.up {
		return
	}
	if bt.cl.AckDue() {
		if b, ok := bt.cl.AppendAck(bt.buf[:0]); ok {
			bt.send(tb, b, enet.Unreliable)
		}
	}
	if bt.cl.PingDue(nowMs) {
		bt.send(tb, bt.cl.AppendPing(bt.buf[:0], nowMs), enet.Unreliable)
	}
}

func (bt *bot) send(tb testing.TB, b []byte, flags enet.PacketFlags) {
	if err := bt.peer.Send(ChannelSnapshot, b, flags); err != nil && bt.up && !bt.down {
		tb.Fatalf("bot send: %v", err)
	}
}

// swarm services a set of bots from one goroutine.
type swarm []*bot

func (s swarm) service(tb testing.TB) {
	now := time.Now().UnixMilli()
	for _, bt := range s {
		bt.service(tb, now)
	}
}

// until services the bots every millisecond until cond holds, failing the test at the deadline.
func (s swarm) until(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	s.untilEvery(tb, what, time.Millisecond, cond)
}

// untilEvery services the bots every interval until cond holds, failing at the deadline.
func (s swarm) untilEvery(tb testing.TB, what string, interval time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(testDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not reached within %s", what, testDeadline)
		}
		s.service(tb)
		time.Sleep(interval)
	}
}

// runFor services the bots every millisecond for d.
func (s swarm) runFor(tb testing.TB, d time.Duration) { s.runEvery(tb, d, time.Millisecond) }

// runEvery services the bots every interval for d: a large swarm is serviced less often, so its
// own CPU time does not crowd out the server's.
func (s swarm) runEvery(tb testing.TB, d, interval time.Duration) {
	end := time.Now().Add(d)
	s.untilEvery(tb, "run", interval, func() bool { return time.Now().After(end) })
}

func (s swarm) allUp() bool {
	for _, bt := range s {
		if !bt.up || bt.down {
			return false
		}
	}
	return true
}

// startServer creates a broadcaster on loopback and runs its tick loop until the test ends.
func startServer(tb testing.TB, opts Options) *Broadcaster {
	tb.Helper()
	opts.Address = loopback
	b, err := New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- b.Run() }()
	for b.Tick() == 0 {
		time.Sleep(time.Millisecond)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.Stop(ctx); err != nil {
			tb.Errorf("stop: %v", err)
		}
		if err := <-errc; err != nil {
			tb.Errorf("run: %v", err)
		}
	})
	return b
}

// inLoop runs fn on the tick loop between two ticks.
func inLoop(tb testing.TB, b *Broadcaster, fn func()) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	if err := b.call(ctx, fn); err != nil {
		tb.Fatalf("call on the tick loop: %v", err)
	}
}

// viewProblems compares a client's view with the world around a session's focus: every entity
// within the radius must be in the view with the server's exact quantized state, and every entity
// of the view must be alive within the exit radius (the radius plus the 10% hysteresis) with that
// state. It runs on the tick loop.
func viewProblems(st *entity.Store, focus entity.ID, radius float32, view map[uint16]client.Entity) int {
	if !st.Valid(focus) {
		return 1
	}
	m := st.Metas()[focus.Slot()]
	x, y := m.X, m.Y
	states, kinds := st.States(), st.Kinds()
	problems := 0
	for _, hit := range st.Query(x, y, radius, nil) {
		e, ok := view[hit.Slot]
		if !ok || e.State != states[hit.Slot] || e.Kind != uint8(kinds[hit.Slot]) {
			problems++
		}
	}
	inExit := map[uint16]bool{}
	for _, hit := range st.Query(x, y, radius*1.1, nil) {
		inExit[hit.Slot] = true
	}
	for id, e := range view {
		if !inExit[id] || e.State != states[id] {
			problems++
		}
	}
	return problems
}

// views copies every bot's view.
func (s swarm) views() []map[uint16]client.Entity {
	out := make([]map[uint16]client.Entity, len(s))
	for i, bt := range s {
		out[i] = map[uint16]client.Entity{}
		// Range also yields entries a RESET freed (they keep their alive flag until reused), so
		// every id is looked up again by Entity, which sees only live ones.
		bt.cl.Range(func(e client.Entity) bool {
			if cur, ok := bt.cl.Entity(e.ID); ok {
				out[i][e.ID] = cur
			}
			return true
		})
	}
	return out
}

// mismatches counts, over every bot, how its view differs from the world around its own
// session's focus (bots and sessions are matched by connect data).
func mismatches(tb testing.TB, b *Broadcaster, s swarm) int {
	views := s.views()
	n := 0
	inLoop(tb, b, func() {
		for i, bt := range s {
			found := false
			for slot, ss := range b.sessions {
				if ss.Active() && b.connData[slot] == bt.data {
					n += viewProblems(b.store, ss.Focus(), ss.InterestRadius(), views[i])
					found = true
				}
			}
			if !found {
				n++
			}
		}
	})
	return n
}

func i32(v int32) *int32 { return &v }

// resolveAndApply resolves cfg and applies it to b, as the admin API does with a push.
func resolveAndApply(ctx context.Context, b *Broadcaster, cfg netcode.NetcodeConfig) error {
	r, err := netcode.Resolve(cfg)
	if err != nil {
		return err
	}
	return b.Apply(ctx, r)
}

// smallWorld is a demo world small enough that every session sees a few dozen entities.
func smallWorld(population int) demo.Config {
	return demo.Config{Population: population, HalfExtent: 300, RestMinSec: 0.5, RestMaxSec: 2}
}

// playing returns o with the demo game on world w (seed 7 unless it has one), frozen or not, with
// room for an avatar per peer slot.
func playing(tb testing.TB, w demo.Config, frozen bool, o Options) Options {
	tb.Helper()
	if w.Seed == 0 {
		w.Seed = 7
	}
	g, err := demo.NewGame(demo.GameConfig{World: w, Frozen: frozen, Players: max(o.MaxPeers, 256)})
	if err != nil {
		tb.Fatal(err)
	}
	o.Game, o.Store = g, g.Store()
	return o
}
