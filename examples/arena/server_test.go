package arena

import (
	"context"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/broadcast"
	"github.com/netfleet/netfleet/gameserver/client"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// testDeadline bounds every wait: a hang guard for a loaded machine, not a speed assertion.
const testDeadline = 30 * time.Second

// layout is the game's schema, compiled, as its clients hold it.
var layout = Schema().MustCompile()

// bot is a real ENet client of the arena: it applies what it receives, acknowledges and pings, and
// notes the tick of every packet that carried a spawn or a delta.
type bot struct {
	host   *enet.Host
	peer   enet.Peer
	cl     *client.Client
	ev     enet.Event
	snap   protocol.Snapshot
	buf    []byte
	up     bool
	spawns map[uint16]uint32 // first tick each projectile was spawned in
	deltas []uint32          // ticks of the packets that carried deltas
}

func newBot(t *testing.T, addr netip.AddrPort) *bot {
	t.Helper()
	h, err := enet.NewHost(enet.Config{Peers: 1, Channels: broadcast.Channels})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Destroy)
	p, err := h.Connect(addr, broadcast.Channels, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &bot{host: h, peer: p, cl: client.NewLayout(layout), spawns: map[uint16]uint32{}}
}

func (b *bot) service(t *testing.T) {
	now := time.Now().UnixMilli()
	for {
		ok, err := b.host.Service(&b.ev, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		switch b.ev.Type {
		case enet.EventConnect:
			b.up = true
			b.send(t, b.cl.AppendHello(b.buf[:0]), enet.Reliable)
		case enet.EventDisconnect:
			t.Fatalf("the server disconnected a bot with %d", b.ev.Data)
		case enet.EventReceive:
			msg := b.ev.Packet.Bytes()
			if typ, _ := protocol.PeekType(msg); typ == protocol.MsgSnapshot && layout.DecodeSnapshot(msg, &b.snap) == nil {
				for _, r := range b.snap.Records {
					switch r.Op {
					case protocol.OpSpawn:
						if _, ok := b.spawns[r.ID]; !ok && r.Kind == uint8(KindProjectile) {
							b.spawns[r.ID] = b.snap.Tick
						}
					case protocol.OpDelta:
						if n := len(b.deltas); n == 0 || b.deltas[n-1] != b.snap.Tick {
							b.deltas = append(b.deltas, b.snap.Tick)
						}
					}
				}
			}
			if err := b.cl.HandleMessage(msg, now); err != nil {
				t.Fatalf("client: %v", err)
			}
		}
	}
	if !b.up {
		return
	}
	if b.cl.AckDue() {
		if m, ok := b.cl.AppendAck(b.buf[:0]); ok {
			b.send(t, m, enet.Unreliable)
		}
	}
	if b.cl.PingDue(now) {
		b.send(t, b.cl.AppendPing(b.buf[:0], now), enet.Unreliable)
	}
}

func (b *bot) send(t *testing.T, m []byte, flags enet.PacketFlags) {
	if err := b.peer.Send(broadcast.ChannelSnapshot, m, flags); err != nil {
		t.Fatalf("send: %v", err)
	}
}

func (b *bot) command(t *testing.T, payload []byte) {
	m, err := b.cl.AppendCommand(nil, payload)
	if err != nil {
		t.Fatal(err)
	}
	b.send(t, m, enet.Reliable)
}

// until services the bots every millisecond until cond holds.
func until(t *testing.T, bots []*bot, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, testDeadline)
		}
		for _, b := range bots {
			b.service(t)
		}
		time.Sleep(time.Millisecond)
	}
}

