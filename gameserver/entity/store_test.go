package entity

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/netfleet/netfleet/gameserver/protocol"
)

func mustStore(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := NewStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func at(x, y float32) Transform { return Transform{Pos: [3]float32{x, y, 0}} }

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{},
		{Capacity: protocol.MaxEntities + 1},
		{Capacity: 10, HalfExtent: protocol.WorldHalfExtent},
		{Capacity: 10, HistoryTicks: 48},
		{Capacity: 10, HistoryTicks: 8192},
		{Capacity: 10, CellSize: 0.5},
		{Capacity: 10, HalfExtent: 10, CellSize: 30},
	} {
		if _, err := NewStore(cfg); err == nil {
			t.Errorf("NewStore accepted %+v", cfg)
		}
	}
	s := mustStore(t, Config{Capacity: 10})
	if c := s.Config(); c.HalfExtent != 2000 || c.CellSize != 128 || c.HistoryTicks != 64 {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if s.Tick() != 1 || s.Count() != 0 || s.Capacity() != 10 {
		t.Fatalf("new store: tick %d, count %d, capacity %d", s.Tick(), s.Count(), s.Capacity())
	}
}

// TestSpawnSetDespawn: a spawn is visible in the tables at once and to queries after Commit; a
// Set reaches the state at Commit and stamps the tick only if the quantized state changed; a
// despawn frees the slot, which is reused last, with a new generation.
func TestSpawnSetDespawn(t *testing.T) {
	s := mustStore(t, Config{Capacity: 3, HalfExtent: 100})
	a, err := s.Spawn(7, at(10, 20))
	if err != nil {
		t.Fatal(err)
	}
	if a == None || !s.Valid(a) || s.Count() != 1 {
		t.Fatalf("spawned %v: valid %v, count %d", a, s.Valid(a), s.Count())
	}
	if k, ok := s.KindOf(a); !ok || k != 7 || s.Kinds()[a.Slot()] != 7 {
		t.Fatalf("kind %d %v", k, ok)
	}
	m := s.Metas()[a.Slot()]
	if !m.Alive || m.X != 10 || m.Y != 20 || m.Changed != 1 || m.Gen != a.Gen() {
		t.Fatalf("meta after spawn %+v", m)
	}
	if st := s.States()[a.Slot()]; st.Pos[0] != protocol.QuantizePos(10) || st.Pos[1] != protocol.QuantizePos(20) {
		t.Fatalf("state after spawn %+v", st)
	}
	if len(s.Query(10, 20, 1, nil)) != 0 {
		t.Fatal("a spawn is in the grid before Commit")
	}
	s.Commit()
	if hits := s.Query(10, 20, 1, nil); len(hits) != 1 || hits[0].Slot != a.Slot() {
		t.Fatalf("query after Commit: %v", hits)
	}

	s.Advance()
	// A move below the quantum changes nothing on the wire.
	if err := s.Set(a, new(at(10+0.001, 20))); err != nil {
		t.Fatal(err)
	}
	s.Commit()
	if m := s.Metas()[a.Slot()]; m.Changed != 1 || m.X != 10.001 {
		t.Fatalf("sub-quantum move: meta %+v", m)
	}
	s.Advance()
	if err := s.Set(a, &Transform{Pos: [3]float32{30, 20, 5}, Vel: [3]float32{1, 0, 0}, Rot: protocol.YawRotation(1)}); err != nil {
		t.Fatal(err)
	}
	if s.States()[a.Slot()].Pos[0] == protocol.QuantizePos(30) {
		t.Fatal("Set reached the state before Commit")
	}
	s.Commit()
	want := protocol.State{Pos: [3]int32{protocol.QuantizePos(30), protocol.QuantizePos(20), protocol.QuantizePos(5)},
		Rot: protocol.YawRotation(1), Vel: [3]int16{protocol.QuantizeVel(1), 0, 0}}
	if m, st := s.Metas()[a.Slot()], s.States()[a.Slot()]; m.Changed != s.Tick() || st != want {
		t.Fatalf("after a move: meta %+v state %+v, want changed at %d, %+v", m, st, s.Tick(), want)
	}
	if got, ok := s.Get(a); !ok || got.Pos != [3]float32{30, 20, 5} {
		t.Fatalf("Get %+v %v", got, ok)
	}

	b, _ := s.Spawn(1, at(0, 0))
	c, _ := s.Spawn(1, at(0, 0))
	if _, err := s.Spawn(1, at(0, 0)); !errors.Is(err, ErrFull) {
		t.Fatalf("spawn in a full store: %v", err)
	}
	if err := s.Despawn(a); err != nil {
		t.Fatal(err)
	}
	if s.Valid(a) || s.Despawn(a) == nil || s.Set(a, new(at(1, 1))) == nil || s.Bump(a, 1) == nil {
		t.Fatal("a despawned entity is still writable")
	}
	if m := s.Metas()[a.Slot()]; m.Alive || m.Changed != s.Tick() {
		t.Fatalf("meta after despawn %+v", m)
	}
	d, err := s.Spawn(2, at(1, 1))
	if err != nil || d.Slot() != a.Slot() || d == a || !s.Valid(b) || !s.Valid(c) || s.Count() != 3 {
		t.Fatalf("reuse: %v (%v), old %v; count %d", d, err, a, s.Count())
	}
}

