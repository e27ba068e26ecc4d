package snapshot

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/demo"
	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

const dt = 1.0 / 60

func testConfig() Config {
	return Config{MaxPacketBytes: 1200, TickRateHz: 60, InterestRadius: 150}
}

// busyWorld is a demo world with moving, resting, spawning and despawning entities, about 80 per
// view's interest.
func busyWorld(seed uint64) demo.Config {
	return demo.Config{
		Seed: seed, Capacity: 512, Population: 400, HalfExtent: 300, CellSize: 50, WanderRadius: 60,
		RestMinSec: 0.5, RestMaxSec: 3, LifetimeMeanSec: 4,
	}
}

// TestConvergence runs sessions with different budgets over lossy, delaying links through a busy
// world, then through quiet ticks, and checks that every client's view equals the world within
// its interest.
func TestConvergence(t *testing.T) {
	tests := []struct {
		name                      string
		budget, loss, maxDelay    int
		stateUpdateHz, packetSize int
		farUpdateHz, enterDivisor int
	}{
		{name: "unlimited, no loss", maxDelay: 1},
		{name: "default budget, 10% loss", budget: 2400, loss: 100, maxDelay: 4},
		{name: "small budget, 25% loss", budget: 600, loss: 250, maxDelay: 6},
		{name: "tiny budget and packets, 5% loss", budget: 300, loss: 50, maxDelay: 3, packetSize: 256},
		{name: "10 Hz state updates, 10% loss", budget: 2400, loss: 100, maxDelay: 4, stateUpdateHz: 10},
		{name: "long round trips, 5% loss", budget: 2400, loss: 50, maxDelay: 14},
		{name: "far band at 7 Hz, enter budget a quarter, small budget, 10% loss", budget: 600, loss: 100, maxDelay: 4,
			stateUpdateHz: 15, farUpdateHz: 7, enterDivisor: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.StateUpdateHz = tt.stateUpdateHz
			cfg.FarUpdateHz, cfg.EnterBudgetDivisor = tt.farUpdateHz, tt.enterDivisor
			if tt.farUpdateHz != 0 {
				cfg.FarRadius = cfg.InterestRadius / 2
			}
			if tt.packetSize != 0 {
				cfg.MaxPacketBytes = tt.packetSize
			}
			h := newHarness(t, busyWorld(7), cfg)
			for range 3 {
				h.addLink(tt.budget, tt.loss, tt.maxDelay)
			}
			for range 600 {
				h.tick(dt)
			}
			for _, l := range h.links {
				if l.sess.Stats().Deltas == 0 || l.cl.Stats().RecordsApplied == 0 {
					t.Fatalf("no deltas sent or nothing applied: %+v", l.sess.Stats())
				}
			}
			quiet := h.settle(2000)
			for i, l := range h.links {
				if d := h.diff(l); len(d) > 0 {
					t.Fatalf("link %d did not converge after %d quiet ticks: %d problems, first %q; view %d entities", i, quiet, len(d), d[0], l.cl.Len())
				}
				if l.cl.Len() == 0 {
					t.Fatalf("link %d: empty view", i)
				}
				t.Logf("link %d converged after %d quiet ticks: view %d, session %+v, client %+v", i, quiet, l.cl.Len(), l.sess.Stats(), l.cl.Stats())
			}
		})
	}
}

// TestIdleWorldSendsNothing: once everything is acknowledged, a tick costs zero bytes.
func TestIdleWorldSendsNothing(t *testing.T) {
	h := newHarness(t, busyWorld(8), testConfig())
	for _, budget := range []int{0, 2400, 600} {
		h.addLink(budget, 0, 2)
	}
	for range 120 {
		h.tick(dt)
	}
	for range 60 {
		h.tick(0)
	}
	for range 10 {
		h.tick(0)
		for i, l := range h.links {
			if l.frame.Bytes() != 0 || l.frame.Packets() != 0 || l.last != (FrameResult{}) {
				t.Fatalf("link %d: idle tick built %d packets, %d bytes: %+v", i, l.frame.Packets(), l.frame.Bytes(), l.last)
			}
		}
	}
	for i, l := range h.links {
		if d := h.diff(l); len(d) > 0 {
			t.Fatalf("link %d: %v", i, d[0])
		}
	}
}

