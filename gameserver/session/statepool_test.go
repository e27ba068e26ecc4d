package session

import (
	"testing"

	"github.com/netfleet/netfleet/api/netcode"
	"github.com/netfleet/netfleet/gameserver/demo"
)

// An exhausted state pool degrades the farthest band of the largest session first, then the
// next; the state in use comes back under the budget and every client still converges within
// its radius. When the pressure goes, the sessions get their bands back.
func TestStatePolicyDegradesLargestFirst(t *testing.T) {
	// A dense centre and sparse edges: the session whose avatar sits in the centre tracks most.
	h := newHarness(t, demo.Config{Seed: 5, Capacity: 1200, Population: 1000, HalfExtent: 400}, netcode.NetcodeConfig{}, 200)
	for range 4 {
		h.addPeer()
	}
	pool, err := NewStatePool(h.w.Store(), h.shared, h.cfg.Snapshot, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	var policy StatePolicy
	h.afterTick = func() { policy.Step(h.tick, testTickRate, h.sessions(), pool) }
	h.run(120)
	full := policy.InUse()
	largest := h.peers[0]
	for _, p := range h.peers {
		if p.s.Stats().KnownEntities > largest.s.Stats().KnownEntities {
			largest = p
		}
	}
	// A budget short by a fifth of the largest session's entities: its far band covers that (it
	// leaves beyond the 10% exit margin of the 75% radius, 32% of the area).
	pool.Configure(full-int64(largest.s.Stats().KnownEntities)*StateBytesPerEntity/5, h.cfg.Snapshot)
	h.run(1)
	for _, p := range h.peers {
		if want := map[bool]int{true: 4, false: 0}[p == largest]; p.s.StatePressure() != want {
			t.Fatalf("after one tick over budget: pressure %d on a session tracking %d (largest %d)",
				p.s.StatePressure(), p.s.Stats().KnownEntities, largest.s.Stats().KnownEntities)
		}
	}
	h.run(1)
	if st := largest.s.Stats(); st.DetailLevel != 4 || st.InterestRadius != 150 {
		t.Fatalf("the largest session's far band stayed: %+v", st)
	}
	h.run(120)
	if in := policy.InUse(); in > pool.Budget() {
		t.Errorf("state in use %d over the budget %d after two seconds", in, pool.Budget())
	}
	degraded := 0
	for _, p := range h.peers {
		if p.s.StatePressure() > 0 {
			degraded++
		}
	}
	if degraded != 1 {
		t.Errorf("%d sessions degraded for a shortfall the largest one's far band covers", degraded)
	}
	h.converge(2000)

	pool.Configure(1<<30, h.cfg.Snapshot)
	h.dt = 1.0 / testTickRate
	h.run(10 * testTickRate)
	for i, p := range h.peers {
		if st := p.s.Stats(); st.DetailLevel != 0 || p.s.StatePressure() != 0 {
			t.Errorf("peer %d still degraded once the pressure went: %+v", i, st)
		}
	}
	h.converge(2000)
}

// The pool refuses a new session whose base does not fit, and keeps an ended session's state only
// within its budget.
func TestStatePoolBudget(t *testing.T) {
	h := newHarness(t, busyWorld(100), netcode.NetcodeConfig{}, 100)
	pool, err := NewStatePool(h.w.Store(), h.shared, h.cfg.Snapshot, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	base := int64(pool.BaseBytes())
	if pool.Get(pool.Budget()-base+1) != nil {
		t.Fatal("a session past the budget was handed out")
	}
	a := pool.Get(0)
	if a == nil || pool.Stats().Spares != 0 || pool.Stats().Refused != 1 {
		t.Fatalf("stats %+v", pool.Stats())
	}
	pool.Put(a, pool.Budget()) // no room left to keep it
	if pool.Stats().Spares != 0 {
		t.Fatal("a spare was kept past the budget")
	}
	pool.Put(pool.Get(0), 0)
	if pool.Stats().Spares != 1 {
		t.Fatal("a spare within the budget was not kept")
	}
}
