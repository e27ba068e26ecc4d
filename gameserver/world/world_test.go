package world

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/netfleet/netfleet/gameserver/protocol"
)

func mustNew(t testing.TB, cfg Config) *World {
	t.Helper()
	w, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func restless(seed uint64) Config {
	return Config{Seed: seed, Capacity: 600, Population: 500, HalfExtent: 500, CellSize: 50}
}

func TestConfigValidation(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no capacity", Config{}},
		{"capacity over id space", Config{Capacity: protocol.MaxEntities + 1}},
		{"population over capacity", Config{Capacity: 10, Population: 11}},
		{"extent over wire range", Config{Capacity: 10, HalfExtent: protocol.WorldHalfExtent}},
		{"history not a power of two", Config{Capacity: 10, HistoryTicks: 48}},
		{"rest bounds", Config{Capacity: 10, RestMinSec: 2, RestMaxSec: 1}},
		{"negative lifetime", Config{Capacity: 10, LifetimeMeanSec: -1}},
		{"tiny cell", Config{Capacity: 10, CellSize: 0.5}},
	}
	for _, tt := range tests {
		if _, err := New(tt.cfg); err == nil {
			t.Errorf("%s: New accepted %+v", tt.name, tt.cfg)
		}
	}
	w := mustNew(t, Config{Capacity: 10})
	if c := w.Config(); c.HalfExtent != 2000 || c.CellSize != 128 || c.HistoryTicks != 64 || c.WanderRadius != 200 {
		t.Fatalf("defaults not applied: %+v", c)
	}
}

func snapshotStates(w *World) []protocol.State {
	out := make([]protocol.State, 0, w.Capacity())
	for s := range w.Capacity() {
		if w.Alive(uint16(s)) {
			out = append(out, *w.State(uint16(s)))
		}
	}
	return out
}

func TestDeterministic(t *testing.T) {
	cfg := Config{Seed: 42, Capacity: 300, Population: 250, HalfExtent: 300, RestMinSec: 0.1, RestMaxSec: 1, LifetimeMeanSec: 2}
	a, b := mustNew(t, cfg), mustNew(t, cfg)
	cfg.Seed = 43
	c := mustNew(t, cfg)
	for range 300 {
		a.Step(1.0 / 60)
		b.Step(1.0 / 60)
		c.Step(1.0 / 60)
	}
	if !slices.Equal(snapshotStates(a), snapshotStates(b)) {
		t.Fatal("two worlds with the same seed diverged")
	}
	if slices.Equal(snapshotStates(a), snapshotStates(c)) {
		t.Fatal("worlds with different seeds are identical")
	}
}

func TestMovementStaysInBoundsAndChanges(t *testing.T) {
	w := mustNew(t, restless(1))
	h := protocol.QuantizePos(w.Config().HalfExtent)
	for range 600 {
		w.Step(1.0 / 60)
		for s := range w.Capacity() {
			if !w.Alive(uint16(s)) {
				continue
			}
			p := w.State(uint16(s)).Pos
			if p[0] < -h || p[0] > h || p[1] < -h || p[1] > h {
				t.Fatalf("slot %d left the world: %v", s, p)
			}
		}
	}
	moved := 0
	for s := range w.Capacity() {
		if w.Alive(uint16(s)) && w.Changed(uint16(s)) == w.Tick() {
			moved++
		}
	}
	if moved != w.Count() {
		t.Fatalf("%d of %d restless entities changed this tick", moved, w.Count())
	}
}

// TestMetaMatchesAccessors: Meta and Metas agree with the single-value accessors for every
// slot, live or not, after spawns, despawns, avatars added between ticks and removals.
func TestMetaMatchesAccessors(t *testing.T) {
	cfg := restless(3)
	cfg.LifetimeMeanSec = 1
	w := mustNew(t, cfg)
	for tick := range 120 {
		w.Step(1.0 / 60)
		switch tick % 30 {
		case 10:
			if _, err := w.AddAvatar(); err != nil {
				t.Fatal(err)
			}
		case 20:
			w.Remove(makeID(uint16(tick), w.Gen(uint16(tick))))
		}
		metas := w.Metas()
		for s := range w.Capacity() {
			slot := uint16(s)
			m := w.Meta(slot)
			x, y := w.XY(slot)
			if m != metas[s] || m.X != x || m.Y != y || m.Alive != w.Alive(slot) || m.Gen != w.Gen(slot) || m.Changed != w.Changed(slot) {
				t.Fatalf("tick %d slot %d: Meta %+v, Metas %+v; XY (%v, %v), Alive %v, Gen %d, Changed %d",
					w.Tick(), s, m, metas[s], x, y, w.Alive(slot), w.Gen(slot), w.Changed(slot))
			}
		}
	}
}