func TestFirstFrameSpawnsNearestFirst(t *testing.T) {
	h := newHarness(t, busyWorld(9), testConfig())
	l := h.addLink(300, 0, 1)
	h.tick(dt)
	var snap protocol.Snapshot
	if l.frame.Packets() != 1 {
		t.Fatalf("%d packets, want 1 under a 300-byte budget", l.frame.Packets())
	}
	if err := protocol.DecodeSnapshot(l.frame.Packet(0), &snap); err != nil {
		t.Fatal(err)
	}
	x, y, _ := h.focusOf(l.sess)
	r := h.cfg.InterestRadius
	var sentMax float32
	sent := map[uint16]bool{}
	for _, rec := range snap.Records {
		if rec.Op != protocol.OpSpawn {
			t.Fatalf("first frame has op %d", rec.Op)
		}
		sent[rec.ID] = true
		p := h.st.States()[rec.ID].Pos
		dx, dy := protocol.DequantizePos(p[0])-x, protocol.DequantizePos(p[1])-y
		sentMax = max(sentMax, dx*dx+dy*dy)
	}
	// Buckets are a quarter octave wide, so an unsent entity may be somewhat nearer than the
	// farthest sent one, but not much.
	for _, hit := range h.st.Query(x, y, r, nil) {
		if !sent[hit.Slot] && hit.Dist2 < sentMax && (1-0.75*hit.Dist2/(r*r)) > 1.2*(1-0.75*sentMax/(r*r)) {
			t.Fatalf("entity at distance² %v unsent while one at %v was sent", hit.Dist2, sentMax)
		}
	}
}

// TestDespawnResentUntilAcked: a despawn that is lost is sent again; once acknowledged, the
// view forgets the entity.
func TestDespawnResentUntilAcked(t *testing.T) {
	h := newStoreHarness(t, entity.Config{Capacity: 8, HalfExtent: 100}, testConfig())
	l := h.addLink(0, 0, 1)
	other := h.spawn(2, 10, 10)
	for range 10 {
		h.tick(dt)
	}
	if _, ok := l.cl.Entity(other.Slot()); !ok {
		t.Fatal("the other entity never reached the client")
	}
	if err := h.st.Despawn(other); err != nil {
		t.Fatal(err)
	}
	l.loss = 1000 // every packet and ACK is lost
	despawns := func() uint64 { return l.sess.Stats().Despawns }
	before := despawns()
	for range 30 {
		h.tick(dt)
	}
	if sent := despawns() - before; sent < 3 {
		t.Fatalf("despawn sent %d times in 30 ticks of total loss, want it resent", sent)
	}
	l.loss = 0
	for range 30 {
		h.tick(dt)
	}
	if _, ok := l.cl.Entity(other.Slot()); ok || l.sess.Known() != 1 {
		t.Fatalf("after recovery: client holds the entity %v, session knows %d entities", ok, l.sess.Known())
	}
}

// TestNeedFull: a client that lost its history asks for full state and gets a spawn.
func TestNeedFull(t *testing.T) {
	h := newHarness(t, busyWorld(10), testConfig())
	l := h.addLink(0, 0, 1)
	for range 30 {
		h.tick(dt)
	}
	var id uint16
	found := false
	for _, hit := range h.st.Query(0, 0, 1000, nil) {
		if l.sess.index.has(hit.Slot) && l.sess.reps[l.sess.index.pos[hit.Slot]].baseTick != 0 {
			id, found = hit.Slot, true
			break
		}
	}
	if !found {
		t.Fatal("no entity with a baseline")
	}
	before := l.sess.Stats().Spawns
	var a protocol.Ack
	a.Latest = l.sess.nextSeq - 1
	a.AddNeedFull(id)
	a.AddNeedFull(protocol.MaxEntities - 1) // an id the session does not know is ignored
	if _, err := l.sess.HandleAck(&a); err != nil {
		t.Fatal(err)
	}
	h.tick(dt)
	if l.sess.Stats().NeedFull != 1 || l.sess.Stats().Spawns == before {
		t.Fatalf("NeedFull %d, spawns %d -> %d: want a spawn", l.sess.Stats().NeedFull, before, l.sess.Stats().Spawns)
	}
}

