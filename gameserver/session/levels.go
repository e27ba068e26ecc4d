package session

import "github.com/netfleet/netfleet/gameserver/snapshot"

// MaxLevel is the last detail level.
const MaxLevel = 4

// Detail levels. A session whose byte budget cannot carry what it has to send is moved to a
// higher level; each level sends less, and none drops state — every entity in interest still
// converges to its exact state, only later:
//
//	0  full detail
//	1  state updates (deltas) at half the rate; spawns and despawns still every frame
//	2  state updates at a quarter of the rate
//	3  as 2, interest radius cut to 75%: the far band leaves (entities in it are despawned)
//	4  as 2, interest radius cut to 50%
//
// The priority accumulator already sends far entities after near ones when the budget is short,
// so the longer update periods fall on the far bands first.
func levelConfig(full snapshot.Config, level int) snapshot.Config {
	c := full
	if level >= 1 {
		base := full.StateUpdateHz
		if base == 0 {
			base = full.TickRateHz
		}
		c.StateUpdateHz = max(1, base>>min(level, 2))
	}
	switch {
	case level >= 4:
		c.InterestRadius = full.InterestRadius / 2
	case level == 3:
		c.InterestRadius = full.InterestRadius * 3 / 4
	}
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