func TestRestingEntitiesStayUnchangedAndBump(t *testing.T) {
	cfg := restless(2)
	cfg.RestMinSec, cfg.RestMaxSec = 2, 4
	cfg.WanderRadius = 5
	w := mustNew(t, cfg)
	bumps := 0
	for range 300 {
		w.Step(1.0 / 60)
		for _, b := range w.Bumps() {
			if !w.Valid(makeID(b.Slot, b.Gen)) || b.Amount != ArrivalBump {
				t.Fatalf("bad bump %+v", b)
			}
			bumps++
		}
	}
	resting := 0
	for s := range w.Capacity() {
		if w.Alive(uint16(s)) && w.Changed(uint16(s)) < w.Tick() {
			resting++
		}
	}
	if resting == 0 || bumps == 0 {
		t.Fatalf("%d resting entities, %d arrival bumps; want some of each", resting, bumps)
	}
}

func TestQuietStepChangesNothing(t *testing.T) {
	cfg := restless(3)
	cfg.LifetimeMeanSec = 0.5
	w := mustNew(t, cfg)
	for range 30 {
		w.Step(1.0 / 60)
	}
	before := snapshotStates(w)
	w.Step(0)
	if !slices.Equal(before, snapshotStates(w)) {
		t.Fatal("Step(0) changed the world")
	}
	for s := range w.Capacity() {
		if w.Changed(uint16(s)) == w.Tick() {
			t.Fatalf("slot %d stamped changed by a quiet tick", s)
		}
	}
}

func TestLifetimeChurnKeepsPopulation(t *testing.T) {
	cfg := restless(4)
	cfg.LifetimeMeanSec = 0.5
	w := mustNew(t, cfg)
	a, err := w.AddAvatar()
	if err != nil {
		t.Fatal(err)
	}
	gens := make([]uint16, w.Capacity())
	for s := range gens {
		gens[s] = w.Gen(uint16(s))
	}
	for range 120 {
		w.Step(1.0 / 60)
		if w.Count() != cfg.Population+1 {
			t.Fatalf("count %d, want %d", w.Count(), cfg.Population+1)
		}
	}
	reused := 0
	for s := range gens {
		if w.Gen(uint16(s)) > gens[s] {
			reused++
		}
	}
	if reused == 0 || !w.Valid(a) {
		t.Fatalf("%d slots reused, avatar valid %v; want churn and an immortal avatar", reused, w.Valid(a))
	}
}

