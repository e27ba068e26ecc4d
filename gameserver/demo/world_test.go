package demo

import (
	"errors"
	"slices"
	"testing"

	"github.com/netfleet/netfleet/gameserver/entity"
	"github.com/netfleet/netfleet/gameserver/protocol"
)

func mustNew(t testing.TB, cfg Config) *World {
	t.Helper()
	w, err := NewWorld(cfg)
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
		if _, err := NewWorld(tt.cfg); err == nil {
			t.Errorf("%s: NewWorld accepted %+v", tt.name, tt.cfg)
		}
	}
	w := mustNew(t, Config{Capacity: 10})
	if c := w.Config(); c.HalfExtent != 2000 || c.WanderRadius != 200 {
		t.Fatalf("defaults not applied: %+v", c)
	}
	if c := w.Store().Config(); c.CellSize != 128 || c.HistoryTicks != 64 {
		t.Fatalf("store defaults not applied: %+v", c)
	}
}

func snapshotStates(w *World) []protocol.State {
	st := w.Store()
	out := make([]protocol.State, 0, st.Capacity())
	for s, m := range st.Metas() {
		if m.Alive {
			out = append(out, st.States()[s])
		}
	}
	return out
}

// Per-slot readers of the world's store.
func alive(w *World, s int) bool           { return w.Store().Metas()[s].Alive }
func changed(w *World, s int) uint32       { return w.Store().Metas()[s].Changed }
func gen(w *World, s int) uint16           { return w.Store().Metas()[s].Gen }
func state(w *World, s int) protocol.State { return w.Store().States()[s] }

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
		for s := range w.Store().Capacity() {
			if !alive(w, s) {
				continue
			}
			p := state(w, s).Pos
			if p[0] < -h || p[0] > h || p[1] < -h || p[1] > h {
				t.Fatalf("slot %d left the world: %v", s, p)
			}
		}
	}
	moved := 0
	for s := range w.Store().Capacity() {
		if alive(w, s) && changed(w, s) == w.Store().Tick() {
			moved++
		}
	}
	if moved != w.Count() {
		t.Fatalf("%d of %d restless entities changed this tick", moved, w.Count())
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
		for _, b := range w.Store().Bumps() {
			if !w.Store().Valid(entity.MakeID(b.Slot, b.Gen)) || b.Amount != ArrivalBump {
				t.Fatalf("bad bump %+v", b)
			}
			bumps++
		}
	}
	resting := 0
	for s := range w.Store().Capacity() {
		if alive(w, s) && changed(w, s) < w.Store().Tick() {
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
	for s := range w.Store().Capacity() {
		if changed(w, s) == w.Store().Tick() {
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
	gens := make([]uint16, w.Store().Capacity())
	for s := range gens {
		gens[s] = gen(w, s)
	}
	for range 120 {
		w.Step(1.0 / 60)
		if w.Count() != cfg.Population+1 {
			t.Fatalf("count %d, want %d", w.Count(), cfg.Population+1)
		}
	}
	reused := 0
	for s := range gens {
		if gen(w, s) > gens[s] {
			reused++
		}
	}
	if reused == 0 || !w.Store().Valid(a) {
		t.Fatalf("%d slots reused, avatar valid %v; want churn and an immortal avatar", reused, w.Store().Valid(a))
	}
}

func TestIDsAndAvatars(t *testing.T) {
	w := mustNew(t, Config{Capacity: 3, Population: 1, HalfExtent: 100})
	a, err := w.AddAvatar()
	if err != nil {
		t.Fatal(err)
	}
	if a == 0 || !w.Store().Valid(a) || w.Store().Kinds()[a.Slot()] != KindAvatar {
		t.Fatalf("avatar %#x not valid", a)
	}
	b, err := w.AddAvatar()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.AddAvatar(); !errors.Is(err, ErrFull) {
		t.Fatalf("AddAvatar on a full world: %v", err)
	}
	if !w.Remove(a) || w.Remove(a) || w.Store().Valid(a) {
		t.Fatal("Remove of a live avatar, then of a removed one, misbehaved")
	}
	if _, _, _, ok := w.Position(a); ok {
		t.Fatal("Position of a removed entity")
	}
	if w.SetTarget(a, 0, 0) {
		t.Fatal("stale id accepted")
	}
	c, err := w.AddAvatar()
	if err != nil {
		t.Fatal(err)
	}
	if c.Slot() != a.Slot() || c == a {
		t.Fatalf("reused slot: new id %#x, old %#x; want same slot, new generation", c, a)
	}
	if !w.Store().Valid(b) || w.Count() != 3 {
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
	if state(w, int(a.Slot())).Vel != [3]int16{} {
		t.Fatal("resting avatar has a velocity")
	}
}

func TestSimulateAllocatesNothing(t *testing.T) {
	cfg := restless(7)
	cfg.RestMinSec, cfg.RestMaxSec, cfg.LifetimeMeanSec = 0.1, 0.5, 1
	w := mustNew(t, cfg)
	for range 120 {
		w.Step(1.0 / 60)
	}
	if allocs := testing.AllocsPerRun(100, func() { w.Step(1.0 / 60) }); allocs != 0 {
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