// onLoop runs fn on the server's tick loop, between two ticks: the one place a test can read the
// game's store.
func onLoop(t *testing.T, srv *broadcast.Broadcaster, fn func()) {
	t.Helper()
	if err := srv.Do(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// TestClientsConvergeAndSpawnsGoEveryTick runs the arena on a real server loop with state updates
// at 10 Hz and every peer served every tick: real ENet clients walk and fire, every projectile's spawn reaches them in the tick it
// was fired in while deltas come at most every sixth tick, and once everything rests their views
// equal the game's store.
func TestClientsConvergeAndSpawnsGoEveryTick(t *testing.T) {
	g := mustNew(t, Config{})
	srv, err := broadcast.New(broadcast.Options{
		Address: netip.MustParseAddrPort("127.0.0.1:0"), MaxPeers: 8, Game: g, Store: g.Store(), InterestRadius: 300,
		// The congestion controller is off: on a loaded machine it may skip a peer's ticks, and this
		// test is about what a built frame carries, not how often frames are built;
		// nor does a byte budget hold back the frames after an update's, nor a client that a busy
		// machine keeps from acknowledging in time move its session to a slower rate class.
		Netcode: netcode.MustResolve(netcode.NetcodeConfig{
			Budget:       netcode.BudgetConfig{StateUpdateHz: 10, SessionBytesPerSecond: new(int32(0)), SnapshotBytesPerTick: new(int32(0))},
			Congestion:   netcode.CongestionConfig{Enabled: new(false)},
			Backpressure: netcode.BackpressureConfig{LagSkipRttAllowanceMs: 10000}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	runErr := make(chan error, 1)
	go func() { runErr <- srv.Run() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Error(err)
		}
		if err := <-runErr; err != nil {
			t.Error(err)
		}
	})
	bots := []*bot{newBot(t, srv.Address()), newBot(t, srv.Address()), newBot(t, srv.Address())}
	until(t, bots, "connected and replicated", func() bool {
		for _, b := range bots {
			if !b.up || b.cl.Len() < len(bots) {
				return false
			}
		}
		return true
	})
	// Walk, and fire a volley a player at a time.
	for i, b := range bots {
		b.command(t, AppendWalk(nil, float32(20*i-20), 30))
	}
	fired := 0
	rng := rand.New(rand.NewPCG(1, 2))
	until(t, bots, "volleys fired", func() bool {
		if fired < 12 {
			// Each bot fires every 450 to 750 ms, well past the cooldown however the shots
			// arrive, and at random moments of the 10 Hz update cycle.
			bots[fired%len(bots)].command(t, AppendFire(nil, float32(fired)))
			fired++
			time.Sleep(time.Duration(150+rng.IntN(100)) * time.Millisecond)
		}
		return fired == 12
	})
	until(t, bots, "everything at rest", func() bool {
		rest := false
		onLoop(t, srv, func() { rest = g.Projectiles() == 0 })
		return rest
	})
	for range 3 { // the walks end too
		until(t, bots, "a second", func() bool { time.Sleep(300 * time.Millisecond); return true })
	}
	until(t, bots, "views converged", func() bool {
		ok := true
		onLoop(t, srv, func() {
			for _, b := range bots {
				ok = ok && viewDiff(g, b.cl) == ""
			}
		})
		return ok
	})

	var shots, ticks, deltaTicks int
	var spawned uint64
	onLoop(t, srv, func() { ticks, spawned = int(g.Store().Tick()), g.Fired() })
	if spawned < 9 {
		t.Fatalf("the game fired %d of the 12 shots asked for", spawned)
	}
	for _, b := range bots {
		for id, tick := range b.spawns {
			if id >= uint16(g.Store().Capacity()) || tick == 0 {
				t.Fatalf("spawn of %d at tick %d", id, tick)
			}
		}
		for i := 1; i < len(b.deltas); i++ {
			if gap := b.deltas[i] - b.deltas[i-1]; gap < 6 {
				t.Fatalf("deltas in ticks %d and %d: state updates faster than 10 Hz", b.deltas[i-1], b.deltas[i])
			}
		}
		deltaTicks += len(b.deltas)
		shots += len(b.spawns)
	}
	// Every bot saw every projectile spawn; spawns outside the update ticks prove they are sent
	// on the tick they happen.
	if shots != int(spawned)*len(bots) {
		t.Errorf("the bots saw %d projectile spawns, want the %d projectiles fired for each of %d bots", shots, spawned, len(bots))
	}
	offUpdate := 0
	for _, b := range bots {
		updates := map[uint32]bool{}
		for _, d := range b.deltas {
			updates[d] = true
		}
		for _, tick := range b.spawns {
			if !updates[tick] {
				offUpdate++
			}
		}
	}
	if offUpdate < shots/4 {
		t.Errorf("%d of %d projectile spawns were sent outside a state update tick; spawns must not wait for updates", offUpdate, shots)
	}
	for _, p := range srv.Peers(nil) {
		t.Logf("peer %d: %.0f Hz, throttle %.2f, class %d, %s", p.Slot, p.SendRateHz, p.Throttle, p.RateClass, p.State)
	}
	t.Logf("%d ticks, %d delta ticks over %d bots, %d projectile spawns (%d outside update ticks)", ticks, deltaTicks, len(bots), shots, offUpdate)
}

// viewDiff compares a client's view with the game's store: the entities the client's player may
// see (its team's beacon, its own marker, everything else), with the same kind, state and fields,
// and no other. The player is the one whose marker, which only it sees, is in the view. It runs
// on the tick loop.
func viewDiff(g *Game, cl *client.Client) string {
	st := g.Store()
	var me *player
	cl.Range(func(e client.Entity) bool {
		for _, p := range g.play {
			if e.Kind == uint8(KindMarker) && p.marker.Slot() == e.ID {
				me = p
			}
		}
		return me == nil
	})
	if me == nil {
		return "no marker of the client's own in its view"
	}
	stride := st.Layout().Stride()
	n := 0
	for slot, m := range st.Metas() {
		if !m.Alive || m.Special && !st.Visibilities()[slot].Visible(me.slot, teamGroup(me.team)) {
			continue
		}
		n++
		e, ok := cl.Entity(uint16(slot))
		words := st.Layout().Kind(uint8(st.Kinds()[slot])).Words
		if !ok || e.State != st.States()[slot] || e.Kind != uint8(st.Kinds()[slot]) ||
			!slices.Equal(e.Fields, st.Fields()[slot*stride:slot*stride+words]) {
			return "entity missing or different"
		}
	}
	if cl.Len() != n {
		return "view holds entities the player may not see, or that are gone"
	}
	return ""
}