// TestReachAndSpawned: Reach bounds the motion of every entity between any two ticks, through
// rests, steering and varying steps; and every entity that spawns (in a Step or between Steps)
// is listed by SpawnedSince the tick a viewer last looked, whether it looks every tick or every
// few dozen.
func TestReachAndSpawned(t *testing.T) {
	for k := range 256 { // every Kind
		if v := Kind(k).speed(); v > maxSpeed {
			t.Fatalf("kind %d speed %v over maxSpeed %v", k, v, maxSpeed)
		}
	}
	cfg := Config{Seed: 7, Capacity: 700, Population: 500, HalfExtent: 300, CellSize: 50,
		RestMinSec: 0, RestMaxSec: 0.5, LifetimeMeanSec: 2}
	w := mustNew(t, cfg)
	type seen struct {
		gen   uint16
		x, y  float32
		reach float64
	}
	first := make([]seen, w.Capacity()) // where each incarnation was first seen
	// Viewers that look every lag ticks, the longest within the history.
	viewers := []*spawnViewer{newSpawnViewer(w, 1), newSpawnViewer(w, 3), newSpawnViewer(w, 17), newSpawnViewer(w, 63)}
	var avatars []ID
	for tick := range 600 {
		if tick%50 == 10 { // spawned between Steps
			id, err := w.AddAvatar()
			if err != nil {
				t.Fatal(err)
			}
			avatars = append(avatars, id)
		}
		for i, a := range avatars {
			if tick%(7+i) == 0 {
				w.SetTarget(a, float32(i*37%300), float32(-i*53%300))
			}
		}
		dt := []float32{1.0 / 60, 0, 1.0 / 30, 0.1}[tick%4]
		w.Step(dt)
		for _, v := range viewers {
			if tick%v.lag == 0 && !v.look(t, w) {
				t.Fatalf("tick %d: SpawnedSince does not cover tick %d, %d ticks ago", w.Tick(), v.looked, w.Tick()-v.looked)
			}
		}
		for s, m := range w.Metas() {
			if !m.Alive {
				continue
			}
			f := &first[s]
			if f.gen != m.Gen {
				*f = seen{gen: m.Gen, x: m.X, y: m.Y, reach: w.Reach()}
				continue
			}
			moved := math.Hypot(float64(m.X-f.x), float64(m.Y-f.y))
			if bound := w.Reach() - f.reach; moved > bound+1e-3 {
				t.Fatalf("tick %d: slot %d moved %.3f m, Reach bounds %.3f", w.Tick(), s, moved, bound)
			}
		}
	}
}

// spawnViewer looks at a world every lag ticks and asks SpawnedSince for the spawns since it last
// looked; every incarnation it did not see before must be among them.
type spawnViewer struct {
	lag    int
	looked uint32
	gens   []uint16 // each slot's generation when last looked at, 0: not alive then
}

func newSpawnViewer(w *World, lag int) *spawnViewer {
	v := &spawnViewer{lag: lag, looked: w.Tick(), gens: make([]uint16, w.Capacity())}
	for s, m := range w.Metas() {
		if m.Alive {
			v.gens[s] = m.Gen
		}
	}
	return v
}

// look reports false if SpawnedSince does not cover the tick it last looked at, and fails t if
// it leaves out a new incarnation.
func (v *spawnViewer) look(t *testing.T, w *World) bool {
	t.Helper()
	spawned, ok := w.SpawnedSince(v.looked)
	if !ok {
		return false
	}
	listed := map[uint16]bool{}
	for _, s := range spawned {
		listed[s] = true
	}
	for s, m := range w.Metas() {
		if m.Alive && m.Gen != v.gens[s] && !listed[uint16(s)] {
			t.Fatalf("tick %d: slot %d incarnation %d spawned since tick %d, not in SpawnedSince", w.Tick(), s, m.Gen, v.looked)
		}
		if v.gens[s] = 0; m.Alive {
			v.gens[s] = m.Gen
		}
	}
	v.looked = w.Tick()
	return true
}

// TestSpawnedSinceBounds: SpawnedSince covers the last HistoryTicks ticks and no more, spawns
// between Steps included; a world spawning more than twice its capacity within them keeps the
// newest spawns, and still covers the last tick.
func TestSpawnedSinceBounds(t *testing.T) {
	w := mustNew(t, Config{Seed: 3, Capacity: 40, Population: 10, HalfExtent: 100, HistoryTicks: 8, LifetimeMeanSec: 1e6})
	for range 20 {
		w.Step(1.0 / 60)
	}
	id, err := w.AddAvatar() // between Steps: at the current tick
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := w.SpawnedSince(w.Tick()); !ok || !slices.Contains(got, id.Slot()) {
		t.Fatalf("SpawnedSince(now) = %v, %v: the avatar spawned now is not listed", got, ok)
	}
	for range 7 {
		w.Step(1.0 / 60)
	}
	if got, ok := w.SpawnedSince(w.Tick() - 7); !ok || !slices.Contains(got, id.Slot()) {
		t.Fatalf("SpawnedSince(7 ticks ago) = %v, %v: the avatar spawned then is not listed", got, ok)
	}
	if _, ok := w.SpawnedSince(w.Tick() - 8); ok {
		t.Fatal("SpawnedSince covers a tick beyond the history")
	}
	if _, ok := w.SpawnedSince(w.Tick() + 1); ok {
		t.Fatal("SpawnedSince covers a tick to come")
	}

	// Every entity dies and is replaced every Step: 40 spawns a tick, so the log's 80 entries
	// hold two ticks of them.
	w = mustNew(t, Config{Seed: 3, Capacity: 40, Population: 40, HalfExtent: 100, HistoryTicks: 8, LifetimeMeanSec: 1e-6})
	v := newSpawnViewer(w, 1)
	for tick := range 30 {
		w.Step(1.0 / 60)
		if !v.look(t, w) {
			t.Fatalf("tick %d: SpawnedSince does not cover the tick before", w.Tick())
		}
		if _, ok := w.SpawnedSince(w.Tick() - 3); ok && tick > 3 {
			t.Fatalf("tick %d: SpawnedSince covers 3 ticks of 40 spawns each in 80 entries", w.Tick())
		}
		if len(w.born) > 2*w.Capacity() {
			t.Fatalf("the spawn log holds %d entries, over twice the capacity", len(w.born))
		}
	}
}