// TestBadInputRefused: writes with stale ids or values that are not finite are refused with
// their error and change nothing.
func TestBadInputRefused(t *testing.T) {
	s := mustStore(t, Config{Capacity: 4, HalfExtent: 100})
	a, _ := s.Spawn(1, at(5, 5))
	s.Commit()
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, bad := range []Transform{
		{Pos: [3]float32{nan, 0, 0}}, {Pos: [3]float32{0, 0, inf}}, {Vel: [3]float32{0, -inf, 0}},
	} {
		if _, err := s.Spawn(1, bad); !errors.Is(err, ErrNotFinite) {
			t.Errorf("Spawn(%v): %v", bad, err)
		}
		if err := s.Set(a, &bad); !errors.Is(err, ErrNotFinite) {
			t.Errorf("Set(%v): %v", bad, err)
		}
	}
	for _, id := range []ID{None, MakeID(a.Slot(), a.Gen()+1), MakeID(60000, 1)} {
		if s.Valid(id) || !errors.Is(s.Set(id, new(at(0, 0))), ErrNoEntity) || !errors.Is(s.Despawn(id), ErrNoEntity) ||
			!errors.Is(s.Bump(id, 1), ErrNoEntity) {
			t.Errorf("id %v accepted", id)
		}
		if _, ok := s.Get(id); ok {
			t.Errorf("Get(%v) ok", id)
		}
	}
	for _, amount := range []float32{0, -1, nan, inf, float32(math.Inf(-1))} {
		if err := s.Bump(a, amount); !errors.Is(err, ErrBadBump) {
			t.Errorf("Bump by %v: %v", amount, err)
		}
	}
	s.Advance()
	s.Commit()
	if got, _ := s.Get(a); got.Pos != [3]float32{5, 5, 0} || s.Count() != 1 || len(s.Bumps()) != 0 {
		t.Fatalf("refused writes changed the store: %+v, count %d, bumps %v", got, s.Count(), s.Bumps())
	}
	// A bump between ticks belongs to the next one; one in a tick, to that tick.
	want := Bump{Slot: a.Slot(), Gen: a.Gen(), Amount: 2.5}
	if err := s.Bump(a, 2.5); err != nil || len(s.Bumps()) != 0 {
		t.Fatalf("Bump between ticks: %v, committed bumps %v", err, s.Bumps())
	}
	s.Advance()
	if err := s.Bump(a, 1); err != nil {
		t.Fatal(err)
	}
	s.Commit()
	if got := s.Bumps(); len(got) != 2 || got[0] != want || got[1].Amount != 1 {
		t.Fatalf("bumps of the tick: %v", got)
	}
	s.Advance()
	s.Commit()
	if len(s.Bumps()) != 0 {
		t.Fatal("bumps outlived their tick")
	}
}

