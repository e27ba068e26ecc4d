package broadcast

import (
	"bytes"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/enet"
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/game"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

// recorder is a game on a bare store that records what the server loop calls. A player's connect
// data decides its join: 1xx joins, 2xx is refused with the game code 4100+xx, 3xx with a plain
// error, 4xx is answered with an entity that does not exist.
type recorder struct {
	st *entity.Store

	mu      sync.Mutex
	joins   []game.Player
	leaves  map[uint32]game.Leave // by connect data
	inputs  []recordedInput
	steps   int
	avatars map[int]entity.ID // by slot
	// inStep is set while Step runs; onStep, if set, runs in Step. wrong counts calls the
	// contract forbids: an Input during a Step, a Step with another store or tick.
	inStep bool
	onStep func(t *game.Tick)
	wrong  int
}

type recordedInput struct {
	data      uint32
	in        game.Input
	storeTick uint32 // the store's tick when it arrived
	steps     int    // steps run before it arrived
}

func newRecorder(tb testing.TB) *recorder {
	st, err := entity.NewStore(entity.Config{Capacity: 64, HalfExtent: 200})
	if err != nil {
		tb.Fatal(err)
	}
	// A few entities for the players to see.
	for i := range 8 {
		if _, err := st.Spawn(2, entity.Transform{Pos: [3]float32{float32(10 * i), 5, 0}}); err != nil {
			tb.Fatal(err)
		}
	}
	st.Commit()
	return &recorder{st: st, leaves: map[uint32]game.Leave{}, avatars: map[int]entity.ID{}}
}

func (g *recorder) Join(p game.Player) (entity.ID, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch p.ConnectData / 100 {
	case 2:
		return entity.None, game.Refuse(4100+p.ConnectData%100, "test refusal")
	case 3:
		return entity.None, errors.New("the game does not want this player")
	case 4:
		return entity.MakeID(60, 9), nil
	}
	id, err := g.st.Spawn(1, entity.Transform{Pos: [3]float32{float32(p.ConnectData % 100), 0, 0}})
	if err != nil {
		return entity.None, err
	}
	g.joins = append(g.joins, p)
	g.avatars[p.Slot] = id
	return id, nil
}

func (g *recorder) Leave(p game.Player, why game.Leave) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.leaves[p.ConnectData] = why
	_ = g.st.Despawn(g.avatars[p.Slot])
	delete(g.avatars, p.Slot)
}

func (g *recorder) Input(p game.Player, in game.Input) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.inStep {
		g.wrong++
	}
	in.Payload = bytes.Clone(in.Payload)
	g.inputs = append(g.inputs, recordedInput{data: p.ConnectData, in: in, storeTick: g.st.Tick(), steps: g.steps})
}

func (g *recorder) Step(t *game.Tick) {
	g.mu.Lock()
	g.inStep = true
	g.steps++
	fn := g.onStep
	g.mu.Unlock()
	if t.Store != g.st || t.Number != g.st.Tick() || t.Dt <= 0 {
		g.mu.Lock()
		g.wrong++
		g.mu.Unlock()
	}
	if fn != nil {
		fn(t)
	}
	g.mu.Lock()
	g.inStep = false
	g.mu.Unlock()
}

func (g *recorder) leave(data uint32) (game.Leave, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	l, ok := g.leaves[data]
	return l, ok
}

func startRecorder(t *testing.T, nc netcode.NetcodeConfig) (*Broadcaster, *recorder) {
	g := newRecorder(t)
	t.Cleanup(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.wrong != 0 {
			t.Errorf("%d calls broke the game contract", g.wrong)
		}
	})
	return startServer(t, Options{Game: g, Store: g.st, MaxPeers: 16, InterestRadius: 150, Netcode: netcode.MustResolve(nc)}), g
}