func TestIDsAndAvatars(t *testing.T) {
	w := mustNew(t, Config{Capacity: 3, Population: 1, HalfExtent: 100})
	a, err := w.AddAvatar()
	if err != nil {
		t.Fatal(err)
	}
	if a == 0 || !w.Valid(a) || w.KindOf(a.Slot()) != KindAvatar {
		t.Fatalf("avatar %#x not valid", a)
	}
	b, err := w.AddAvatar()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddAvatar(); !errors.Is(err, ErrFull) {
		t.Fatalf("AddAvatar on a full world: %v", err)
	}
	if !w.Remove(a) || w.Remove(a) || w.Valid(a) {
		t.Fatal("Remove of a live avatar, then of a removed one, misbehaved")
	}
	if _, _, _, ok := w.Position(a); ok {
		t.Fatal("Position of a removed entity")
	}
	if w.SetTarget(a, 0, 0) || w.Bump(a, 1) {
		t.Fatal("stale id accepted")
	}
	before := len(w.Bumps())
	for _, amount := range []float32{0, -1, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		if w.Bump(b, amount) {
			t.Errorf("Bump by %v accepted", amount)
		}
	}
	if !w.Bump(b, 2.5) || len(w.Bumps()) != before+1 || w.Bumps()[before].Amount != 2.5 {
		t.Fatalf("Bump by 2.5: bumps %+v", w.Bumps()[before:])
	}
	c, err := w.AddAvatar()
	if err != nil {
		t.Fatal(err)
	}
	if c.Slot() != a.Slot() || c == a {
		t.Fatalf("reused slot: new id %#x, old %#x; want same slot, new generation", c, a)
	}
	if !w.Valid(b) || w.Count() != 3 {
		t.Fatalf("count %d", w.Count())
	}
}

func TestSetTarget(t *testing.T) {
	w := mustNew(t, Config{Capacity: 2, HalfExtent: 100, RestMinSec: 60, RestMaxSec: 60})
	a, err := w.AddAvatar()
	if err != nil {
		t.Fatal(err)
	}
	if !w.SetTarget(a, 50, -50) {
		t.Fatal("SetTarget refused a live avatar")
	}
	for range 60 * 60 {
		w.Step(1.0 / 60)
	}
	x, y, _, ok := w.Position(a)
	if !ok || x != 50 || y != -50 {
		t.Fatalf("avatar at (%v, %v), want (50, -50)", x, y)
	}
	if w.State(a.Slot()).Vel != [3]int16{} {
		t.Fatal("resting avatar has a velocity")
	}
}