// TestStateAt: the history returns each tick's states for HistoryTicks ticks, and a spawn
// between ticks has its state at the current tick.
func TestStateAt(t *testing.T) {
	s := mustStore(t, Config{Capacity: 4, HalfExtent: 100, HistoryTicks: 8})
	a, _ := s.Spawn(1, at(0, 0))
	s.Commit()
	var past []protocol.State
	for i := range 20 {
		s.Advance()
		_ = s.Set(a, new(at(float32(i), 0)))
		s.Commit()
		past = append(past, s.States()[a.Slot()])
	}
	for i, want := range past {
		tick := s.Tick() - uint32(len(past)-1-i)
		got, ok := s.StateAt(a.Slot(), tick)
		if inWindow := s.Tick()-tick < 8; ok != inWindow {
			t.Fatalf("StateAt(tick %d) ok=%v at tick %d", tick, ok, s.Tick())
		}
		if ok && *got != want {
			t.Fatalf("StateAt(tick %d) = %+v, want %+v", tick, *got, want)
		}
		if ok && s.History()[int(tick%8)*s.Capacity()+int(a.Slot())] != want {
			t.Fatalf("History row of tick %d does not hold its state", tick)
		}
	}
	if _, ok := s.StateAt(a.Slot(), s.Tick()+1); ok {
		t.Fatal("StateAt returned a future tick")
	}
	b, _ := s.Spawn(1, at(3, 3))
	if got, ok := s.StateAt(b.Slot(), s.Tick()); !ok || *got != s.States()[b.Slot()] {
		t.Fatal("an entity spawned between ticks has no history at the current tick")
	}
}

// mover drives a store the way a game might: entities walk at their own speeds, some teleport,
// some despawn and are replaced, and an entity sometimes spawns between ticks.
type mover struct {
	s   *Store
	rng uint64
	ids []ID
	vel [][2]float32
}

func (m *mover) rand() float32 {
	m.rng = m.rng*6364136223846793005 + 1442695040888963407
	return float32(m.rng>>40) / (1 << 24)
}

func (m *mover) spawn(t testing.TB) {
	h := m.s.Config().HalfExtent
	id, err := m.s.Spawn(Kind(1+len(m.ids)%3), at((2*m.rand()-1)*h, (2*m.rand()-1)*h))
	if err != nil {
		t.Fatal(err)
	}
	m.ids = append(m.ids, id)
	m.vel = append(m.vel, [2]float32{(2*m.rand() - 1) * 6, (2*m.rand() - 1) * 6})
}

// step runs one tick of dt seconds: Advance, the moves, Commit.
func (m *mover) step(t testing.TB, dt float32) {
	m.s.Advance()
	h := m.s.Config().HalfExtent
	for i := 0; i < len(m.ids); i++ {
		id := m.ids[i]
		x, _ := m.s.Get(id)
		switch r := m.rand(); {
		case r < 0.01: // replaced
			if err := m.s.Despawn(id); err != nil {
				t.Fatal(err)
			}
			m.ids[i], m.vel[i] = m.ids[len(m.ids)-1], m.vel[len(m.vel)-1]
			m.ids, m.vel = m.ids[:len(m.ids)-1], m.vel[:len(m.vel)-1]
			m.spawn(t)
			continue
		case r < 0.015: // teleported
			x.Pos = [3]float32{(2*m.rand() - 1) * h, (2*m.rand() - 1) * h, 0}
		case r < 0.5: // at rest
			continue
		default:
			x.Pos[0] += m.vel[i][0] * dt
			x.Pos[1] += m.vel[i][1] * dt
		}
		if err := m.s.Set(id, &x); err != nil {
			t.Fatal(err)
		}
	}
	m.s.Commit()
}

