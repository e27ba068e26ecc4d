package snapshot

import (
	"sync/atomic"

	"github.com/netfleet/netfleet/gameserver/protocol"
)

// recordCache holds the delta records encoded during the current tick, shared by every view
// of a store. A delta record depends only on the entity, the tick and the baseline's tick, and
// views whose clients acknowledge at similar round trips hold the same baselines, so most of a
// tick's deltas are encoded once and appended to many packets.
//
// An entry holds a record of at most 128 bits: its first 64 bits in the entry, which is nearly
// every delta of a moving entity, and the rest, for a longer delta (a jump, a turn, a change of
// the entity's fields), in a second table of the same layout that only such records touch. A
// still longer one is encoded by every view that sends it. Entries are 16 bytes so that the table
// stays in the CPU's caches. Each slot has cacheWays entries, chosen by
// the baseline's age, so the records of any sixteen consecutive ages (clients whose round trips
// differ by up to 250 ms) are cached together. The table is laid out by age, then slot: the
// views of one age read a table of 16 bytes per slot, where one cache line per slot would
// bring in fifteen entries they do not use. An entry is filled at most once per tick, by
// the first view that needs it (later ones with another age that maps to the same entry
// encode their record themselves), so a filled entry never changes while views read it and
// views may be built concurrently: a filler claims the entry with a compare-and-swap of its
// key, writes the record, then publishes the key; a reader that loads the published key sees the
// record written before it. The store is written between ticks, while no view is being built.
type recordCache struct {
	entries []cacheEntry // (age%cacheWays)*slots + slot
	hi      []uint64     // bits 64 to 127 of the record of the entry at the same index
	slots   int
}

// cacheWays is the number of ages cached per slot, a power of two: 256 bytes per slot.
const cacheWays = 16

// A key is the tick in its high 32 bits, the age in bits 8 to 31 and the record's length in bits
// in the low 8. Age 0 marks an entry being filled; length 0 marks a state equal to its baseline.
type cacheEntry struct {
	key  atomic.Uint64
	bits uint64
}

const recordLenBits = 8

func newRecordCache(slots int) *recordCache {
	return &recordCache{entries: make([]cacheEntry, slots*cacheWays), hi: make([]uint64, slots*cacheWays), slots: slots}
}

// index is the index of the entry for slot's record against a baseline age ticks old.
func (c *recordCache) index(slot uint16, age uint32) int {
	return int(age&(cacheWays-1))*c.slots + int(slot)
}

// at is the entry for slot's record against a baseline age ticks old.
func (c *recordCache) at(slot uint16, age uint32) *cacheEntry { return &c.entries[c.index(slot, age)] }

// maxCachedBits is the longest record the cache holds.
const maxCachedBits = 128

func cacheKey(tick, age uint32) uint64 { return uint64(tick)<<32 | uint64(age)<<recordLenBits }

// fill stores rec, a record of at most 64 bits for tick and age, in e, unless e was filled this
// tick.
func (e *cacheEntry) fill(tick, age uint32, rec *protocol.RecordBits) {
	if k := e.key.Load(); uint32(k>>32) != tick && e.key.CompareAndSwap(k, cacheKey(tick, 0)) {
		e.bits = rec.W[0]
		e.key.Store(cacheKey(tick, age) | uint64(rec.N))
	}
}

// fillLong stores rec, slot's record of 65 to maxCachedBits bits for tick and age, unless its
// entry was filled this tick; it reports whether it stored it.
func (c *recordCache) fillLong(slot uint16, tick, age uint32, rec *protocol.RecordBits) bool {
	i := c.index(slot, age)
	e := &c.entries[i]
	k := e.key.Load()
	if rec.N > maxCachedBits || uint32(k>>32) == tick || !e.key.CompareAndSwap(k, cacheKey(tick, 0)) {
		return false
	}
	e.bits, c.hi[i] = rec.W[0], rec.W[1]
	e.key.Store(cacheKey(tick, age) | uint64(rec.N))
	return true
}

// high is bits 64 and up of slot's record for age, which a view found in the cache (or stored
// there) this tick: an entry does not change again within the tick.
func (c *recordCache) high(slot uint16, age uint32) uint64 { return c.hi[c.index(slot, age)] }

// Shared is what the views of one entity store share: the record cache of the tick, and the
// scratch arrays of the builds running at once. The server loop makes one per store and hands it
// to every view it creates (NewView).
type Shared struct {
	records *recordCache
	scratch scratchPool
}

// NewShared returns the shared state for the views of a store of capacity slots.
func NewShared(capacity int) *Shared {
	return &Shared{records: newRecordCache(capacity)}
}