// TestJoinRefusals: a player the game refuses is disconnected with the refusal's code (a plain
// error with 4003), one answered with an entity that does not exist with 1011; the server counts
// them, no session is held for them and no Leave follows.
func TestJoinRefusals(t *testing.T) {
	b, g := startRecorder(t, netcode.NetcodeConfig{})
	bots := swarm{newBot(t, b.Address(), 101), newBot(t, b.Address(), 207), newBot(t, b.Address(), 300), newBot(t, b.Address(), 400)}
	bots.until(t, "refused bots disconnected", func() bool { return bots[1].down && bots[2].down && bots[3].down && bots[0].up })
	want := map[uint32]uint32{207: 4107, 300: protocol.CloseRefused, 400: protocol.CloseGameError}
	for _, bt := range bots[1:] {
		if bt.code != want[bt.data] {
			t.Errorf("bot %d disconnected with %d, want %d", bt.data, bt.code, want[bt.data])
		}
	}
	var live int
	var refused, errs uint64
	inLoop(t, b, func() { live, refused, errs = b.live, b.gameRefused, b.gameErrors })
	if live != 1 || refused != 2 || errs != 1 {
		t.Errorf("%d live sessions, %d refused by the game, %d game errors; want 1, 2, 1", live, refused, errs)
	}
	bots.runFor(t, 200*time.Millisecond)
	if bots[0].down || bots[0].cl.Len() == 0 {
		t.Errorf("the admitted player: down %v, %d entities in view", bots[0].down, bots[0].cl.Len())
	}
	for _, data := range []uint32{207, 300, 400} {
		if _, ok := g.leave(data); ok {
			t.Errorf("a Leave followed the refusal of %d", data)
		}
	}
}

// TestInputArrivesWithTick: every COMMAND reaches the game's Input in order, with its sequence, its
// payload and the tick the client had applied when it sent it, before the Step of the tick it is
// handed over in.
func TestInputArrivesWithTick(t *testing.T) {
	b, g := startRecorder(t, netcode.NetcodeConfig{})
	bt := newBot(t, b.Address(), 101)
	swarm{bt}.until(t, "applied snapshots", func() bool { return bt.cl.LastAppliedTick() > 0 })
	sentTicks := make([]uint32, 0, 20)
	for i := range 20 {
		applied := bt.cl.LastAppliedTick()
		cmd, err := bt.cl.AppendCommand(nil, []byte{byte(i), 0xAB})
		if err != nil {
			t.Fatal(err)
		}
		bt.send(t, cmd, enet.Reliable)
		sentTicks = append(sentTicks, applied)
		swarm{bt}.runFor(t, 5*time.Millisecond)
	}
	swarm{bt}.until(t, "inputs delivered", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.inputs) == 20
	})
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, r := range g.inputs {
		if r.data != 101 || !bytes.Equal(r.in.Payload, []byte{byte(i), 0xAB}) || r.in.Seq != uint16(i) {
			t.Fatalf("input %d: from %d, seq %d, payload %x", i, r.data, r.in.Seq, r.in.Payload)
		}
		if r.in.Tick != sentTicks[i] || r.in.Tick == 0 || r.in.Tick > r.storeTick {
			t.Fatalf("input %d carries tick %d; the client had applied %d, the store is at %d", i, r.in.Tick, sentTicks[i], r.storeTick)
		}
	}
}

