package session

import "github.com/netfleet/netfleet/gameserver/snapshot"

// MaxLevel is the last detail level.
const MaxLevel = 5

// Detail levels. A session whose byte budget cannot carry what it has to send is moved to a
// higher level; each level sends less, and none drops state — every entity in interest still
// converges to its exact state, only later. The far band is the outer part of the interest area,
// beyond half its radius (three quarters of its area):
//
//	0  full detail
//	1  far band state updates at half the rate; spawns take at most half a frame
//	2  state updates at half the rate, the far band's at a quarter; spawns at most a quarter
//	3  state updates at a quarter of the rate, the far band's at an eighth
//	4  as 3, interest radius cut to 75%: the outer ring leaves (its entities are despawned)
//	5  as 3, interest radius cut to 50%
//
// Spawns and despawns go out every frame at every level, within the enter budget: entities
// entering the view cannot crowd the updates of those already in it out of a short budget, and
// one left out goes in the next frame.
func levelConfig(full snapshot.Config, level int) snapshot.Config {
	c := full
	if level == 0 {
		return c
	}
	base := full.StateRateHz()
	state := min(level-1, 2) // halvings of the state update rate
	c.StateUpdateHz = max(1, base>>state)
	c.FarUpdateHz = max(1, base>>(state+1))
	c.EnterBudgetDivisor = 2 << min(level-1, 1)
	switch {
	case level >= 5:
		c.InterestRadius = full.InterestRadius / 2
	case level == 4:
		c.InterestRadius = full.InterestRadius * 3 / 4
	}
	c.FarRadius = c.InterestRadius / 2
	return c
}

// levelWindowTicks is the length of one budget-level window: half a second.
func levelWindowTicks(tickRateHz int) uint64 { return uint64(max(tickRateHz/2, 1)) }

// budgetLevel moves a session's level from how well its frames fit their budget. A frame is
// starved when entities with something to send were left out of it. Over a window of half a
// second, more than half the frames starved raises the level; two windows in a row with no
// starved frame lower it (the hysteresis keeps a session from flapping).
type budgetLevel struct {
	level   int
	frames  int
	starved int
	calm    int
	end     uint64 // tick the window ends
}

func (b *budgetLevel) reset(tick uint64, window uint64) { *b = budgetLevel{end: tick + window} }

// frame records one built frame.
func (b *budgetLevel) frame(starved bool) {
	b.frames++
	if starved {
		b.starved++
	}
}

// roll closes the window if it ended by tick and reports whether the level changed.
func (b *budgetLevel) roll(tick uint64, window uint64) bool {
	if tick < b.end {
		return false
	}
	before := b.level
	switch {
	case b.frames > 0 && 2*b.starved > b.frames:
		b.level = min(b.level+1, MaxLevel)
		b.calm = 0
	case b.starved == 0:
		b.calm++
		if b.calm >= 2 && b.level > 0 {
			b.level--
			b.calm = 0
		}
	default:
		b.calm = 0
	}
	b.frames, b.starved = 0, 0
	b.end = tick + window
	return b.level != before
}