// TestReachAndSpawned: Reach bounds the motion of every entity between any two ticks, through
// rests, teleports and varying steps; and every entity that spawns (in a tick or between ticks)
// is listed by SpawnedSince the tick a viewer last looked, whether it looks every tick or every
// few dozen.
func TestReachAndSpawned(t *testing.T) {
	s := mustStore(t, Config{Capacity: 700, HalfExtent: 300, CellSize: 50})
	m := &mover{s: s, rng: 7}
	for range 500 {
		m.spawn(t)
	}
	s.Commit()
	type seen struct {
		gen   uint16
		x, y  float32
		reach float64
	}
	first := make([]seen, s.Capacity()) // where each incarnation was first seen
	// Viewers that look every lag ticks, the longest within the history.
	viewers := []*spawnViewer{newSpawnViewer(s, 1), newSpawnViewer(s, 3), newSpawnViewer(s, 17), newSpawnViewer(s, 63)}
	for tick := range 600 {
		if tick%50 == 10 { // spawned between ticks
			m.spawn(t)
		}
		m.step(t, []float32{1.0 / 60, 0, 1.0 / 30, 0.1}[tick%4])
		for _, v := range viewers {
			if tick%v.lag == 0 && !v.look(t, s) {
				t.Fatalf("tick %d: SpawnedSince does not cover tick %d, %d ticks ago", s.Tick(), v.looked, s.Tick()-v.looked)
			}
		}
		for slot, meta := range s.Metas() {
			if !meta.Alive {
				continue
			}
			f := &first[slot]
			if f.gen != meta.Gen {
				*f = seen{gen: meta.Gen, x: meta.X, y: meta.Y, reach: s.Reach()}
				continue
			}
			moved := math.Hypot(float64(meta.X-f.x), float64(meta.Y-f.y))
			if bound := s.Reach() - f.reach; moved > bound {
				t.Fatalf("tick %d: slot %d moved %.4f m, Reach bounds %.4f", s.Tick(), slot, moved, bound)
			}
		}
	}
}

// TestReachIsTight: Reach grows by the farthest move of a tick, not by a declared speed; a tick
// in which nothing moves leaves it as it is.
func TestReachIsTight(t *testing.T) {
	s := mustStore(t, Config{Capacity: 4, HalfExtent: 500})
	a, _ := s.Spawn(1, at(0, 0))
	b, _ := s.Spawn(1, at(100, 0))
	s.Commit()
	r0 := s.Reach()
	s.Advance()
	_ = s.Set(a, new(at(3, 4)))    // 5 m
	_ = s.Set(b, new(at(101, 0)))  // 1 m
	_ = s.Set(b, new(at(100, 12))) // written twice: 12 m from where it was
	s.Commit()
	if d := s.Reach() - r0; d < 12 || d > 12.01 {
		t.Fatalf("Reach grew by %v, want 12", d)
	}
	r1 := s.Reach()
	s.Advance()
	_ = s.Set(a, new(at(3, 4))) // where it is
	s.Commit()
	if s.Reach() != r1 {
		t.Fatalf("a tick without motion grew Reach by %v", s.Reach()-r1)
	}
}

// spawnViewer looks at a store every lag ticks and asks SpawnedSince for the spawns since it last
// looked; every incarnation it did not see before must be among them.
type spawnViewer struct {
	lag    int
	looked uint32
	gens   []uint16 // each slot's generation when last looked at, 0: not alive then
}

func newSpawnViewer(s *Store, lag int) *spawnViewer {
	v := &spawnViewer{lag: lag, looked: s.Tick(), gens: make([]uint16, s.Capacity())}
	for slot, m := range s.Metas() {
		if m.Alive {
			v.gens[slot] = m.Gen
		}
	}
	return v
}

// look reports false if SpawnedSince does not cover the tick it last looked at, and fails t if
// it leaves out a new incarnation.
func (v *spawnViewer) look(t *testing.T, s *Store) bool {
	t.Helper()
	spawned, ok := s.SpawnedSince(v.looked)
	if !ok {
		return false
	}
	listed := map[uint16]bool{}
	for _, slot := range spawned {
		listed[slot] = true
	}
	for slot, m := range s.Metas() {
		if m.Alive && m.Gen != v.gens[slot] && !listed[uint16(slot)] {
			t.Fatalf("tick %d: slot %d incarnation %d spawned since tick %d, not in SpawnedSince", s.Tick(), slot, m.Gen, v.looked)
		}
		if v.gens[slot] = 0; m.Alive {
			v.gens[slot] = m.Gen
		}
	}
	v.looked = s.Tick()
	return true
}