func TestStateAt(t *testing.T) {
	cfg := restless(5)
	cfg.HistoryTicks = 8
	w := mustNew(t, cfg)
	var past []protocol.State
	for range 20 {
		w.Step(1.0 / 60)
		past = append(past, *w.State(0))
	}
	for i, want := range past {
		tick := w.Tick() - uint32(len(past)-1-i)
		got, ok := w.StateAt(0, tick)
		if inWindow := w.Tick()-tick < 8; ok != inWindow {
			t.Fatalf("StateAt(tick %d) ok=%v at tick %d", tick, ok, w.Tick())
		}
		if ok && *got != want {
			t.Fatalf("StateAt(tick %d) = %+v, want %+v", tick, *got, want)
		}
	}
	if _, ok := w.StateAt(0, w.Tick()+1); ok {
		t.Fatal("StateAt returned a future tick")
	}
	id, err := w.AddAvatar()
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := w.StateAt(id.Slot(), w.Tick()); !ok || *got != *w.State(id.Slot()) {
		t.Fatal("an entity spawned between ticks has no history at the current tick")
	}
}

func TestQueryMatchesBruteForce(t *testing.T) {
	w := mustNew(t, restless(6))
	for range 10 {
		w.Step(1.0 / 60)
	}
	r := rng{s: 99}
	var hits []Hit
	for round := range 2000 {
		x, y := (2*r.float()-1)*600, (2*r.float()-1)*600
		radius := r.float() * 400
		if round%2 == 1 {
			// An entity exactly on the circle, which only rounding keeps in or out.
			s := int(r.next() % uint64(w.Capacity()))
			for !w.Alive(uint16(s)) {
				s = (s + 1) % w.Capacity()
			}
			p := w.pos[s]
			radius = float32(math.Sqrt(float64((p[0]-x)*(p[0]-x) + (p[1]-y)*(p[1]-y))))
		}
		hits = w.Query(x, y, radius, hits[:0])
		got := map[uint16]float32{}
		for _, h := range hits {
			got[h.Slot] = h.Dist2
		}
		if len(got) != len(hits) {
			t.Fatal("query returned a slot twice")
		}
		for s := range w.Capacity() {
			if !w.Alive(uint16(s)) {
				continue
			}
			p := w.pos[s]
			d2 := (p[0]-x)*(p[0]-x) + (p[1]-y)*(p[1]-y)
			d, in := got[uint16(s)]
			if in != (d2 <= radius*radius) || (in && math.Abs(float64(d-d2)) > 1e-3) {
				t.Fatalf("slot %d at distance² %v from (%v, %v), radius %v: returned %v (%v)", s, d2, x, y, radius, in, d)
			}
		}
	}
}

// TestQueryNew: QueryNew returns Query's hits, in order, but those of known slots.
func TestQueryNew(t *testing.T) {
	w := mustNew(t, restless(8))
	for range 10 {
		w.Step(1.0 / 60)
	}
	r := rng{s: 77}
	known := make([]uint8, (w.Capacity()+7)/8)
	var hits, fresh []Hit
	for round := range 200 {
		for i := range known {
			known[i] = uint8(r.next())
			if round%4 == 0 {
				known[i] = 0
			}
		}
		x, y := (2*r.float()-1)*600, (2*r.float()-1)*600
		radius := r.float() * 400
		hits = w.Query(x, y, radius, hits[:0])
		fresh = w.QueryNew(x, y, radius, known, fresh[:0])
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

func TestStepAndQueryAllocateNothing(t *testing.T) {
	cfg := restless(7)
	cfg.RestMinSec, cfg.RestMaxSec, cfg.LifetimeMeanSec = 0.1, 0.5, 1
	w := mustNew(t, cfg)
	hits := make([]Hit, 0, w.Capacity())
	fresh := make([]Hit, 0, w.Capacity())
	known := make([]uint8, (w.Capacity()+7)/8)
	for range 120 {
		w.Step(1.0 / 60)
	}
	allocs := testing.AllocsPerRun(100, func() {
		w.Step(1.0 / 60)
		hits = w.Query(0, 0, 300, hits[:0])
		fresh = w.QueryNew(0, 0, 300, known, fresh[:0])
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per tick, want 0", allocs)
	}
}

func BenchmarkStep(b *testing.B) {
	w := mustNew(b, Config{Seed: 1, Capacity: 4096, Population: 4096, HalfExtent: 2047})
	b.ReportAllocs()
	for b.Loop() {
		w.Step(1.0 / 60)
	}
}