func TestResetDeliversFullView(t *testing.T) {
	h := newHarness(t, busyWorld(11), testConfig())
	l := h.addLink(0, 0, 1)
	for range 30 {
		h.tick(dt)
	}
	l.sess.Reset()
	h.tick(dt)
	if l.frame.ResetMessage() == nil {
		t.Fatal("no RESET message after Reset")
	}
	var snap protocol.Snapshot
	for i := range l.frame.Packets() {
		if err := protocol.DecodeSnapshot(l.frame.Packet(i), &snap); err != nil {
			t.Fatal(err)
		}
		if snap.Flags&protocol.FlagReset == 0 {
			t.Fatalf("packet %d lacks FlagReset", i)
		}
		for _, r := range snap.Records {
			if r.Op != protocol.OpSpawn {
				t.Fatalf("record op %d after a reset, want spawns only", r.Op)
			}
		}
	}
	for range 10 {
		h.tick(dt)
	}
	if l.frame.ResetMessage() != nil || l.cl.Stats().Resets != 1 || l.sess.Stats().Resets != 1 {
		t.Fatalf("resets: client %d, session %d", l.cl.Stats().Resets, l.sess.Stats().Resets)
	}
	for range 30 {
		h.tick(0)
	}
	if d := h.diff(l); len(d) > 0 {
		t.Fatal(d[0])
	}
}

func TestStateUpdateRate(t *testing.T) {
	cfg := testConfig()
	cfg.StateUpdateHz = 15 // every 4th tick at 60 Hz
	wcfg := busyWorld(12)
	wcfg.RestMinSec, wcfg.RestMaxSec, wcfg.LifetimeMeanSec = 0, 0, 0
	h := newHarness(t, wcfg, cfg)
	l := h.addLink(0, 0, 1)
	for range 20 {
		h.tick(dt)
	}
	updates := 0
	for range 40 {
		before := l.sess.Stats().Deltas
		h.tick(dt)
		if l.sess.Stats().Deltas != before {
			updates++
		}
	}
	if updates != 10 {
		t.Fatalf("deltas went out on %d of 40 ticks, want 10", updates)
	}
	// A newcomer is spawned at once, on any tick: one that appears right after an update tick
	// is sent in the next frame, three ticks before the next update.
	for l.sess.lastUpdate != h.st.Tick() {
		h.tick(dt)
	}
	x, y, _ := h.focusOf(l.sess)
	id := h.spawn(9, x, y)
	spawns := l.sess.Stats().Spawns
	h.tick(dt)
	if l.sess.lastUpdate == h.st.Tick() || l.sess.Stats().Spawns != spawns+1 {
		t.Fatalf("a tick after an update: update %v, %d spawns sent; want the newcomer's spawn outside an update",
			l.sess.lastUpdate == h.st.Tick(), l.sess.Stats().Spawns-spawns)
	}
	h.tick(dt)
	if _, ok := l.cl.Entity(id.Slot()); !ok {
		t.Fatal("the newcomer did not reach the client")
	}
}

func TestBuildFrameAndAckErrors(t *testing.T) {
	h := newHarness(t, busyWorld(13), testConfig())
	l := h.addLink(0, 0, 1)
	h.tick(dt)
	if _, err := l.sess.BuildFrame(0, 0, l.frame); !errors.Is(err, ErrTickBuilt) {
		t.Fatalf("second build in a tick: %v", err)
	}
	a := protocol.Ack{Latest: l.sess.nextSeq}
	if _, err := l.sess.HandleAck(&a); !errors.Is(err, ErrAckFuture) {
		t.Fatalf("ack of an unsent sequence: %v", err)
	}
	if _, err := NewView(h.st, h.sh, Config{}); err == nil {
		t.Fatal("NewView accepted an empty config")
	}
	if _, err := NewView(h.st, NewShared(h.st.Capacity()+1), testConfig()); !errors.Is(err, ErrSharedCapacity) {
		t.Fatalf("NewView with the shared state of another capacity: %v", err)
	}
	if err := l.sess.SetConfig(Config{MaxPacketBytes: 10}); err == nil {
		t.Fatal("SetConfig accepted a bad config")
	}
}