// TestSpawnedSinceBounds: SpawnedSince covers the last HistoryTicks ticks and no more, spawns
// between ticks included; a store spawning more than twice its capacity within them keeps the
// newest spawns, and still covers the last tick.
func TestSpawnedSinceBounds(t *testing.T) {
	s := mustStore(t, Config{Capacity: 40, HalfExtent: 100, HistoryTicks: 8})
	for range 20 {
		s.Advance()
		s.Commit()
	}
	id, err := s.Spawn(1, at(0, 0)) // between ticks: at the current tick
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := s.SpawnedSince(s.Tick()); !ok || !slices.Contains(got, id.Slot()) {
		t.Fatalf("SpawnedSince(now) = %v, %v: the entity spawned now is not listed", got, ok)
	}
	for range 7 {
		s.Advance()
		s.Commit()
	}
	if got, ok := s.SpawnedSince(s.Tick() - 7); !ok || !slices.Contains(got, id.Slot()) {
		t.Fatalf("SpawnedSince(7 ticks ago) = %v, %v: the entity spawned then is not listed", got, ok)
	}
	if _, ok := s.SpawnedSince(s.Tick() - 8); ok {
		t.Fatal("SpawnedSince covers a tick beyond the history")
	}
	if _, ok := s.SpawnedSince(s.Tick() + 1); ok {
		t.Fatal("SpawnedSince covers a tick to come")
	}

	// Every entity is replaced every tick: 40 spawns a tick, so the log's 80 entries hold two
	// ticks of them.
	s = mustStore(t, Config{Capacity: 40, HalfExtent: 100, HistoryTicks: 8})
	ids := make([]ID, 40)
	for i := range ids {
		ids[i], _ = s.Spawn(1, at(0, 0))
	}
	s.Commit()
	v := newSpawnViewer(s, 1)
	for tick := range 30 {
		s.Advance()
		for i, id := range ids {
			_ = s.Despawn(id)
			ids[i], _ = s.Spawn(1, at(float32(i), 0))
		}
		s.Commit()
		if !v.look(t, s) {
			t.Fatalf("tick %d: SpawnedSince does not cover the tick before", s.Tick())
		}
		if _, ok := s.SpawnedSince(s.Tick() - 3); ok && tick > 3 {
			t.Fatalf("tick %d: SpawnedSince covers 3 ticks of 40 spawns each in 80 entries", s.Tick())
		}
		if len(s.log.slots) > 2*s.Capacity() {
			t.Fatalf("the spawn log holds %d entries, over twice the capacity", len(s.log.slots))
		}
	}
}

// busy returns a store with n entities spread over ±half, committed.
func busy(t testing.TB, n int, half float32, seed uint64) (*Store, *mover) {
	s := mustStore(t, Config{Capacity: n + 64, HalfExtent: half, CellSize: 50})
	m := &mover{s: s, rng: seed}
	for range n {
		m.spawn(t)
	}
	s.Commit()
	return s, m
}

func TestQueryMatchesBruteForce(t *testing.T) {
	s, m := busy(t, 500, 500, 6)
	for range 10 {
		m.step(t, 1.0/60)
	}
	r := mover{rng: 99}
	var hits []Hit
	for round := range 2000 {
		x, y := (2*r.rand()-1)*600, (2*r.rand()-1)*600
		radius := r.rand() * 400
		if round%2 == 1 {
			// An entity exactly on the circle, which only rounding keeps in or out.
			p := s.Metas()[m.ids[round%len(m.ids)].Slot()]
			radius = float32(math.Sqrt(float64((p.X-x)*(p.X-x) + (p.Y-y)*(p.Y-y))))
		}
		hits = s.Query(x, y, radius, hits[:0])
		got := map[uint16]float32{}
		for _, h := range hits {
			got[h.Slot] = h.Dist2
		}
		if len(got) != len(hits) {
			t.Fatal("query returned a slot twice")
		}
		for slot, p := range s.Metas() {
			if !p.Alive {
				continue
			}
			d2 := p.Dist2(x, y)
			d, in := got[uint16(slot)]
			if in != (d2 <= radius*radius) || (in && math.Abs(float64(d-d2)) > 1e-3) {
				t.Fatalf("slot %d at distance² %v from (%v, %v), radius %v: returned %v (%v)", slot, d2, x, y, radius, in, d)
			}
		}
	}
}