// TestLeaveFollows: a Leave follows a client's disconnect (with its data), a client that went
// silent (closed with 4001 once its pings stop), a kick from the game's Step, and the server's
// shutdown (1001).
func TestLeaveFollows(t *testing.T) {
	b, g := startRecorder(t, netcode.NetcodeConfig{Backpressure: netcode.BackpressureConfig{PingTimeoutMs: 500}})
	quitter, silent, kicked, stayer := newBot(t, b.Address(), 101), newBot(t, b.Address(), 102), newBot(t, b.Address(), 103), newBot(t, b.Address(), 104)
	all := swarm{quitter, silent, kicked, stayer}
	all.until(t, "all connected", all.allUp)

	quitter.peer.Disconnect(1000)
	silent.paused = true
	all.until(t, "left", func() bool {
		_, q := g.leave(101)
		_, s := g.leave(102)
		return q && s
	})
	if l, _ := g.leave(101); l != (game.Leave{Code: 1000}) {
		t.Errorf("disconnect: %+v, want the client's data 1000", l)
	}
	if l, _ := g.leave(102); l != (game.Leave{ByServer: true, Code: protocol.CloseNoPing}) {
		t.Errorf("silent client: %+v, want closed with 4001", l)
	}

	kickSlot := -1
	inLoop(t, b, func() {
		for slot, p := range b.players {
			if b.sessions[slot].Active() && p.ConnectData == 103 {
				kickSlot = slot
			}
		}
	})
	var kickErr, badCode, badSlot error
	g.mu.Lock()
	g.onStep = func(tk *game.Tick) {
		badCode = tk.Kick(kickSlot, protocol.CloseAbuse) // not a code a game may use
		badSlot = tk.Kick(200, 4100)
		kickErr = tk.Kick(kickSlot, 4142)
		g.onStep = nil
	}
	g.mu.Unlock()
	all.until(t, "kicked", func() bool { return kicked.down })
	if kicked.code != 4142 || kickErr != nil || !errors.Is(badCode, game.ErrCloseCode) || !errors.Is(badSlot, game.ErrNoPlayer) {
		t.Errorf("kick: client got %d (err %v); a kick with 1008: %v; of slot 200: %v", kicked.code, kickErr, badCode, badSlot)
	}
	all.until(t, "kick reported", func() bool { _, ok := g.leave(103); return ok })
	if l, _ := g.leave(103); l != (game.Leave{ByServer: true, Code: 4142}) {
		t.Errorf("kicked: %+v", l)
	}

	if err := b.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if l, ok := g.leave(104); !ok || l != (game.Leave{ByServer: true, Code: protocol.CloseGoingAway}) {
		t.Errorf("shutdown: %+v (%v), want closed with 1001", l, ok)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.avatars) != 0 || g.st.Count() != 8 {
		t.Errorf("after every leave: %d avatars, %d entities in the store", len(g.avatars), g.st.Count())
	}
}

// TestFollow: a Step moves a player's interest to another entity; the player's view follows it,
// and a Follow of an entity that does not exist is refused.
func TestFollow(t *testing.T) {
	b, g := startRecorder(t, netcode.NetcodeConfig{})
	far, err := g.st.Spawn(3, entity.Transform{Pos: [3]float32{-180, -180, 0}})
	if err != nil {
		t.Fatal(err)
	}
	bt := newBot(t, b.Address(), 101)
	swarm{bt}.until(t, "near entities seen", func() bool { _, ok := bt.cl.Entity(3); return ok })
	if _, ok := bt.cl.Entity(far.Slot()); ok {
		t.Fatal("the far entity is in view before the follow")
	}
	var followErr, missingErr error
	g.mu.Lock()
	g.onStep = func(tk *game.Tick) {
		missingErr = tk.Follow(g.joins[0].Slot, entity.MakeID(50, 3))
		followErr = tk.Follow(g.joins[0].Slot, far)
		g.onStep = nil
	}
	g.mu.Unlock()
	swarm{bt}.until(t, "view moved", func() bool {
		_, farIn := bt.cl.Entity(far.Slot())
		_, nearIn := bt.cl.Entity(3)
		return farIn && !nearIn
	})
	if followErr != nil || !errors.Is(missingErr, entity.ErrNoEntity) {
		t.Errorf("follow: %v; of a missing entity: %v", followErr, missingErr)
	}
	var tk game.Tick
	if err := tk.Follow(0, far); !errors.Is(err, game.ErrNoPlayers) {
		t.Errorf("a Tick that is not the server's: %v", err)
	}
}

// handshaker is a raw ENet client that sends what a test asks for instead of a well-behaved
// client's HELLO, and notes the CLOSE and the disconnect it gets.
type handshaker struct {
	host   *enet.Host
	peer   enet.Peer
	ev     enet.Event
	up     bool
	closed protocol.Close
	code   uint32 // the disconnect's data, once disconnected
	got    int    // SNAPSHOTs received
}

