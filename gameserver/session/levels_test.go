package session

import (
	"testing"

	"github.com/netfleet/netfleet/gameserver/snapshot"
)

// TestLevelConfig: each detail level sends no more than the one before — far band first, then
// everything, with a smaller enter budget, the radius last — and every level's config is valid.
func TestLevelConfig(t *testing.T) {
	full := snapshot.Config{MaxPacketBytes: 1200, TickRateHz: 60, InterestRadius: 200}
	want := []struct {
		state, far, divisor int
		radius, farRadius   float32
	}{
		{60, 0, 0, 200, 0},
		{60, 30, 2, 200, 100},
		{30, 15, 4, 200, 100},
		{15, 7, 4, 200, 100},
		{15, 7, 4, 150, 75},
		{15, 7, 4, 100, 50},
	}
	if len(want) != MaxLevel+1 {
		t.Fatalf("%d levels in the table, MaxLevel %d", len(want), MaxLevel)
	}
	for level, w := range want {
		c := levelConfig(full, level)
		if err := c.Validate(); err != nil {
			t.Errorf("level %d: %v", level, err)
		}
		if level == 0 {
			if c != full {
				t.Errorf("level 0 is not the full config: %+v", c)
			}
			continue
		}
		if c.StateUpdateHz != w.state || c.FarUpdateHz != w.far || c.EnterBudgetDivisor != w.divisor ||
			c.InterestRadius != w.radius || c.FarRadius != w.farRadius {
			t.Errorf("level %d: %+v, want %+v", level, c, w)
		}
	}
	// A declared state rate is the base the levels divide.
	full.StateUpdateHz = 20
	if c := levelConfig(full, 3); c.StateUpdateHz != 5 || c.FarUpdateHz != 2 || c.Validate() != nil {
		t.Errorf("level 3 of a 20 Hz config: %+v", c)
	}
}