// TestQueryNew: QueryNew returns Query's hits, in order, but those of known slots.
func TestQueryNew(t *testing.T) {
	s, m := busy(t, 500, 500, 8)
	for range 10 {
		m.step(t, 1.0/60)
	}
	r := mover{rng: 77}
	known := make([]uint8, (s.Capacity()+7)/8)
	var hits, fresh []Hit
	for round := range 200 {
		for i := range known {
			known[i] = uint8(r.rand() * 256)
			if round%4 == 0 {
				known[i] = 0
			}
		}
		x, y := (2*r.rand()-1)*600, (2*r.rand()-1)*600
		radius := r.rand() * 400
		hits = s.Query(x, y, radius, hits[:0])
		fresh = s.QueryNew(x, y, radius, known, fresh[:0])
		var want []Hit
		for _, h := range hits {
			if known[h.Slot/8]&(1<<(h.Slot%8)) == 0 {
				want = append(want, h)
			}
		}
		if !slices.Equal(fresh, want) {
			t.Fatalf("round %d: QueryNew %v, want %v", round, fresh, want)
		}
	}
}

// TestTickAllocatesNothing: writing, committing and querying a warm store allocates nothing.
func TestTickAllocatesNothing(t *testing.T) {
	s, m := busy(t, 500, 300, 7)
	for range 120 {
		m.step(t, 1.0/60)
	}
	hits := make([]Hit, 0, s.Capacity())
	fresh := make([]Hit, 0, s.Capacity())
	known := make([]uint8, (s.Capacity()+7)/8)
	allocs := testing.AllocsPerRun(100, func() {
		s.Advance()
		for _, id := range m.ids {
			x, _ := s.Get(id)
			x.Pos[0] += 0.1
			_ = s.Set(id, &x)
			_ = s.Bump(id, 1)
		}
		s.Commit()
		hits = s.Query(0, 0, 300, hits[:0])
		fresh = s.QueryNew(0, 0, 300, known, fresh[:0])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per tick, want 0", allocs)
	}
}

func BenchmarkCommit(b *testing.B) {
	s := mustStore(b, Config{Capacity: 4096, HalfExtent: 2047})
	ids := make([]ID, 4096)
	for i := range ids {
		ids[i], _ = s.Spawn(1, at(float32(i%64)*60-2000, float32(i/64)*60-2000))
	}
	s.Commit()
	b.ReportAllocs()
	for b.Loop() {
		s.Advance()
		for _, id := range ids {
			x, _ := s.Get(id)
			x.Pos[0] += 0.05
			_ = s.Set(id, &x)
		}
		s.Commit()
	}
}

func fieldStore(t *testing.T) *Store {
	t.Helper()
	return mustStore(t, Config{Capacity: 8, HalfExtent: 100, Schema: &protocol.Schema{Kinds: []protocol.KindSchema{
		{ID: 1, Name: "hero", Parts: protocol.Transform, Fields: []protocol.Field{protocol.Uint("ammo", 8), protocol.Bytes("tag", 5)}},
		{ID: 2, Name: "rock", Parts: protocol.PartPosition},
		{ID: 3, Name: "board", Fields: []protocol.Field{protocol.Int("score", 12)}},
	}}})
}

// TestSchemaStore: a bad schema is refused at NewStore naming its kind and field; a kind it does
// not declare cannot spawn; fields reach the committed words only at Commit, and only a change
// stamps the entity; parts a kind lacks are not replicated.
func TestSchemaStore(t *testing.T) {
	_, err := NewStore(Config{Capacity: 8, Schema: &protocol.Schema{Kinds: []protocol.KindSchema{
		{ID: 1, Name: "hero", Fields: []protocol.Field{protocol.Uint("ammo", 0)}}}}})
	var se *protocol.SchemaError
	if !errors.As(err, &se) || se.Kind != "hero" || se.Field != "ammo" {
		t.Fatalf("a zero-width field: %v", err)
	}
	s := fieldStore(t)
	if _, err := s.Spawn(9, at(0, 0)); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("a spawn of an undeclared kind: %v", err)
	}
	hero, _ := s.Spawn(1, at(1, 1))
	rock, _ := s.Spawn(2, Transform{Pos: [3]float32{5, 6, 7}, Vel: [3]float32{1, 1, 1}, Rot: 99})
	board, _ := s.Spawn(3, at(50, 50))
	s.Commit()
	ammo, tag, score := s.MustField(1, "ammo"), s.MustField(1, "tag"), s.MustField(3, "score")
	if _, err := s.Field(1, "nope"); !errors.Is(err, ErrNoField) {
		t.Fatalf("an undeclared field: %v", err)
	}
	if st := s.States()[rock.Slot()]; st.Rot != 0 || st.Vel != [3]int16{} || st.Pos[2] != protocol.QuantizePos(7) {
		t.Fatalf("a position-only kind replicates %+v", st)
	}
	if m := s.Metas()[board.Slot()]; !m.Special || !s.Visibilities()[board.Slot()].Relevant() || len(s.AlwaysRelevant()) != 1 {
		t.Fatalf("a kind without a position is not always relevant: %+v, %v", m, s.AlwaysRelevant())
	}
	if hits := s.Query(50, 50, 10, nil); len(hits) != 0 {
		t.Fatalf("a kind without a position is in the grid: %v", hits)
	}
	s.Advance()
	if err := s.SetUint(hero, ammo, 200); err != nil {
		t.Fatal(err)
	}
	if err := s.SetBytes(hero, tag, []byte("abcde")); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{s.SetUint(hero, ammo, 256), s.SetUint(rock, ammo, 1), s.SetInt(board, score, 5000),
		s.SetUint(board, score, 1), s.SetUint(MakeID(7, 1), ammo, 1)} {
		if err == nil {
			t.Fatal("a bad field write was accepted")
		}
	}
	stride := s.Layout().Stride()
	if s.Fields()[int(hero.Slot())*stride] != 0 {
		t.Fatal("a field reached the committed words before Commit")
	}
	s.Commit()
	hf := s.Fields()[int(hero.Slot())*stride : int(hero.Slot()+1)*stride]
	if ammo.Layout().Uint(hf) != 200 || string(tag.Layout().Bytes(nil, hf)) != "abcde" || s.Metas()[hero.Slot()].Changed != s.Tick() {
		t.Fatalf("committed fields %v, changed at %d (tick %d)", hf, s.Metas()[hero.Slot()].Changed, s.Tick())
	}
	if got, ok := s.StateAt(hero.Slot(), s.Tick()); !ok || got == nil {
		t.Fatal("no history")
	}
	row := int(s.Tick()%uint32(s.HistoryTicks())) * s.Capacity() * stride
	if s.FieldHistory()[row+int(hero.Slot())*stride] != 200 {
		t.Fatal("the fields' history does not hold the tick's fields")
	}
	s.Advance()
	_ = s.SetUint(hero, ammo, 200) // the same value
	s.Commit()
	if s.Metas()[hero.Slot()].Changed == s.Tick() {
		t.Fatal("writing a field's value again stamped the entity changed")
	}
	if err := s.Despawn(board); err != nil || len(s.AlwaysRelevant()) != 0 {
		t.Fatalf("a despawned board is still always relevant: %v", s.AlwaysRelevant())
	}
}