func TestConfigFromNetcode(t *testing.T) {
	nc := netcode.NetcodeConfig{TickRateHz: 30, Budget: netcode.BudgetConfig{StateUpdateHz: 10}}
	c := FromNetcode(netcode.MustResolve(nc), 200)
	want := Config{MaxPacketBytes: netcode.DefaultBudgetMaxPacketBytes, TickRateHz: 30, StateUpdateHz: 10, InterestRadius: 200}
	if c != want {
		t.Fatalf("FromNetcode = %+v, want %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := c.updateInterval(); got != 3 {
		t.Fatalf("update interval %d, want 3", got)
	}
}

func TestPacketLossCounted(t *testing.T) {
	h := newHarness(t, busyWorld(14), testConfig())
	lossy := h.addLink(2400, 300, 2)
	clean := h.addLink(2400, 0, 2)
	for range 300 {
		h.tick(dt)
	}
	ls, cs := lossy.sess.Stats(), clean.sess.Stats()
	if cs.PacketsLost != 0 || cs.PacketsAcked == 0 {
		t.Fatalf("clean link: %d lost, %d acked", cs.PacketsLost, cs.PacketsAcked)
	}
	rate := float64(ls.PacketsLost) / float64(ls.PacketsLost+ls.PacketsAcked)
	// 30% of packets are dropped; a lost ACK is covered by the next one's window.
	if rate < 0.2 || rate > 0.4 {
		t.Fatalf("lossy link: loss rate %.2f (%d lost, %d acked), want about 0.3", rate, ls.PacketsLost, ls.PacketsAcked)
	}
	if rtt := clean.sess.RTTTicks(); rtt < 1 || rtt > 6 {
		t.Fatalf("RTT %v ticks on a link of 1-2 ticks each way", rtt)
	}
}

func TestRecycle(t *testing.T) {
	h := newHarness(t, busyWorld(15), testConfig())
	l := h.addLink(0, 0, 1)
	h.tick(dt)
	s := l.sess
	if l.frame.Packets() == 0 || s.MemoryBytes() <= 0 || s.Known() == 0 {
		t.Fatalf("first frame: %d packets, %d bytes held, %d entities known", l.frame.Packets(), s.MemoryBytes(), s.Known())
	}
	s.Recycle()
	if s.Known() != 0 || s.Focus() != entity.None || s.Stats() != (Stats{}) {
		t.Fatal("a recycled view remembers its previous client")
	}
}

// ExampleView_BuildFrame builds one view's first frame of a store that holds a ring of entities
// around the view's avatar.
func ExampleView_BuildFrame() {
	st, _ := entity.NewStore(entity.Config{Capacity: 64, HalfExtent: 100})
	avatar, _ := st.Spawn(1, entity.Transform{})
	for i := range 32 {
		a := float64(i) * 2 * math.Pi / 32
		_, _ = st.Spawn(2, entity.Transform{Pos: [3]float32{float32(90 * math.Cos(a)), float32(90 * math.Sin(a)), 0}})
	}
	v, _ := NewView(st, NewShared(st.Capacity()), FromNetcode(netcode.Resolved{}, 150))
	v.SetFocus(avatar)
	f := NewFrame(netcode.DefaultBackpressureFrameBytes)
	st.Advance()
	st.Commit()
	res, _ := v.BuildFrame(netcode.DefaultBudgetSnapshotBytesPerTick, 1_700_000_000_000, f)
	for i := range f.Packets() {
		_ = f.Packet(i) // hand to the transport, unreliable
	}
	fmt.Println(res.Packets, "packet(s),", res.Spawns, "spawns,", res.Bytes, "bytes")
	// Output: 1 packet(s), 33 spawns, 466 bytes
}

// TestConcurrentViews builds the views of one store in parallel between steps, as a tick loop
// may; run with -race.
func TestConcurrentViews(t *testing.T) {
	h := newHarness(t, busyWorld(16), testConfig())
	for range 4 {
		h.addLink(2400, 0, 1)
	}
	for range 30 {
		h.step(dt)
		var wg sync.WaitGroup
		for _, l := range h.links {
			wg.Go(func() {
				if _, err := l.sess.BuildFrame(l.budget, 0, l.frame); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for _, l := range h.links {
			for i := range l.frame.Packets() {
				if err := l.cl.HandleMessage(l.frame.Packet(i), 0); err != nil {
					t.Fatal(err)
				}
			}
			b, _ := l.cl.AppendAck(nil)
			var a protocol.Ack
			if err := protocol.DecodeAck(b, &a); err != nil {
				t.Fatal(err)
			}
			if _, err := l.sess.HandleAck(&a); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, l := range h.links {
		if l.cl.Len() == 0 || l.sess.Stats().Deltas == 0 {
			t.Fatalf("nothing replicated: %+v", l.sess.Stats())
		}
	}
}

// TestSkippedSessionCatchesUp: a session that is not built for longer than the world's state
// history (backpressure, rate lever) gets the union of what changed, and full state where its
// baselines aged out, and converges.
func TestSkippedSessionCatchesUp(t *testing.T) {
	wcfg := busyWorld(17)
	wcfg.HistoryTicks = 16
	h := newHarness(t, wcfg, testConfig())
	l := h.addLink(2400, 0, 2)
	for range 60 {
		h.tick(dt)
	}
	for range 40 { // skipped: the world moves on, nothing is built
		h.step(dt)
	}
	spawns := l.sess.Stats().Spawns
	for range 10 {
		h.tick(dt)
	}
	if l.sess.Stats().Spawns == spawns {
		t.Fatal("no full state after baselines aged out")
	}
	for range 120 {
		h.tick(0)
	}
	if d := h.diff(l); len(d) > 0 {
		t.Fatalf("did not converge: %d problems, first %q", len(d), d[0])
	}
}

// checkPositions checks the replica array against the slot index: every replica that is not a
// hole is tracked at its own position, every hole is free, and Known counts the replicas.
func checkPositions(t *testing.T, s *View) {
	t.Helper()
	holes := map[int]bool{}
	for _, p := range s.free {
		holes[int(p)] = true
	}
	for i := range s.reps {
		rep := &s.reps[i]
		if rep.hole != holes[i] {
			t.Fatalf("position %d: hole %v, in the free list %v", i, rep.hole, holes[i])
		}
		if p, ok := s.index.find(rep.slot); !rep.hole && (!ok || p != i) {
			t.Fatalf("position %d: slot %d indexed at %d (tracked %v)", i, rep.slot, p, ok)
		}
	}
	if s.Known() != len(s.reps)-len(holes) || len(holes) != len(s.free) {
		t.Fatalf("Known %d, %d positions, %d holes (%d free)", s.Known(), len(s.reps), len(holes), len(s.free))
	}
}

// TestHolesAndCompaction: replicas keep their positions while entities come and go; when most of
// a session's entities leave at once (its interest radius shrinks to a third) the array is
// compacted, and the replicas that moved still converge, over lossy, delaying links, as do those
// that fill the holes when the radius grows back.
func TestHolesAndCompaction(t *testing.T) {
	cfg := testConfig()
	h := newHarness(t, busyWorld(11), cfg)
	for range 2 {
		h.addLink(2400, 100, 4)
	}
	// A replica that compaction moved must ignore the acknowledgements of records sent before it
	// moved, which name its old position: until a record sent from its new position is
	// acknowledged, its baseline stays where it was (or is dropped).
	type placed struct {
		pos            int
		movedAt, base0 uint32 // the tick it last moved at (0: never) and its baseline then
	}
	where := make([]map[uint16]placed, len(h.links))
	for i := range where {
		where[i] = map[uint16]placed{}
	}
	run := func(ticks int) {
		for range ticks {
			h.tick(dt)
			tick := h.st.Tick()
			for li, l := range h.links {
				s := l.sess
				checkPositions(t, s)
				now := map[uint16]placed{}
				for i := range s.reps {
					rep := &s.reps[i]
					if rep.hole {
						continue
					}
					pl, ok := where[li][rep.slot]
					switch {
					case !ok:
						pl = placed{pos: i}
					case pl.pos != i:
						pl = placed{pos: i, movedAt: tick, base0: rep.baseTick}
					case pl.movedAt != 0 && rep.baseTick != pl.base0 && rep.baseTick != 0 && rep.baseTick <= pl.movedAt:
						t.Fatalf("link %d: slot %d moved at tick %d with baseline %d, took baseline %d at tick %d", li, rep.slot, pl.movedAt, pl.base0, rep.baseTick, tick)
					}
					now[rep.slot] = pl
				}
				where[li] = now
			}
		}
	}
	setRadius := func(r float32) {
		h.cfg.InterestRadius = r
		for _, l := range h.links {
			if err := l.sess.SetConfig(h.cfg); err != nil {
				t.Fatal(err)
			}
		}
	}
	run(300)
	peak := make([]int, len(h.links))
	for i, l := range h.links {
		peak[i] = len(l.sess.reps)
	}
	setRadius(cfg.InterestRadius / 3)
	run(300)
	for i, l := range h.links {
		if len(l.sess.reps) >= peak[i]/2 {
			t.Fatalf("link %d: %d positions for %d entities, from %d: not compacted", i, len(l.sess.reps), l.sess.Known(), peak[i])
		}
		moved := 0
		for _, pl := range where[i] {
			if pl.movedAt != 0 {
				moved++
			}
		}
		if moved == 0 {
			t.Fatalf("link %d: compaction moved no replica", i)
		}
	}
	setRadius(cfg.InterestRadius)
	run(300)
	quiet := h.settle(2000)
	for i, l := range h.links {
		if d := h.diff(l); len(d) > 0 {
			t.Fatalf("link %d did not converge after %d quiet ticks: %d problems, first %q", i, quiet, len(d), d[0])
		}
		t.Logf("link %d converged after %d quiet ticks: view %d, %d positions, session %+v", i, quiet, l.cl.Len(), len(l.sess.reps), l.sess.Stats())
	}
}

// TestInterestBetweenScans: gather scans the world in full only every few dozen ticks, yet after
// every build the session tracks every entity within its radius that a scan would find, but
// those it dropped in the build itself (found in the next). The world churns (spawns, deaths,
// rests); the avatars walk across the world; one session skips builds, one changes its focus,
// one its radius, one has no valid focus for a few ticks now and then, and some lose packets,
// so replicas are dropped at any time.
func TestInterestBetweenScans(t *testing.T) {
	wcfg := busyWorld(31)
	wcfg.Capacity = 700
	h := newHarness(t, wcfg, testConfig())
	plain := h.addLink(0, 0, 1)
	skipping := h.addLink(0, 0, 2)
	skipping.skip = func(tick uint32) bool { return tick%7 == 3 || tick%7 == 4 }
	refocused := h.addLink(0, 100, 3)
	resized := h.addLink(2400, 200, 4)
	blinking := h.addLink(0, 0, 1)
	avatars := []entity.ID{plain.sess.Focus(), skipping.sess.Focus(), refocused.sess.Focus(), resized.sess.Focus(), blinking.sess.Focus()}
	builds := map[*link]int{}
	for tick := range 1500 {
		if tick%90 == 0 {
			for i, a := range avatars {
				h.w.SetTarget(a, float32((tick*7+i*131)%600-300), float32((tick*13+i*71)%600-300))
			}
		}
		if tick%200 == 150 {
			refocused.sess.SetFocus(avatars[(tick/200)%len(avatars)])
		}
		if tick%300 == 250 {
			cfg := h.cfg
			cfg.InterestRadius = []float32{150, 90, 200}[(tick/300)%3]
			if err := resized.sess.SetConfig(cfg); err != nil {
				t.Fatal(err)
			}
		}
		switch tick % 97 {
		case 40:
			blinking.sess.SetFocus(0) // names no entity
		case 46:
			blinking.sess.SetFocus(avatars[4])
		}
		before := make(map[*link][]uint8, len(h.links))
		for _, l := range h.links {
			before[l] = slices.Clone(l.sess.index.bits)
		}
		h.tick(dt)
		for _, l := range h.links {
			if l.sess.lastBuild != h.st.Tick() {
				continue
			}
			builds[l]++
			x, y, ok := h.focusOf(l.sess)
			if !ok {
				continue
			}
			for _, hit := range h.st.QueryNew(x, y, l.sess.cfg.InterestRadius, l.sess.index.bits, nil) {
				if before[l][hit.Slot>>3]&(1<<(hit.Slot&7)) == 0 {
					t.Fatalf("tick %d, link %d: slot %d within the radius (%.1f m) is not tracked and was not before the build",
						h.st.Tick(), slices.Index(h.links, l), hit.Slot, math.Sqrt(float64(hit.Dist2)))
				}
			}
		}
	}
	for _, l := range []*link{plain, skipping} { // a skipped build needs no scan
		if s := l.sess.scans; s == 0 || int(s) > builds[l]/10 {
			t.Errorf("link %d: %d full scans in %d builds, want a few", slices.Index(h.links, l), s, builds[l])
		}
	}
	for i, l := range h.links {
		t.Logf("link %d: %d full scans in %d builds", i, l.sess.scans, builds[l])
	}
	blinking.sess.SetFocus(avatars[4])
	if err := resized.sess.SetConfig(h.cfg); err != nil { // the radius diff checks
		t.Fatal(err)
	}
	if n := h.settle(600); n == 600 {
		t.Fatal("views did not converge")
	}
}

// TestDroppedInRadiusFoundNextTick: an entity that left interest is dropped when its despawn is
// acknowledged, even if the ACK comes in the tick it walks back within the radius; the next
// build tracks it again, long before a full interest scan would.
func TestDroppedInRadiusFoundNextTick(t *testing.T) {
	cfg := testConfig()
	cfg.InterestRadius = 100
	h := newStoreHarness(t, entity.Config{Capacity: 4, HalfExtent: 500}, cfg)
	s := h.view(cfg)
	a, b := h.spawn(kindAvatar, 0, 0), h.spawn(2, 50, 0)
	s.SetFocus(a)
	f := NewFrame(64 << 10)
	bx := float32(50)
	// walk moves b along the X axis toward x at 4.5 m/s, building a frame every tick, until
	// until holds.
	walk := func(x float32, until func() bool, each func()) {
		t.Helper()
		for range 60 * 120 {
			bx += max(-0.075, min(0.075, x-bx))
			h.place(b, bx, 0)
			h.step(dt)
			if each != nil {
				each()
			}
			build(t, s, f)
			if until() {
				return
			}
		}
		t.Fatal("never got there")
	}
	walk(50, func() bool { return true }, nil)
	if !s.index.has(b.Slot()) {
		t.Fatal("b not tracked at 50 m")
	}
	// Out past the exit radius: b leaves and its despawn goes out, unacknowledged.
	despawns := s.Stats().Despawns
	walk(130, func() bool { return s.Stats().Despawns > despawns }, nil)
	despawnSeq := s.nextSeq - 1
	// Back in: the despawn's ACK arrives just before the build in which b is within the radius.
	acked := false
	walk(50, func() bool { return acked }, func() {
		if !acked && bx <= 100 {
			if _, err := s.HandleAck(&protocol.Ack{Latest: despawnSeq}); err != nil {
				t.Fatal(err)
			}
			acked = true
		}
	})
	if s.index.has(b.Slot()) {
		t.Fatal("b was not dropped when its despawn was acknowledged")
	}
	scans := s.scans
	h.step(dt)
	build(t, s, f)
	if !s.index.has(b.Slot()) || s.scans != scans {
		t.Fatalf("next build: b tracked %v, full scans %d -> %d; want b tracked without a scan", s.index.has(b.Slot()), scans, s.scans)
	}
}

// TestInterestScansUnderChurn: when the world spawns more entities in a tick than the session
// tracks, checking them costs more than a scan, and every build scans.
func TestInterestScansUnderChurn(t *testing.T) {
	wcfg := busyWorld(41)
	wcfg.LifetimeMeanSec = 0.02 // every entity lives a tick or two
	h := newHarness(t, wcfg, testConfig())
	l := h.addLink(0, 0, 1)
	for range 120 {
		h.tick(dt)
	}
	if builds := l.sess.Stats().Frames; l.sess.scans != builds {
		t.Fatalf("%d full scans in %d builds, want one per build", l.sess.scans, builds)
	}
}

// TestLongRoundTripKeepsBaselinesInHistory: on a round trip longer than storeAge, the baselines of
// moving entities, replaced every frame, stay in the world's history rather than being copied
// into the session every frame.
func TestLongRoundTripKeepsBaselinesInHistory(t *testing.T) {
	bs := newBenchServerDelays(t, 4, func(int) uint32 { return 12 }) // every entity moves
	for range 30 {
		bs.tick()
	}
	for i, s := range bs.sessions {
		stored, based := 0, 0
		for _, rep := range s.reps {
			if !rep.hole && rep.baseTick != 0 {
				based++
				if rep.baseStored {
					stored++
				}
			}
		}
		if based == 0 || stored*20 > based {
			t.Errorf("session %d (round trip %.1f ticks, copies at age %d): %d of %d baselines copied",
				i, s.RTTTicks(), s.storeAgeFor(), stored, based)
		}
	}
}

// TestSpawnWatchedFromScanPoint: between scans the focus moves to another entity near the scan
// point, and an entity spawns within the band around the scan point though beyond it around the
// new focus; the focus comes back and the entity walks into the radius. The view tracks it in the
// build it arrives in, long before the next scan.
func TestSpawnWatchedFromScanPoint(t *testing.T) {
	cfg := testConfig()
	cfg.InterestRadius = 100
	r, slack := cfg.InterestRadius, cfg.InterestRadius*scanSlack
	h := newStoreHarness(t, entity.Config{Capacity: 8, HalfExtent: 500}, cfg)
	// The scan is at f, the origin: the spawn point p is 0.1 slack into the band around it. The
	// other entity rests 0.92 slack beyond f, so p is beyond the band around it.
	p := [2]float32{r + 0.1*slack, 0}
	a, other := h.spawn(kindAvatar, 0, 0), h.spawn(kindAvatar, -0.92*slack, 0)
	s := h.view(cfg)
	s.SetFocus(a)
	fr := NewFrame(64 << 10)
	stepAndBuild := func() {
		t.Helper()
		h.step(dt)
		build(t, s, fr)
	}
	stepAndBuild() // the scan, at f
	scans := s.scans
	s.SetFocus(other)
	e := h.spawn(2, p[0], p[1])
	stepAndBuild()
	if s.index.has(e.Slot()) {
		t.Fatal("the spawn is tracked beyond the radius")
	}
	s.SetFocus(a)
	x := p[0]
	for range 30 {
		x -= 0.075 // toward f at 4.5 m/s
		h.place(e, x, 0)
		stepAndBuild()
		if s.scans != scans {
			t.Fatal("a full scan came before the spawn reached the radius")
		}
		if x <= r {
			if !s.index.has(e.Slot()) {
				t.Fatal("the spawn is within the radius and not tracked")
			}
			return
		}
	}
	t.Fatal("the spawn never reached the radius")
}

// build builds s's frame of the store's current tick, with no budget, into f.
func build(t *testing.T, s *View, f *Frame) {
	t.Helper()
	if _, err := s.BuildFrame(0, 0, f); err != nil {
		t.Fatal(err)
	}
}
