package entity

import "slices"

// maxLog bounds the spawn log, in entries per slot of capacity: a store that spawns more within
// its history forgets the oldest, and SpawnedSince reports the ticks it no longer covers.
const maxLog = 2

// spawnLog holds the slots spawned, oldest first, and the tick each spawned at. It holds every
// spawn at tick from or later, and nothing older than the history.
type spawnLog struct {
	slots []uint16
	ticks []uint32
	from  uint32
}

func newSpawnLog(capacity int) spawnLog {
	return spawnLog{slots: make([]uint16, 0, maxLog*capacity), ticks: make([]uint32, 0, maxLog*capacity)}
}

// add logs slot, spawned at tick. A full log drops its older half, and the rest of the spawns of
// the tick it stopped in, so that it still holds every spawn from l.from on.
func (l *spawnLog) add(slot uint16, tick uint32, capacity int) {
	if n := len(l.slots); n >= maxLog*capacity {
		l.from = l.ticks[n/2-1] + 1
		l.drop()
	}
	l.slots = append(l.slots, slot)
	l.ticks = append(l.ticks, tick)
}

// trim drops the spawns older than the history at tick.
func (l *spawnLog) trim(tick, history uint32) {
	if tick > history {
		l.from = max(l.from, tick-history+1)
	}
	l.drop()
}

// drop drops the spawns before l.from.
func (l *spawnLog) drop() {
	k := 0
	for k < len(l.ticks) && l.ticks[k] < l.from {
		k++
	}
	if k > 0 {
		l.slots = l.slots[:copy(l.slots, l.slots[k:])]
		l.ticks = l.ticks[:copy(l.ticks, l.ticks[k:])]
	}
}

// since lists the slots spawned at tick or later, if the log covers tick.
func (l *spawnLog) since(tick, now, history uint32) ([]uint16, bool) {
	if tick < l.from || now-tick >= history {
		return nil, false
	}
	i, _ := slices.BinarySearch(l.ticks, tick)
	return l.slots[i:], true
}