// TestVisibilityStore: visibility is checked, makes the entity special, logs it for views to find,
// and the always-relevant list follows it.
func TestVisibilityStore(t *testing.T) {
	s := fieldStore(t)
	a, _ := s.Spawn(1, at(0, 0))
	s.Commit()
	s.Advance()
	if err := s.SetVisibility(a, Visibility{Scale: float32(math.NaN())}); !errors.Is(err, ErrBadVisibility) {
		t.Fatalf("a NaN scale: %v", err)
	}
	if err := s.SetVisibility(a, Visibility{Always: true, Groups: 2}); err != nil {
		t.Fatal(err)
	}
	if got, ok := s.SpawnedSince(s.Tick()); !ok || !slices.Contains(got, a.Slot()) {
		t.Fatal("a visibility change is not logged for the views")
	}
	v := s.Visibilities()[a.Slot()]
	if !s.Metas()[a.Slot()].Special || !v.Relevant() || v.Visible(0, 1) || !v.Visible(0, 2) || len(s.AlwaysRelevant()) != 1 {
		t.Fatalf("visibility %+v, always %v", v, s.AlwaysRelevant())
	}
	if err := s.SetVisibility(a, Visibility{}); err != nil || s.Metas()[a.Slot()].Special || len(s.AlwaysRelevant()) != 0 {
		t.Fatalf("back to the default: special %v, always %v", s.Metas()[a.Slot()].Special, s.AlwaysRelevant())
	}
	owned := Visibility{OwnerOnly: true, Owner: 3}
	if owned.Visible(2, ^uint64(0)) || !owned.Visible(3, 0) || (&Visibility{Hidden: true, Groups: 1}).Visible(0, 1) {
		t.Fatal("owner or hidden visibility is wrong")
	}
}