func newHandshaker(t *testing.T, addr netip.AddrPort) *handshaker {
	t.Helper()
	h, err := enet.NewHost(enet.Config{Peers: 1, Channels: Channels})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Destroy)
	p, err := h.Connect(addr, Channels, 0)
	if err != nil {
		t.Fatal(err)
	}
	return &handshaker{host: h, peer: p}
}

func (hs *handshaker) service(t *testing.T) {
	for {
		ok, err := hs.host.Service(&hs.ev, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return
		}
		switch hs.ev.Type {
		case enet.EventConnect:
			hs.up = true
		case enet.EventDisconnect:
			hs.code = max(hs.ev.Data, 1)
		case enet.EventReceive:
			switch typ, _ := protocol.PeekType(hs.ev.Packet.Bytes()); typ {
			case protocol.MsgClose:
				if err := protocol.DecodeClose(hs.ev.Packet.Bytes(), &hs.closed); err != nil {
					t.Fatal(err)
				}
			case protocol.MsgSnapshot:
				hs.got++
			}
		}
	}
}

// TestHandshake: the session starts only on a HELLO of the server's schema; a HELLO of another
// schema is refused with 4004 and a CLOSE saying so, before any record is sent; a malformed
// HELLO, or none within HelloTimeout, is refused with 4002; a PING before the HELLO is dropped.
func TestHandshake(t *testing.T) {
	b, g := startRecorder(t, netcode.NetcodeConfig{})
	good, wrong, garbled, silent := newHandshaker(t, b.Address()), newHandshaker(t, b.Address()),
		newHandshaker(t, b.Address()), newHandshaker(t, b.Address())
	all := []*handshaker{good, wrong, garbled, silent}
	serviceAll := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(testDeadline)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s", what, testDeadline)
			}
			for _, hs := range all {
				hs.service(t)
			}
			time.Sleep(time.Millisecond)
		}
	}
	serviceAll("connected", func() bool { return good.up && wrong.up && garbled.up && silent.up })
	send := func(hs *handshaker, msg []byte) {
		if err := hs.peer.Send(ChannelReliable, msg, enet.Reliable); err != nil {
			t.Fatal(err)
		}
	}
	schema := g.st.Layout().Hash()
	hello := func(hash uint64) []byte {
		b, err := protocol.AppendHello(nil, &protocol.Hello{SchemaHash: hash})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	send(good, protocol.AppendPing(nil, &protocol.Ping{}))
	send(good, hello(schema))
	send(wrong, hello(schema^1))
	send(garbled, append(hello(schema), 0))
	serviceAll("refusals", func() bool { return wrong.code != 0 && garbled.code != 0 && good.got > 0 })
	if wrong.code != protocol.CloseSchema || wrong.closed.Code != protocol.CloseSchema ||
		!strings.Contains(wrong.closed.Reason, "schema mismatch") || wrong.got != 0 {
		t.Errorf("another schema: disconnect %d, CLOSE %+v, %d snapshots", wrong.code, wrong.closed, wrong.got)
	}
	if garbled.code != protocol.CloseHandshake || garbled.closed.Code != protocol.CloseHandshake || garbled.got != 0 {
		t.Errorf("a malformed HELLO: disconnect %d, CLOSE %+v, %d snapshots", garbled.code, garbled.closed, garbled.got)
	}
	start := time.Now()
	serviceAll("the silent client refused", func() bool { return silent.code != 0 })
	if silent.code != protocol.CloseHandshake || silent.got != 0 || time.Since(start) > HelloTimeout+testDeadline {
		t.Errorf("no HELLO: disconnect %d, %d snapshots", silent.code, silent.got)
	}
	g.mu.Lock()
	joins := len(g.joins)
	g.mu.Unlock()
	var mismatch, handshake uint64
	inLoop(t, b, func() { mismatch, handshake = b.mismatch, b.handshake })
	if joins != 1 || mismatch != 1 || handshake != 2 {
		t.Errorf("%d joins; %d schema refusals, %d handshake refusals; want 1, 1, 2", joins, mismatch, handshake)
	}
}
