package entity

import "github.com/netfleet/netfleet/gameserver/protocol"

// What replication reads. These take a slot below Capacity; for a slot that is not alive they
// return the last incarnation's values. The slices are the store's own: callers must not modify
// them, and they change at the next Advance, Spawn or Commit.

// Metas returns every slot's position, liveness, generation and change tick, indexed by slot.
func (s *Store) Metas() []SlotMeta { return s.meta }

// Kinds returns every slot's kind, indexed by slot.
func (s *Store) Kinds() []Kind { return s.kind }

// States returns every slot's current quantized state, indexed by slot.
func (s *Store) States() []protocol.State { return s.states }

// History returns the state history: HistoryTicks rows of Capacity states, the row of tick t at
// t % HistoryTicks. A row holds the states of its tick for as long as the tick is among the last
// HistoryTicks ticks (StateAt checks that).
func (s *Store) History() []protocol.State { return s.hist }

// StateAt returns the slot's quantized state at a past tick, if tick is one of the last
// HistoryTicks ticks.
func (s *Store) StateAt(slot uint16, tick uint32) (*protocol.State, bool) {
	h := uint32(s.cfg.HistoryTicks)
	if tick > s.tick || s.tick-tick >= h {
		return nil, false
	}
	return &s.hist[int(tick&(h-1))*len(s.states)+int(slot)], true
}

// Bumps are the committed tick's priority bumps.
func (s *Store) Bumps() []Bump { return s.bumps[:s.committed] }

// Reach bounds how far entities move: between two calls, no entity alive through both moved
// farther than the difference of their results (in meters, horizontally), however many ticks
// passed and however the game moved it. An entity that spawned between them may be anywhere
// (SpawnedSince).
func (s *Store) Reach() float64 { return s.reach }

// SpawnedSince lists the slots whose entities spawned at tick or later, a spawn's tick being the
// store's Tick when it spawned (the tick a game step is in, or the last one for a spawn between
// steps). So a viewer that looked at the store at some tick, and asks later with that tick, sees
// every entity spawned since it looked (and some it may have seen already). A slot may be listed
// more than once, and its entity may have despawned since; the list changes at the next Advance
// or Spawn.
//
// It reports false, and lists nothing, for a tick it no longer covers: one that is not among the
// last HistoryTicks, or one older than the spawns it kept, the newest twice the store's capacity
// of them (a store that spawns more than that within the history).
func (s *Store) SpawnedSince(tick uint32) ([]uint16, bool) {
	return s.log.since(tick, s.tick, uint32(s.cfg.HistoryTicks))
}

// Query appends to out every live entity within radius meters of (x, y), measured on the
// horizontal plane at the positions of the last Commit, and returns it. With out's capacity
// reused it allocates nothing.
func (s *Store) Query(x, y, radius float32, out []Hit) []Hit {
	return s.grid.query(x, y, radius, out)
}

// QueryNew is Query for the entities not in known, a bitmap of slots (slot s is bit s%8 of
// known[s/8]) that covers every slot: what a viewer tracking the known slots newly sees.
func (s *Store) QueryNew(x, y, radius float32, known []uint8, out []Hit) []Hit {
	return s.grid.queryNew(x, y, radius, known[:(len(s.meta)+7)/8], out)
}

// Layout is the store's compiled schema.
func (s *Store) Layout() *protocol.Layout { return s.layout }

// Fields returns every slot's committed field words, Layout().Stride() words a slot, indexed by
// slot.
func (s *Store) Fields() []uint32 { return s.fields }

// FieldHistory returns the history of the field words: HistoryTicks rows of Capacity slots of
// Layout().Stride() words, the row of tick t at t % HistoryTicks, like History.
func (s *Store) FieldHistory() []uint32 { return s.fieldHist }

// Visibilities returns every slot's visibility, indexed by slot; replication reads a slot's only
// when its SlotMeta.Special is set.
func (s *Store) Visibilities() []Visibility { return s.vis }

// AlwaysRelevant lists the live slots whose entities are relevant wherever they are
// (Visibility.Always, or a kind without a position), in no order.
func (s *Store) AlwaysRelevant() []uint16 { return s.always }
