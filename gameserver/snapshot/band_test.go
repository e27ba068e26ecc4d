package snapshot

import (
	"testing"

	"github.com/netfleet/netfleet/gameserver/protocol"
)

// TestFarBandUpdateRate: entities beyond FarRadius get state updates at FarUpdateHz, those
// within it at StateUpdateHz; both converge.
func TestFarBandUpdateRate(t *testing.T) {
	cfg := testConfig()
	cfg.FarRadius, cfg.FarUpdateHz = 75, 15 // far band updated every 4th tick at 60 Hz
	wcfg := busyWorld(21)
	wcfg.RestMinSec, wcfg.RestMaxSec, wcfg.LifetimeMeanSec = 0, 0, 0 // everything moves, nothing dies
	h := newHarness(t, wcfg, cfg)
	l := h.addLink(0, 0, 1)
	for range 30 {
		h.tick(dt)
	}
	var snap protocol.Snapshot
	nearTicks, farTicks := 0, []uint32{}
	for range 60 {
		h.tick(dt)
		fx, fy, _ := h.focusOf(l.sess)
		near, far := false, false
		for i := range l.frame.Packets() {
			if err := protocol.DecodeSnapshot(l.frame.Packet(i), &snap); err != nil {
				t.Fatal(err)
			}
			for _, rec := range snap.Records {
				if rec.Op != protocol.OpDelta {
					continue
				}
				m := h.st.Metas()[rec.ID]
				x, y := m.X, m.Y
				d2 := (x-fx)*(x-fx) + (y-fy)*(y-fy)
				switch {
				case d2 < 74*74:
					near = true
				case d2 > 76*76:
					far = true
				}
			}
		}
		if near {
			nearTicks++
		}
		if far {
			farTicks = append(farTicks, h.st.Tick())
		}
	}
	if nearTicks != 60 {
		t.Errorf("near entities updated on %d of 60 ticks, want every tick", nearTicks)
	}
	if len(farTicks) != 15 {
		t.Errorf("far band updated on %d of 60 ticks (%v), want 15", len(farTicks), farTicks)
	}
	for i := 1; i < len(farTicks); i++ {
		if farTicks[i]-farTicks[i-1] != 4 {
			t.Fatalf("far band updates at ticks %v, want every 4th", farTicks)
		}
	}
	for range 300 {
		h.tick(0)
	}
	if d := h.diff(l); len(d) > 0 {
		t.Fatalf("did not converge: %d problems, first %q", len(d), d[0])
	}
}

// TestEnterBudget: with EnterBudgetDivisor, a frame carries at most its share of spawns, the
// entities already known keep their updates while spawns wait, and every spawn arrives.
func TestEnterBudget(t *testing.T) {
	cfg := testConfig()
	cfg.EnterBudgetDivisor = 4
	const budget = 1200
	maxSpawns := budget / 4 / ((protocol.MaxTransformSpawnBits + 7) / 8)
	wcfg := busyWorld(22)
	wcfg.RestMinSec, wcfg.RestMaxSec, wcfg.LifetimeMeanSec = 0, 0, 0
	h := newHarness(t, wcfg, cfg)
	l := h.addLink(budget, 0, 1)
	h.tick(dt)
	r := l.last
	if r.Spawns != maxSpawns || r.Deferred != r.Candidates-maxSpawns || r.Deferred == 0 || l.sess.Stats().SpawnsDeferred != uint64(r.Deferred) {
		t.Fatalf("first frame: %+v; want %d spawns, the rest deferred", r, maxSpawns)
	}
	mixed := 0
	for tick := 0; l.last.Deferred > 0; tick++ {
		if tick == 60 {
			t.Fatalf("spawns still deferred after a second: %+v", l.last)
		}
		h.tick(dt)
		if l.last.Spawns > maxSpawns {
			t.Fatalf("a frame carried %d spawns, the enter budget allows %d", l.last.Spawns, maxSpawns)
		}
		if l.last.Deferred > 0 && l.last.Deltas > 0 {
			mixed++
		}
	}
	if mixed == 0 {
		t.Error("no frame carried updates of known entities while spawns waited")
	}
	for range 300 {
		h.tick(0)
	}
	if d := h.diff(l); len(d) > 0 {
		t.Fatalf("did not converge: %d problems, first %q", len(d), d[0])
	}
}

func TestBandConfigValidation(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Config)
	}{
		{"far radius beyond interest", func(c *Config) { c.FarRadius = 200 }},
		{"negative far radius", func(c *Config) { c.FarRadius = -1 }},
		{"far rate above state rate", func(c *Config) { c.StateUpdateHz, c.FarUpdateHz = 20, 30 }},
		{"negative far rate", func(c *Config) { c.FarUpdateHz = -1 }},
		{"enter divisor too large", func(c *Config) { c.EnterBudgetDivisor = maxEnterBudgetDivisor + 1 }},
	} {
		cfg := testConfig()
		c.edit(&cfg)
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted %+v", c.name, cfg)
		}
	}
}
