package snapshot

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/protocol"
	"github.com/netfleet/netfleet/gameserver/world"
)

const dt = 1.0 / 60

func testConfig() Config {
	return Config{MaxPacketBytes: 1200, TickRateHz: 60, InterestRadius: 150}
}

// busyWorld has moving, resting, spawning and despawning entities, about 80 per session's
// interest.
func busyWorld(seed uint64) world.Config {
	return world.Config{
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
			if l.frame.Bytes() != 0 || l.frame.Packets() != 0 || l.sess.Stats().LastCandidates != 0 {
				t.Fatalf("link %d: idle tick built %d packets, %d bytes, %d candidates", i, l.frame.Packets(), l.frame.Bytes(), l.sess.Stats().LastCandidates)
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
	x, y, _, _ := h.w.Position(l.sess.Focus())
	r := h.cfg.InterestRadius
	var sentMax float32
	sent := map[uint16]bool{}
	for _, rec := range snap.Records {
		if rec.Op != protocol.OpSpawn {
			t.Fatalf("first frame has op %d", rec.Op)
		}
		sent[rec.ID] = true
		p := h.w.State(rec.ID).Pos
		dx, dy := protocol.DequantizePos(p[0])-x, protocol.DequantizePos(p[1])-y
		sentMax = max(sentMax, dx*dx+dy*dy)
	}
	// Buckets are a quarter octave wide, so an unsent entity may be somewhat nearer than the
	// farthest sent one, but not much.
	for _, hit := range h.w.Query(x, y, r, nil) {
		if !sent[hit.Slot] && hit.Dist2 < sentMax && (1-0.75*hit.Dist2/(r*r)) > 1.2*(1-0.75*sentMax/(r*r)) {
			t.Fatalf("entity at distance² %v unsent while one at %v was sent", hit.Dist2, sentMax)
		}
	}
}

// TestDespawnResentUntilAcked: a despawn that is lost is sent again; once acknowledged, the
// session forgets the entity.
func TestDespawnResentUntilAcked(t *testing.T) {
	wcfg := world.Config{Seed: 1, Capacity: 8, HalfExtent: 100, RestMinSec: 1000, RestMaxSec: 1000}
	h := newHarness(t, wcfg, testConfig())
	l := h.addLink(0, 0, 1)
	other, err := h.w.AddAvatar()
	if err != nil {
		t.Fatal(err)
	}
	h.w.SetTarget(other, 0, 0)
	h.w.SetTarget(l.sess.Focus(), 0, 0)
	for range 60 * 60 {
		h.tick(dt)
	}
	if _, ok := l.cl.Entity(other.Slot()); !ok {
		t.Fatal("the other avatar never reached the client")
	}
	h.w.Remove(other)
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
	for _, hit := range h.w.Query(0, 0, 1000, nil) {
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
	// A newcomer is spawned at once, on any tick.
	id, err := h.w.AddAvatar()
	if err != nil {
		t.Fatal(err)
	}
	h.w.SetTarget(id, 0, 0)
	h.w.SetTarget(l.sess.Focus(), 0, 0)
	for range 60 * 45 {
		h.tick(dt)
		if _, ok := l.cl.Entity(id.Slot()); ok {
			return
		}
	}
	t.Fatal("newcomer never spawned")
}

func TestBuildFrameAndAckErrors(t *testing.T) {
	h := newHarness(t, busyWorld(13), testConfig())
	l := h.addLink(0, 0, 1)
	h.tick(dt)
	if err := l.sess.BuildFrame(0, 0, l.frame); !errors.Is(err, ErrTickBuilt) {
		t.Fatalf("second build in a tick: %v", err)
	}
	a := protocol.Ack{Latest: l.sess.nextSeq}
	if _, err := l.sess.HandleAck(&a); !errors.Is(err, ErrAckFuture) {
		t.Fatalf("ack of an unsent sequence: %v", err)
	}
	if _, err := NewSession(h.w, Config{}); err == nil {
		t.Fatal("NewSession accepted an empty config")
	}
	if err := l.sess.SetConfig(Config{MaxPacketBytes: 10}); err == nil {
		t.Fatal("SetConfig accepted a bad config")
	}
}

func TestConfigFromNetcode(t *testing.T) {
	nc := netcode.NetcodeConfig{TickRateHz: 30, Budget: netcode.BudgetConfig{StateUpdateHz: 10}}
	c := FromNetcode(nc, 200)
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

func TestPoolAndRecycle(t *testing.T) {
	h := newHarness(t, busyWorld(15), testConfig())
	p, err := NewPool(h.w, h.cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	s := p.Get()
	id, err := h.w.AddAvatar()
	if err != nil {
		t.Fatal(err)
	}
	s.SetFocus(id)
	h.w.Step(dt)
	f := NewFrame(64 << 10)
	if err := s.BuildFrame(0, 0, f); err != nil || f.Packets() == 0 {
		t.Fatalf("build: %d packets, %v", f.Packets(), err)
	}
	if s.MemoryBytes() <= 0 || s.Known() == 0 {
		t.Fatal("no memory or entities accounted")
	}
	p.Put(s)
	again := p.Get()
	if again.Known() != 0 || again.Focus() != 0 || again.Stats() != (Stats{}) {
		t.Fatal("a recycled session remembers its previous client")
	}
	for range 3 {
		p.Get() // past the preallocated ones
	}
}

func ExampleSession_BuildFrame() {
	w, _ := world.New(world.Config{Seed: 1, Capacity: 64, Population: 32, HalfExtent: 100})
	avatar, _ := w.AddAvatar()
	s, _ := NewSession(w, FromNetcode(netcode.NetcodeConfig{}, 150))
	s.SetFocus(avatar)
	f := NewFrame(netcode.DefaultBackpressureFrameBytes)
	w.Step(1.0 / 60)
	_ = s.BuildFrame(netcode.DefaultBudgetSnapshotBytesPerTick, 1_700_000_000_000, f)
	for i := range f.Packets() {
		_ = f.Packet(i) // hand to the transport, unreliable
	}
	fmt.Println(f.Packets(), "packet(s),", s.Stats().Spawns, "spawns")
	// Output: 1 packet(s), 28 spawns
}

// TestConcurrentSessions builds the sessions of one world in parallel between steps, as a tick
// loop may; run with -race.
func TestConcurrentSessions(t *testing.T) {
	h := newHarness(t, busyWorld(16), testConfig())
	for range 4 {
		h.addLink(2400, 0, 1)
	}
	for range 30 {
		h.w.Step(dt)
		var wg sync.WaitGroup
		for _, l := range h.links {
			wg.Go(func() {
				if err := l.sess.BuildFrame(l.budget, 0, l.frame); err != nil {
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
		h.w.Step(dt)
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
func checkPositions(t *testing.T, s *Session) {
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
			tick := h.w.Tick()
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
	avatars := []world.ID{plain.sess.Focus(), skipping.sess.Focus(), refocused.sess.Focus(), resized.sess.Focus(), blinking.sess.Focus()}
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
			if l.sess.lastBuild != h.w.Tick() {
				continue
			}
			builds[l]++
			x, y, _, ok := h.w.Position(l.sess.Focus())
			if !ok {
				continue
			}
			for _, hit := range h.w.QueryNew(x, y, l.sess.cfg.InterestRadius, l.sess.index.bits, nil) {
				if before[l][hit.Slot>>3]&(1<<(hit.Slot&7)) == 0 {
					t.Fatalf("tick %d, link %d: slot %d within the radius (%.1f m) is not tracked and was not before the build",
						h.w.Tick(), slices.Index(h.links, l), hit.Slot, math.Sqrt(float64(hit.Dist2)))
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
	w, err := world.New(world.Config{Seed: 3, Capacity: 4, HalfExtent: 500, RestMinSec: 1000, RestMaxSec: 1000})
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.InterestRadius = 100
	s, err := NewSession(w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := w.AddAvatar()
	b, _ := w.AddAvatar()
	s.SetFocus(a)
	f := NewFrame(64 << 10)
	walk := func(x float32, until func(d float32) bool, each func()) {
		t.Helper()
		w.SetTarget(b, x, 0)
		for range 60 * 120 {
			w.Step(dt)
			bx, by, _, _ := w.Position(b)
			if each != nil {
				each()
			}
			build(t, s, f)
			if until(float32(math.Hypot(float64(bx), float64(by)))) {
				return
			}
		}
		t.Fatal("never got there")
	}
	w.SetTarget(a, 0, 0)
	walk(50, func(float32) bool { ax, ay, _, _ := w.Position(a); return ax == 0 && ay == 0 }, nil)
	walk(50, func(d float32) bool { return d == 50 }, nil)
	if !s.index.has(b.Slot()) {
		t.Fatal("b not tracked at 50 m")
	}
	// Out past the exit radius: b leaves and its despawn goes out, unacknowledged.
	despawns := s.Stats().Despawns
	walk(130, func(float32) bool { return s.Stats().Despawns > despawns }, nil)
	despawnSeq := s.nextSeq - 1
	// Back in: the despawn's ACK arrives just before the build in which b is within the radius.
	acked := false
	walk(50, func(d float32) bool { return acked }, func() {
		if bx, by, _, _ := w.Position(b); !acked && math.Hypot(float64(bx), float64(by)) <= 100 {
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
	w.Step(dt)
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
// new focus; the focus comes back and the entity walks into the radius. The session tracks it in
// the build it arrives in, long before the next scan.
func TestSpawnWatchedFromScanPoint(t *testing.T) {
	wcfg := world.Config{Seed: 9, Capacity: 8, HalfExtent: 500, RestMinSec: 1000, RestMaxSec: 1000}
	cfg := testConfig()
	cfg.InterestRadius = 100
	r, slack := cfg.InterestRadius, cfg.InterestRadius*scanSlack
	// setup makes a world whose two avatars walk to a and c and rest there. Avatars take the
	// world's random numbers only to spawn and to rest, so where a third one will spawn does not
	// depend on a and c.
	setup := func(a, c [2]float32) (*world.World, world.ID, world.ID) {
		t.Helper()
		w, err := world.New(wcfg)
		if err != nil {
			t.Fatal(err)
		}
		ida, _ := w.AddAvatar()
		idc, _ := w.AddAvatar()
		w.SetTarget(ida, a[0], a[1])
		w.SetTarget(idc, c[0], c[1])
		at := func(id world.ID, p [2]float32) bool { x, y, _, _ := w.Position(id); return x == p[0] && y == p[1] }
		for range 60 * 600 {
			if at(ida, a) && at(idc, c) {
				return w, ida, idc
			}
			w.Step(dt)
		}
		t.Fatal("avatars did not arrive")
		return nil, 0, 0
	}
	probe, _, _ := setup([2]float32{}, [2]float32{})
	e, _ := probe.AddAvatar()
	px, py, _, _ := probe.Position(e)
	ux, uy := float32(1), float32(0) // toward the middle of the world, to stay in it
	if d := float32(math.Hypot(float64(px), float64(py))); d > 1 {
		ux, uy = -px/d, -py/d
	}
	// The scan is at f: the spawn point is 0.1 slack into the band around it. The other avatar
	// rests 0.92 slack beyond f, so the spawn point is beyond the band around it.
	f := [2]float32{px + ux*(r+0.1*slack), py + uy*(r+0.1*slack)}
	c := [2]float32{f[0] + ux*0.92*slack, f[1] + uy*0.92*slack}
	w, a, other := setup(f, c)
	s, err := NewSession(w, cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.SetFocus(a)
	fr := NewFrame(64 << 10)
	stepAndBuild := func() {
		t.Helper()
		w.Step(dt)
		build(t, s, fr)
	}
	stepAndBuild() // the scan, at f
	scans := s.scans
	s.SetFocus(other)
	e2, err := w.AddAvatar()
	if err != nil {
		t.Fatal(err)
	}
	if x, y, _, _ := w.Position(e2); x != px || y != py {
		t.Fatalf("spawned at (%v, %v), the probe at (%v, %v)", x, y, px, py)
	}
	stepAndBuild()
	s.SetFocus(a)
	w.SetTarget(e2, f[0], f[1])
	for range 30 {
		stepAndBuild()
		if s.scans != scans {
			t.Fatal("a full scan came before the spawn reached the radius")
		}
		x, y, _, _ := w.Position(e2)
		if math.Hypot(float64(x-f[0]), float64(y-f[1])) <= float64(r) {
			if !s.index.has(e2.Slot()) {
				t.Fatal("the spawn is within the radius and not tracked")
			}
			return
		}
	}
	t.Fatal("the spawn never reached the radius")
}

// build builds s's frame of the world's current tick, with no budget, into f.
func build(t *testing.T, s *Session, f *Frame) {
	t.Helper()
	if err := s.BuildFrame(0, 0, f); err != nil {
		t.Fatal(err)
	}
}
